"""A config_check item as a third party would ship it: the git commit of the training code.

Two runs whose code differs in a commit (or in uncommitted edits) are not the
same experiment; this checker records ``git rev-parse HEAD`` and whether the
work tree is dirty, for the folder of each script the user names (or the
current folder).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from probe_core.api import CheckContext, CheckerSpec, CheckRow, hookimpl


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def collect(ctx: CheckContext) -> dict | None:
    folders = {Path(p).resolve().parent for p in ctx.shell_paths} or {Path.cwd()}
    repos = {}
    for folder in sorted(folders):
        top = _git(folder, "rev-parse", "--show-toplevel")
        if top is None or top in repos:
            continue
        repos[top] = {"commit": _git(folder, "rev-parse", "HEAD"),
                      "dirty": bool(_git(folder, "status", "--porcelain"))}
    return {"repositories": sorted(repos.values(), key=lambda r: r["commit"] or "")} if repos else None


def compare(bench: dict | None, target: dict | None) -> list[CheckRow]:
    bench_repos = (bench or {}).get("repositories", [])
    target_repos = (target or {}).get("repositories", [])
    rows = [CheckRow("commits", [r["commit"] for r in bench_repos], [r["commit"] for r in target_repos],
                     passed=[r["commit"] for r in bench_repos] == [r["commit"] for r in target_repos])]
    dirty = [r["dirty"] for r in bench_repos + target_repos]
    rows.append(CheckRow("uncommitted changes", [r["dirty"] for r in bench_repos],
                         [r["dirty"] for r in target_repos], passed=not any(dirty),
                         note="commit both work trees to compare exact code" if any(dirty) else ""))
    return rows


@hookimpl
def probe_checkers() -> list[CheckerSpec]:
    return [CheckerSpec("git_commit", "git commit and dirty state of the training code", collect, compare)]

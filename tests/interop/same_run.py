"""One seeded run dumped by msprobe (in its venv) and by probe, then compared by both tools."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.interop.msprobe_env import msprobe_cli, run_msprobe_python


def write_config(dump: Path, task: str) -> None:
    """``{dump}.config.json``: the same msprobe config for both tools (level mix; md5 is statistics + md5)."""
    section: dict = {"scope": [], "list": [], "data_mode": ["all"]}
    if task == "md5":
        task, section["summary_mode"] = "statistics", "md5"
    config = {"task": task, "dump_path": str(dump), "rank": [], "step": [], "level": "mix", task: section}
    Path(f"{dump}.config.json").write_text(json.dumps(config), encoding="utf-8")


def dump_both(msprobe: str, tmp_path: Path, task: str, script_text: str) -> tuple[Path, Path]:
    """Run ``script_text`` (argv: tool, task, dump path; it reads ``{dump}.config.json``) under msprobe and
    under probe: (probe's dump, msprobe's)."""
    script = tmp_path / "train.py"
    script.write_text(script_text, encoding="utf-8")
    theirs, ours = tmp_path / "msprobe_dump", tmp_path / "probe_dump"
    write_config(theirs, task)
    write_config(ours, task)
    done = run_msprobe_python(msprobe, script, "msprobe", task, theirs, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    env = dict(os.environ, OMP_NUM_THREADS="1")  # as msprobe's run: one thread sums in one order (md5 is bitwise)
    done = subprocess.run([sys.executable, str(script), "probe", task, str(ours)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return ours, theirs


def rank_folder(dump: Path, step: int) -> Path:
    (folder,) = [p for p in (dump / f"step{step}").iterdir() if p.is_dir()]  # rank0 (probe), proc{pid} (msprobe)
    return folder


def entries(dump: Path, step: int) -> dict:
    return json.loads((rank_folder(dump, step) / "dump.json").read_text())["data"]


def probe_compare_counts(ours: Path, theirs: Path, out: Path) -> dict:
    """``probe compare OURS THEIRS``: the summary's counts."""
    done = subprocess.run([str(Path(sys.executable).parent / "probe"), "compare", str(ours), str(theirs), "-o",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads((out / "summary.json").read_text())["counts"]


def msprobe_compare_rows(msprobe: str, ours: Path, theirs: Path, out: Path) -> list[dict[str, str]]:
    """``msprobe compare`` of step 0, probe's dump as the target: its CSV rows."""
    done = msprobe_cli(msprobe, "compare", "-tp", rank_folder(ours, 0) / "dump.json",
                       "-gp", rank_folder(theirs, 0) / "dump.json", "-o", out, cwd=out.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (result,) = out.glob("compare_result_*.csv")
    with result.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def without_bench(rows: list[dict[str, str]]) -> list[str]:
    return [row["NPU Name"] for row in rows if row["Bench Name"] in ("", "N/A")]


def errors(rows: list[dict[str, str]]) -> list[str]:
    return [row["NPU Name"] for row in rows if row["Result"].lower() == "error"]

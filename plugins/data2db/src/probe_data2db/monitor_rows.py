"""Monitor output (probe's ``rank{R}/`` folders or msprobe's ``{time}-rank{R}-{hash}/``, files
``{metric}_{first}-{last}.csv``) into the trend database as msprobe's ``data2db --format monitor`` puts it there.

* Metrics: the files' quantities (actv, actv_grad, exp_avg, exp_avg_sq, grad_unreduced, grad_reduced,
  param_origin, param_updated, other); statistics: the files' columns among norm, min, max, zeros, nans, mean,
  entropy, ... (a statistic a file lacks is NULL).
* With micro steps (the default) the step column counts micro steps over the run (a step with micro steps 0-3
  takes four); without, it is the file's step and the target's ``micro_step`` column holds the micro step.
"""

from __future__ import annotations

import csv
import re
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path

from probe_core.api import tag_started

from probe_data2db.trenddb import MONITOR_DB, TrendDB

METRICS = ("actv", "actv_grad", "exp_avg", "exp_avg_sq", "grad_unreduced", "grad_reduced", "param_origin",
           "param_updated", "other")
STATS = ("norm", "min", "max", "zeros", "nans", "mean", "entropy", "softmax_max", "sr", "kernel_norm", "std_x",
         "jacobian", "proxy", "token_similarity")
MSPROBE_DIR = re.compile(r"^([\w-]{0,20})-rank(\d{1,5})-")
PROBE_DIR = re.compile(r"^rank(\d+)$")
_FILE = re.compile(rf"^({'|'.join(sorted(METRICS, key=len, reverse=True))})_(\d+)-(\d+)\.csv$")


def rank_folders(data: Path) -> tuple[str, dict[int, Path]]:
    """(which layout was found, rank -> folder): msprobe's ``{time}-rank{R}-{hash}`` folders (the newest of a
    rank when several runs left theirs), else probe's ``rank{R}``; ``("", {})`` when neither is there."""
    children = sorted((p for p in data.iterdir() if p.is_dir()), key=tag_started)
    found: dict[int, Path] = {}
    for child in children:
        if match := MSPROBE_DIR.match(child.name):
            found[int(match.group(2))] = child  # in the order the runs started: the newest stays
    if found:
        return "msprobe's layout ({time}-rank{R}-{hash}/)", found
    found = {int(m.group(1)): child for child in children if (m := PROBE_DIR.match(child.name))}
    return ("probe's layout (rank{R}/)", found) if found else ("", {})


def _rows(folders: Mapping[int, Path], mapping: Mapping[str, str]) -> Iterator[tuple]:
    for rank, folder in sorted(folders.items()):
        for path in sorted(folder.iterdir()):
            if not (match := _FILE.match(path.name)):
                continue
            with path.open(newline="") as handle:
                for line, row in enumerate(csv.DictReader(handle), start=2):
                    try:
                        name = str(row["name"])
                        vpp, step = int(row["vpp_stage"]), int(row.get("step") or 0)
                        micro = int(row.get("micro_step") or 0)
                    except (KeyError, TypeError, ValueError) as exc:
                        print(f"probe data2db: {path}:{line}: row skipped (no valid name, vpp_stage, step or "
                              f"micro_step: {exc})", file=sys.stderr)
                        continue
                    for old, new in mapping.items():
                        name = name.replace(old, new)
                    yield rank, match.group(1), name, vpp, step, micro, row


def monitor_tags(name: str) -> set[tuple[str, str]]:
    """The viewer's tags of a monitor target: each name part (module) and each ``part.N`` (layer)."""
    parts = name.split(".")
    tags = {(part, "module") for part in parts if not part.isdigit()}
    tags |= {(f"{parts[i - 1]}.{part}", "layer") for i, part in enumerate(parts)
             if part.isdigit() and i > 0 and not parts[i - 1].isdigit()}
    return tags


def import_monitor(folders: Mapping[int, Path], db_dir: Path, mapping: Mapping[str, str],
                   use_micro_steps: bool) -> tuple[Path, int] | None:
    """Write ``db_dir/monitor_data.trend.db`` from the rank folders; returns (its path, rows stored), or None
    when they hold no monitor CSV file."""
    stats_of: dict[str, set[str]] = defaultdict(set)
    micros: dict[int, int] = defaultdict(int)
    steps, ranks = set(), set()
    for rank, metric, _, _, step, micro, row in _rows(folders, mapping):
        ranks.add(rank)
        stats_of[metric].update(stat for stat in row if stat in STATS)
        micros[step] = max(micros[step], micro + 1)
        steps.add(step)
    if not stats_of:
        return None
    offset, total = {}, 0
    for step in sorted(micros):
        offset[step], total = total, total + micros[step]
    metrics = [m for m in METRICS if m in stats_of]
    stats = [s for s in STATS if any(s in found for found in stats_of.values())]
    span = (0, total - 1) if use_micro_steps else (min(steps), max(steps))
    with TrendDB(db_dir / MONITOR_DB, metrics, stats) as db:
        for rank, metric, name, vpp, step, micro, row in _rows(folders, mapping):
            at, target_micro = (offset[step] + micro, 0) if use_micro_steps else (step, micro)
            db.add(rank, at, metric, (name, vpp, target_micro), (row.get(stat) for stat in stats))
        rows = db.finish({"min_step": span[0], "max_step": span[1], "max_rank": max(ranks),
                          **{m: [s for s in STATS if s in stats_of[m]] for m in metrics}}, monitor_tags)
    return db.path, rows

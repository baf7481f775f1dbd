"""probe against msprobe on a dump folder: graph parents and nodes that differ, compare Results that differ.

    python benchmarks/msprobe_parity.py RANK_FOLDER [--bench RANK_FOLDER] [--msprobe PYTHON] [--keep OUT]

``RANK_FOLDER`` holds one rank's dump.json, stack.json and construct.json (e.g. msprobe's example
``examples/quick_start/gpu_dump/step0/proc2016``). Builds the graph with ``probe graph`` and with msprobe's
``graph_visualize`` (the msprobe venv's python, default ``.venv-msprobe/bin/python``) and prints the nodes only one
tool shows, the nodes whose parent (``up_node``) differs and those whose children differ, for ``probe graph`` and
``probe graph --rules msprobe``, with a few examples of each.

With ``--bench`` (another rank folder, e.g. ``.../step0/proc2016`` against ``.../step1/proc2016``) it also runs
``probe compare --rules msprobe`` and ``msprobe compare`` on the pair and prints the rows only one CSV holds and
the rows whose Result differs, counted by (API or module, msprobe's Result, probe's Result).
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MSPROBE_MAIN = "import sys; from msprobe.msprobe import main; sys.exit(main())"
SHOWN = 5


def tree(db: Path) -> dict[str, tuple[str, str]]:
    """``{node: (parent, children as stored)}`` of a ``.vis.db`` (one graph)."""
    with sqlite3.connect(db) as connection:
        return {name: (parent, children) for name, parent, children in
                connection.execute("SELECT node_name, up_node, sub_nodes FROM tb_nodes")}


def build(command: list[str], out: Path) -> Path:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} ... failed:\n{done.stderr[-2000:]}")
    found = sorted(out.glob("*.vis.db"))
    if not found:
        sys.exit(f"{out}: no .vis.db written by {' '.join(command[:3])}")
    return found[-1]


def graph_parity(folder: Path, msprobe_python: str, out: Path) -> int:
    """Print the node, parent and child-order differences of probe's graphs (default, ``--rules msprobe``) against
    msprobe's; return how many differences the ``--rules msprobe`` graph has."""
    theirs = tree(build([msprobe_python, "-c", MSPROBE_MAIN, "graph_visualize", "-tp", str(folder), "-o",
                         str(out / "msprobe")], out / "msprobe"))
    differing = 0
    for rules in ("noise", "msprobe"):
        where = out / f"probe_{rules}"
        ours = tree(build([str(Path(sys.executable).parent / "probe"), "graph", str(folder), "-o", str(where),
                           "--rules", rules], where))
        only_probe, only_msprobe = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
        common = set(ours) & set(theirs)
        moved = sorted(n for n in common if ours[n][0] != theirs[n][0])
        reordered = sorted(n for n in common if json.loads(ours[n][1] or "[]") != json.loads(theirs[n][1] or "[]"))
        print(f"graph (probe --rules {rules}): probe {len(ours)} nodes, msprobe {len(theirs)}; only probe "
              f"{len(only_probe)}, only msprobe {len(only_msprobe)}, parents differing {len(moved)} of {len(common)}, "
              f"children differing {len(reordered)}")
        for label, names in (("only probe", only_probe), ("only msprobe", only_msprobe)):
            for name in names[:SHOWN]:
                print(f"  {label}: {name}")
        for name in moved[:SHOWN]:
            print(f"  parent of {name}: probe {ours[name][0]}, msprobe {theirs[name][0]}")
        differing = len(only_probe) + len(only_msprobe) + len(moved) + len(reordered)
    return differing


def csv_rows(folder: Path) -> list[dict[str, str]]:
    found = sorted(folder.glob("compare_result_*.csv"))
    if not found:
        sys.exit(f"{folder}: no compare_result_*.csv written")
    with open(found[-1], newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def as_step(folder: Path, where: Path) -> Path:
    """A step folder holding a copy of rank ``folder`` alone: what ``msprobe compare`` takes."""
    rank = where / folder.name
    rank.mkdir(parents=True, exist_ok=True)
    for name in ("dump.json", "stack.json", "construct.json"):
        if (folder / name).is_file():
            shutil.copy(folder / name, rank / name)
    return where


def kind(name: str) -> str:
    """``Functional.batch_norm.52.backward.output.1`` -> ``Functional.batch_norm``."""
    return ".".join(name.split(".")[:2])


def compare_parity(target: Path, bench: Path, msprobe_python: str, out: Path) -> int:
    """Print how ``probe compare --rules msprobe``'s CSV differs from ``msprobe compare``'s on one rank pair
    (rows one CSV lacks, Results that differ); return how many rows differ."""
    run = [msprobe_python, "-c", MSPROBE_MAIN, "compare", "-tp", str(as_step(target, out / "in" / "target")),
           "-gp", str(as_step(bench, out / "in" / "bench")), "-o", str(out / "msprobe_compare")]
    for command in (run, [str(Path(sys.executable).parent / "probe"), "compare", str(target), str(bench),
                          "-o", str(out / "probe_compare"), "--rules", "msprobe", "--quiet"]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{' '.join(command[:5])} ... failed:\n{(done.stderr or done.stdout)[-2000:]}")
    theirs, ours = csv_rows(out / "msprobe_compare"), csv_rows(out / "probe_compare")
    key = lambda row: (row["NPU Name"], row["Bench Name"])  # noqa: E731
    ours_by = {key(row): row for row in ours}
    missing = [key(row) for row in theirs if key(row) not in ours_by]
    extra = sorted(set(ours_by) - {key(row) for row in theirs})
    same_order = [key(row) for row in theirs] == [key(row) for row in ours]
    kinds: collections.Counter = collections.Counter()
    examples: dict[tuple[str, str, str], str] = {}
    for row in theirs:
        mine = ours_by.get(key(row))
        if mine is not None and mine["Result"] != row["Result"]:
            label = (kind(row["NPU Name"]), row["Result"], mine["Result"])
            kinds[label] += 1
            examples.setdefault(label, row["NPU Name"])
    print(f"compare (probe --rules msprobe): msprobe {len(theirs)} rows, probe {len(ours)}; only msprobe "
          f"{len(missing)}, only probe {len(extra)}, same order {same_order}; Result differs on "
          f"{sum(kinds.values())} rows")
    for name in (missing[:SHOWN]):
        print(f"  only msprobe: {name}")
    for name in (extra[:SHOWN]):
        print(f"  only probe: {name}")
    for (api, theirs_result, ours_result), count in kinds.most_common():
        print(f"  {count} {api}: msprobe {theirs_result}, probe {ours_result} "
              f"(e.g. {examples[(api, theirs_result, ours_result)]})")
    return len(missing) + len(extra) + sum(kinds.values())


def parity(args: argparse.Namespace, out: Path) -> None:
    graph_parity(args.folder, args.msprobe, out)
    if args.bench is not None:
        compare_parity(args.folder, args.bench, args.msprobe, out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="one rank's dump folder (dump.json, stack.json, construct.json)")
    parser.add_argument("--bench", type=Path, help="a bench rank folder: also compare FOLDER (target) with it "
                        "in both tools and print the rows whose Result differs")
    parser.add_argument("--msprobe", default=str(REPO / ".venv-msprobe" / "bin" / "python"),
                        help="python of a venv with msprobe (mindstudio-probe) installed")
    parser.add_argument("--keep", type=Path, help="write the outputs here (default: a temporary folder)")
    args = parser.parse_args()
    for folder in (args.folder, args.bench):
        if folder is not None and not (folder / "dump.json").is_file():
            parser.error(f"{folder}: no dump.json; pass one rank's dump folder")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        parity(args, args.keep)
        return 0
    with tempfile.TemporaryDirectory() as out:
        parity(args, Path(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

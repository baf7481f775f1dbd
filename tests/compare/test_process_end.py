"""``probe compare`` leaves its indexes and facts to the process's end (``args.process_ends``, set by the console
script): the CSV is the one a compare in a process that goes on writes, and that compare freezes and keeps
nothing."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from probe_core.cli import main

DUMP = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe_pytorch_stat_mix" / "step0" / "proc11440"
PROBE = str(Path(sys.executable).parent / "probe")


def _csv(folder: Path) -> list[str]:
    found = sorted(folder.glob("compare_result_*.csv"))
    assert len(found) == 1, found
    lines = found[0].read_text().splitlines()
    assert len(lines) > 100
    return lines


def test_the_cli_leaves_its_objects_to_the_exit_and_writes_what_an_in_process_compare_writes(tmp_path):
    done = subprocess.run([PROBE, "compare", "--quiet", str(DUMP), str(DUMP), "-o", str(tmp_path / "cli")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    frozen, objects = gc.get_freeze_count(), len(gc.get_objects())

    assert main(["compare", "--quiet", str(DUMP), str(DUMP), "-o", str(tmp_path / "here")]) == 0

    assert gc.get_freeze_count() == frozen  # nothing frozen in a process that goes on
    gc.collect()
    assert len(gc.get_objects()) < objects + 5000  # and nothing of the compare kept (a few caches grow)
    assert _csv(tmp_path / "cli") == _csv(tmp_path / "here")


def test_only_a_single_pair_is_left_to_the_exit(tmp_path, monkeypatch):
    """Over many pairs (steps or ranks) each pair's index and forms go once it is compared, as before: leaving
    them all to the exit would pile them up in memory."""
    import shutil

    import probe_compare.engine as engine
    import probe_compare.rank as rank
    from probe_compare.options import CompareOptions
    from probe_core.plugins import current_registry

    left: list[object] = []
    for module in (engine, rank):
        monkeypatch.setattr(module, "left_to_exit", left.append)
    for side in ("t", "b"):
        for step in (0, 1):
            shutil.copytree(DUMP, tmp_path / side / f"step{step}" / "rank0")

    def compare(target: Path, bench: Path, out: str) -> int:
        options = CompareOptions(target, bench, tmp_path / out, progress=False, process_ends=True)
        engine.run_compare(options, current_registry())
        return len(left)

    assert compare(tmp_path / "t", tmp_path / "b", "two") == 0
    assert compare(tmp_path / "t" / "step0" / "rank0", tmp_path / "b" / "step0" / "rank0", "one") == 2

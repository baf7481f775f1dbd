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

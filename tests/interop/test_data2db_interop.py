"""probe data2db and msprobe data2db on the same dump and monitor output write the same trend databases (the
same targets, measurements, tags and global statistics; row ids aside)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.core.conftest import run_probe
from tests.data2db.trend_content import differences, trend_content
from tests.interop.msprobe_env import msprobe_cli

REPO = Path(__file__).resolve().parents[2]


def test_probe_and_msprobe_write_the_same_trend_databases(msprobe, tmp_path):
    data = tmp_path / "data"  # msprobe's dump (two blocks, 4 model calls) beside msprobe's monitor output
    shutil.copytree(REPO / "tests" / "fixtures" / "msprobe_pytorch_stat_mix" / "step0", data / "step0")
    shutil.copytree(REPO / "tests" / "monitor" / "fixtures" / "msprobe_monitor_csv" / "rank0_out",
                    data / "Nov28_10-00-00-rank0-3f2a")
    theirs = msprobe_cli(msprobe, "data2db", "--db", tmp_path / "theirs", "--data", data)
    assert theirs.returncode == 0, theirs.stderr
    ours = run_probe("data2db", "--db", tmp_path / "ours", "--data", data)
    assert ours.returncode == 0, ours.stderr
    for name in ("dump_data.trend.db", "monitor_data.trend.db"):
        mine, other = trend_content(tmp_path / "ours" / name), trend_content(tmp_path / "theirs" / name)
        assert len(mine["trend"]) > 300 and differences(mine, other) == {}, name

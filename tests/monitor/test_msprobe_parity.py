"""One tiny training run under msprobe 26.2.0's TrainerMon and under probe's: the same folder layout and files,
msprobe's ``csv2tensorboard_by_step`` reads probe's output, and ``probe monitor compare`` of the two outputs
(both ways) finds them in msprobe's layout and agrees on every row (the moments at msprobe's step; msprobe's
6-decimal rounding allowed; probe's ``grad_norm`` derived for msprobe's side)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.interop.msprobe_env import msprobe_python, run_msprobe_python
from tests.monitor.helpers import SCRIPTS, probe, rank_dir, run, write_config

pytestmark = pytest.mark.slow

CSV2TB = ("import sys; from msprobe.pytorch.monitor.csv2tb import csv2tensorboard_by_step; "
          "csv2tensorboard_by_step(sys.argv[1], output_dirpath=sys.argv[2])")
TYPES = ("actv", "actv_grad", "exp_avg", "exp_avg_sq", "grad_unreduced", "grad_reduced", "param_origin",
         "param_updated")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    python, why = msprobe_python()
    if python is None:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("two_tools")
    config = write_config(root / "monitor_config.json", wg_distribution=True, param_distribution=True,
                          mv_distribution=True, xy_distribution=True, ops=["min", "max", "mean", "norm"])
    for tool in ("msprobe", "probe"):
        (root / tool).mkdir()
    done = run_msprobe_python(python, SCRIPTS / "two_tools.py", "msprobe", config, cwd=root / "msprobe")
    assert done.returncode == 0, done.stderr[-3000:]
    run(sys.executable, SCRIPTS / "two_tools.py", "probe", config, cwd=root / "probe")
    return python, root, root / "msprobe" / "monitor_output", root / "probe" / "monitor_output"


def test_probe_writes_msprobes_folders_and_files(outputs):
    _, _, theirs, ours = outputs
    theirs_files = {p.name for p in rank_dir(theirs).iterdir()}
    ours_files = {p.name for p in rank_dir(ours).iterdir()}
    assert "exp_avg_1-1.csv" in theirs_files and "exp_avg_0-0.csv" not in theirs_files  # msprobe's step convention
    assert ours_files - theirs_files == {f"grad_norm_{s}-{s}.csv" for s in range(4)}
    assert theirs_files <= ours_files


def test_msprobes_csv2tensorboard_reads_probes_output(outputs):
    python, root, _, ours = outputs
    done = run_msprobe_python(python, "-c", CSV2TB, ours, root / "tb")
    assert done.returncode == 0, done.stderr[-3000:]
    for data_type in TYPES:
        assert list((root / "tb" / "rank0" / data_type).glob("events.out.tfevents.*")), data_type


@pytest.mark.parametrize("order", ["probe_first", "msprobe_first"])
def test_a_monitor_compare_across_the_tools_agrees(outputs, order):
    _, root, theirs, ours = outputs
    a, b = (ours, theirs) if order == "probe_first" else (theirs, ours)
    done = probe("monitor", "compare", a, b, "-o", root / order, "--no-xlsx", cwd=root)
    assert f"read {a}: msprobe's layout ({{time}}-rank{{R}}-{{id}}/), ranks 0" in done.stdout
    summary = json.loads((root / order / "summary.json").read_text())
    assert summary["first_divergence"] is None and summary["complete"], done.stdout
    assert "the runs agree at every step (148 rows" in done.stdout

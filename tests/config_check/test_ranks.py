"""Several ranks of one job write into one pack; a rank missing on one side fails the compare."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

from tests.config_check.conftest import clean_env, run_probe

SCRIPT = """
import sys
from probe_config_check import ConfigChecker
ConfigChecker(None, shell_path=sys.argv[2], output_zip_path=sys.argv[1])
"""


def test_two_ranks_share_one_pack_and_compare_rank_by_rank(tmp_path):
    (tmp_path / "run.sh").write_text("python train.py --lr 0.1\n")
    pack = tmp_path / "job.zip"
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(pack), str(tmp_path / "run.sh")],
                              env=clean_env({"RANK": str(rank), "WORLD_SIZE": "2"}), cwd=tmp_path,
                              stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    for proc in procs:
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    with zipfile.ZipFile(pack) as archive:
        names = set(archive.namelist())
        assert json.loads(archive.read("manifest.json"))["ranks"] == [0, 1]
    assert {"rank0/env.json", "rank1/env.json", "rank0/hyperparameters.json", "rank1/pip.json"} <= names
    assert not any("weights" in n or "random" in n for n in names)  # no model, no apply_patches

    single = tmp_path / "single.zip"
    done = run_probe("check", "collect", "-d", tmp_path / "run.sh", "-o", single, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run_probe("check", "compare", pack, single, "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["checkers"]
    for checker in ("env", "pip", "hyperparameters"):
        assert summary[checker]["status"] == "fail"
        assert [(d["rank"], d["item"]) for d in summary[checker]["differences"]] == [(1, "(collected)")]

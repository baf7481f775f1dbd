"""``probe overflow-check`` as a user runs it: help, msprobe's spelling, clean dumps, bad input."""

from __future__ import annotations

import json
import os
import subprocess

from tests.overflow_check.dist_runs import BIN
from tests.overflow_check.dumps import INF, api, tensor, write_rank


def probe(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "probe"), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COLUMNS="200"))


def one_error_line(done: subprocess.CompletedProcess, *words: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_help_says_what_it_reads_and_writes():
    done = probe("overflow-check", "--help")
    assert done.returncode == 0
    for text in ("-i DUMP", "-o OUT", "anomaly_analyze_", "communication", "no NaN/Inf found", "--rank", "--step"):
        assert text in done.stdout, text
    assert "overflow-check" in probe("--help").stdout


def test_rank_folder_with_msprobe_spelling(tmp_path):
    folder = write_rank(tmp_path / "dump" / "step3" / "rank5", {
        "Functional.linear.0.forward": api([tensor()], [tensor()]),
        "Torch.exp.0.forward": api([tensor()], [tensor(INF, 0.0)]),
    })
    done = probe("overflow_check", "--input_path", folder, "--output_path", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "first NaN/Inf of the job: step 3, rank 5, Torch.exp.0.forward (no communication)" in done.stdout
    (report,) = (tmp_path / "out").glob("anomaly_analyze_*.json")
    assert [node["op_name"] for node in json.loads(report.read_text())["rank_5"]] == ["Torch.exp.0.forward"]


def test_several_steps_give_one_report_per_step_with_a_nan(tmp_path):
    for step in (0, 1):
        write_rank(tmp_path / "dump" / f"step{step}" / "rank0", {"Torch.exp.0.forward": api([tensor()], [tensor(INF)])})
    write_rank(tmp_path / "dump" / "step2" / "rank0", {"Torch.exp.0.forward": api([tensor()], [tensor()])})
    done = probe("overflow-check", "-i", tmp_path / "dump", "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    names = sorted(path.name.split("_")[2] for path in (tmp_path / "out").glob("anomaly_analyze_*.json"))
    assert names == ["step0", "step1"]
    assert "FIRST of the job" in done.stdout and "first of this step" in done.stdout
    assert "[bold" not in done.stdout and "[/]" not in done.stdout  # the order is styled, not printed as markup


def test_clean_dump(tmp_path):
    folder = write_rank(tmp_path / "rank0", {"Tensor.add.0.forward": api([tensor()], [tensor()])})
    done = probe("overflow-check", "-i", folder, "-o", tmp_path / "out")
    assert done.returncode == 0 and "no NaN/Inf found in 1 rank dump(s) of 1 step(s)" in done.stdout
    assert not (tmp_path / "out").exists()


def test_missing_dump(tmp_path):
    one_error_line(probe("overflow-check", "-i", tmp_path / "nowhere"), str(tmp_path / "nowhere"), "no such")


def test_empty_dump_file(tmp_path):
    (tmp_path / "rank0").mkdir()
    (tmp_path / "rank0" / "dump.json").write_text("")
    one_error_line(probe("overflow-check", "-i", tmp_path), "dump.json", "empty", "dump again")


def test_dump_without_entries(tmp_path):
    write_rank(tmp_path / "rank0", {})
    one_error_line(probe("overflow-check", "-i", tmp_path), "rank0/dump.json", "no entries", "filters")


def test_damaged_dump_and_lenient(tmp_path):
    folder = write_rank(tmp_path / "rank0", {"Torch.exp.0.forward": api([tensor()], [tensor(INF, 0.0)]),
                                             "Tensor.add.0.forward": api([tensor()], [tensor()])})
    text = (folder / "dump.json").read_text()
    (folder / "dump.json").write_text(text[: text.index('"Tensor.add.0.forward"') + 30])
    one_error_line(probe("overflow-check", "-i", folder, "-o", tmp_path / "out"), "dump.json", "--lenient")
    done = probe("overflow-check", "-i", folder, "-o", tmp_path / "out", "--lenient")
    assert done.returncode == 0 and "Torch.exp.0.forward" in done.stdout and "warning" in done.stderr


def test_output_path_that_is_a_file(tmp_path):
    folder = write_rank(tmp_path / "rank0", {"Torch.exp.0.forward": api([tensor()], [tensor(INF, 0.0)])})
    (tmp_path / "taken").write_text("")
    one_error_line(probe("overflow-check", "-i", folder, "-o", tmp_path / "taken"), "taken", "not a folder")

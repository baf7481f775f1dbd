"""``probe monitor compare`` on hostile and incomplete monitor outputs (issue 32): NaN/Inf on one side is named
first, damaged files and bad options are one error line (exit 2), rows one run lacks are reported, never
"agree"; the real CLI on real files."""

from __future__ import annotations

import csv
import json
import os
import resource
import signal
import subprocess
from pathlib import Path

import pytest

from tests.robustness.helpers import PROBE, assert_clean_error, env, run_probe

TAGS = ("param_origin", "grad_reduced", "param_updated")
NAMES = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
OPS = ("min", "max", "mean", "norm")


def write_run(root: Path, steps=range(4), names=NAMES, ops=OPS) -> Path:
    """A monitor output as the csv writer lays it out: ``root/rank0/{tag}_{step}-{step}.csv``."""
    folder = root / "rank0"
    folder.mkdir(parents=True)
    for step in steps:
        for tag in TAGS:
            with open(folder / f"{tag}_{step}-{step}.csv", "w", newline="") as handle:
                out = csv.writer(handle)
                out.writerow(["vpp_stage", "name", "step", *ops, "shape", "dtype"])
                for i, name in enumerate(names):
                    values = [repr(1.0 + 0.1 * step + 0.01 * i + 0.001 * OPS.index(op)) for op in ops]
                    out.writerow([0, name, step, *values, "[4, 8]", "torch.float32"])
    return root


def set_value(root: Path, tag: str, step: int, name: str, op: str, text: str) -> None:
    path = root / "rank0" / f"{tag}_{step}-{step}.csv"
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
        header = list(rows[0])
    for row in rows:
        if row["name"] == name:
            row[op] = text
    with open(path, "w", newline="") as handle:
        out = csv.DictWriter(handle, header)
        out.writeheader()
        out.writerows(rows)


def compare(tmp_path: Path, *options: str, out: str = "out") -> tuple[subprocess.CompletedProcess, dict]:
    done = run_probe("monitor", "compare", "a", "b", "-o", out, "--no-xlsx", *options, cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    summary = tmp_path / out / "summary.json"
    return done, json.loads(summary.read_text()) if done.returncode == 0 else {}


@pytest.fixture
def runs(tmp_path):
    write_run(tmp_path / "a")
    write_run(tmp_path / "b")
    return tmp_path


# -- NaN/Inf on one side: a finding, named first ------------------------------------------------------------


@pytest.mark.parametrize("bad", ["nan", "-inf"])
def test_nan_or_inf_on_one_side_is_named_before_an_ordinary_divergence_at_its_step(runs, bad):
    set_value(runs / "a", "param_origin", 2, "fc1.bias", "max", "9.0")  # ordinary, earlier along the chain
    set_value(runs / "a", "grad_reduced", 2, "fc2.weight", "norm", bad)
    set_value(runs / "a", "param_updated", 3, "fc1.weight", "norm", "7.0")  # ordinary, a later step
    done, summary = compare(runs)
    assert done.returncode == 0, done.stderr
    first = summary["first_divergence"]
    assert (first["step"], first["rank"], first["quantity"], first["name"]) == (2, 0, "grad_reduced", "fc2.weight")
    assert first["nan_inf"] == ["norm"] and first["a"]["norm"] == str(float(bad)) and first["rel_diff"] == "inf"
    assert summary["nan_inf"]["rows"] == 1 and summary["nan_inf"]["first"][0]["name"] == "fc2.weight"
    headline = done.stdout.splitlines()[0]
    assert headline.startswith("The runs part at step 2, rank 0: grad_reduced of fc2.weight (module fc2): "
                               "NaN/Inf on one side (norm A=")
    assert f"A={float(bad):.6g}" in headline
    with open(runs / "out" / "monitor_compare.csv", newline="") as handle:
        flagged = [r for r in csv.DictReader(handle) if r["nan_inf"]]
    assert [(r["step"], r["quantity"], r["name"], r["nan_inf"]) for r in flagged] == [
        ("2", "grad_reduced", "fc2.weight", "norm")]


def test_an_ordinary_divergence_at_an_earlier_step_stays_first_and_the_nan_is_still_reported(runs):
    set_value(runs / "a", "param_updated", 1, "fc1.weight", "norm", "7.0")
    set_value(runs / "b", "grad_reduced", 3, "fc1.bias", "mean", "nan")  # NaN in B only
    done, summary = compare(runs)
    assert done.returncode == 0
    assert (summary["first_divergence"]["step"], summary["first_divergence"]["nan_inf"]) == (1, [])
    assert summary["nan_inf"]["first"][0] | {"a": None, "b": None} == {
        "step": 3, "rank": 0, "quantity": "grad_reduced", "name": "fc1.bias", "module": "fc1", "micro_step": None,
        "nan_inf": ["mean"], "a": None, "b": None}
    assert ("NaN/Inf on one side in 1 rows; the first: step 3, rank 0: grad_reduced of fc1.bias (module fc1)"
            in done.stdout)


def test_nan_on_both_sides_is_no_difference(runs):
    for side in ("a", "b"):
        set_value(runs / side, "grad_reduced", 1, "fc1.bias", "norm", "nan")
    done, summary = compare(runs)
    assert summary["first_divergence"] is None and summary["nan_inf"]["rows"] == 0
    assert "the runs agree at every step" in done.stdout


# -- what the runs do not share: reported, never "agree" ------------------------------------------------------


def test_steps_one_run_lacks_are_reported_not_agreed_on(tmp_path):
    write_run(tmp_path / "a", steps=range(4))
    write_run(tmp_path / "b", steps=range(2))
    done, summary = compare(tmp_path)
    assert done.returncode == 0
    assert "agree at every step" not in done.stdout
    assert "no divergence in the rows both runs have" in done.stdout
    assert "not compared: 24 rows (steps 2-3: param_origin, grad_reduced, param_updated) only in A" in done.stdout
    assert summary["complete"] is False and summary["only_in_a"] == 24 and summary["only_in_b"] == 0
    assert summary["unmatched"]["only_in_a"] | {"statistics": []} == {
        "rows": 24, "steps": "2-3", "ranks": "0", "quantities": list(TAGS), "statistics": []}


def test_statistics_one_run_lacks_are_reported(tmp_path):
    write_run(tmp_path / "a", ops=("min", "max", "norm"))
    write_run(tmp_path / "b", ops=("norm",))
    done, summary = compare(tmp_path)
    assert "no divergence in the rows both runs have" in done.stdout
    assert "not compared: statistics only A records: max, min" in done.stdout
    assert summary["unmatched"]["only_in_a"]["statistics"] == ["max", "min"] and not summary["complete"]


def test_no_row_in_common_is_an_error(tmp_path):
    write_run(tmp_path / "a", names=("fc1.weight",))
    write_run(tmp_path / "b", names=("encoder.weight",))
    line = assert_clean_error(run_probe("monitor", "compare", "a", "b", "-o", "out", cwd=tmp_path),
                              "nothing to compare between a and b", "no row in common")
    assert "param_origin, grad_reduced, param_updated at steps 0-3" in line


def test_no_statistic_in_common_is_an_error(tmp_path):
    write_run(tmp_path / "a", ops=("min",))
    write_run(tmp_path / "b", ops=("norm",))
    assert_clean_error(run_probe("monitor", "compare", "a", "b", "-o", "out", cwd=tmp_path),
                       "nothing to compare", "no statistic in common (a: min; b: norm)")


def test_a_file_without_statistic_columns_is_an_error(tmp_path):
    write_run(tmp_path / "a")
    write_run(tmp_path / "b", ops=())
    assert_clean_error(run_probe("monitor", "compare", "a", "b", "-o", "out", cwd=tmp_path),
                       str(Path("b") / "rank0" / "grad_reduced_0-0.csv"), "line 1: no statistic column")


@pytest.mark.parametrize("flag, value", [("--rtol", "nan"), ("--rtol", "-1"), ("--noise-factor", "inf")])
def test_bad_tolerances_are_one_error_line(runs, flag, value):
    assert_clean_error(run_probe("monitor", "compare", "a", "b", "-o", "out", flag, value, cwd=runs),
                       f"{flag} {float(value)}: must be a finite number >= 0")
    assert not (runs / "out").exists()


# -- damaged files: one line naming file, line and column ------------------------------------------------------

TARGET = Path("a") / "rank0" / "grad_reduced_1-1.csv"


def _truncated(data: bytes) -> bytes:
    return data[:data.index(b"fc1.bias") + 20]


def _huge_field(data: bytes) -> bytes:
    return data.replace(b"fc1.bias", b"x" * 200_000)


@pytest.mark.parametrize("damage, needles", [
    (_truncated, ("line 3 has 5 fields, the header 9", "truncated")),
    (lambda data: data.replace(b"fc1.bias", b"fc1.\xff\xfebias"), ("line 3, column 7: byte 0xff is not UTF-8",)),
    (lambda data: data.replace(b',"[4, 8]"', b"", 1), ("line 2 has 8 fields",)),
    (_huge_field, ("line 3: field larger than field limit",)),
    (lambda data: b"", ("line 1: no header",)),
    (lambda data: data.replace(b"step,", b"stop,", 1), ('line 1: no column "step"',)),
    (lambda data: data.replace(b"fc1.bias,1,", b"fc1.bias,one,"), ('line 3, column "step": \'one\' is not an',)),
    (lambda data: data.replace(b"fc1.bias,1,", b"fc1.bias,1,abc"), ('line 3, column "min": ',  "is not a number")),
])
def test_a_damaged_csv_is_one_error_line(runs, damage, needles):
    path = runs / TARGET
    path.write_bytes(damage(path.read_bytes()))
    assert_clean_error(run_probe("monitor", "compare", "a", "b", "-o", "out", cwd=runs), str(TARGET), *needles)


def test_a_fifo_named_like_a_csv_is_refused_not_waited_on(runs):
    os.mkfifo(runs / "a" / "rank0" / "grad_norm_0-0.csv")
    done = run_probe("monitor", "compare", "a", "b", "-o", "out", cwd=runs, timeout=60)
    assert_clean_error(done, str(Path("a") / "rank0" / "grad_norm_0-0.csv"), "is not a regular file")


# -- the output folder ----------------------------------------------------------------------------------------------


def test_output_naming_a_file_is_one_error_line(runs):
    (runs / "taken").write_text("keep me")
    assert_clean_error(run_probe("monitor", "compare", "a", "b", "-o", "taken", cwd=runs),
                       "-o taken: exists and is not a folder")
    assert (runs / "taken").read_text() == "keep me"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder_is_one_error_line(runs):
    (runs / "locked").mkdir(mode=0o555)
    assert_clean_error(run_probe("monitor", "compare", "a", "b", "-o", "locked", cwd=runs),
                       "-o locked: is not writable")


def test_a_full_disk_while_writing_the_results_is_one_error_line(runs):
    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as ENOSPC would
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000, 2_000))

    done = subprocess.run([PROBE, "monitor", "compare", "a", "b", "-o", "out", "--no-xlsx"], cwd=runs, env=env(),
                          capture_output=True, text=True, timeout=120, preexec_fn=small_disk)
    assert_clean_error(done, "writing the monitor compare results in out: the disk is full",
                       "monitor_compare.csv", "nothing was written completely")

"""`probe acc-check` on hostile and damaged inputs (issue 32): it runs nothing but the framework's operators,
and never reports a pass it did not earn."""

from __future__ import annotations

import csv
import json
import os
import pickle

import pytest

from tests.robustness.helpers import assert_clean_error, run_probe

pytest.importorskip("torch")


def tensor(shape=(2, 3), low=-1.0, high=1.0, data_name=None, dtype="torch.float32"):
    leaf = {"type": "torch.Tensor", "dtype": dtype, "shape": list(shape), "Max": high, "Min": low,
            "Mean": (low + high) / 2, "Norm": 1.0, "requires_grad": False}
    if data_name:
        leaf["data_name"] = data_name
    return leaf


def text(value):
    return {"type": "str", "value": value}


def write_dump(folder, entries, task="statistics"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dump.json").write_text(json.dumps({"task": task, "level": "L1", "framework": "pytorch",
                                                  "dump_data_dir": None, "data": entries}))
    return folder / "dump.json"


def results(out):
    (path,) = out.glob("accuracy_checking_result_*.csv")
    with open(path, newline="", encoding="utf-8") as handle:
        return {row["API Name"]: row for row in csv.DictReader(handle)}


class Payload:
    """A pickle that creates a file when unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_dump_cannot_make_acc_check_run_a_command_load_a_pickle_or_write_a_file(tmp_path):
    marker, pickled, written = tmp_path / "PWNED", tmp_path / "evil.pkl", tmp_path / "written.pt"
    pickled.write_bytes(pickle.dumps(Payload(tmp_path / "UNPICKLED")))
    entries = {
        "Torch.os.system.0.forward": {"input_args": [text(f"touch {marker}")], "input_kwargs": {}, "output": []},
        "Functional.os.system.0.forward": {"input_args": [text(f"touch {marker}")], "input_kwargs": {},
                                           "output": []},
        "Torch.load.0.forward": {"input_args": [text(str(pickled))],
                                 "input_kwargs": {"weights_only": {"type": "bool", "value": False}},
                                 "output": [tensor()]},
        "Torch.save.0.forward": {"input_args": [tensor(), text(str(written))], "input_kwargs": {}, "output": []},
        "Torch.hub.load.0.forward": {"input_args": [text("x/y"), text("z")], "input_kwargs": {}, "output": []},
        "Torch.set_num_threads.0.forward": {"input_args": [{"type": "int", "value": 1}], "input_kwargs": {},
                                            "output": []},
        "Tensor.apply_.0.forward": {"input_args": [tensor(), text("print")], "input_kwargs": {}, "output": []},
        "Aten.from_file.0.forward": {"input_args": [text(str(written))], "input_kwargs": {}, "output": []},
        "Functional.relu.0.forward": {"input_args": [tensor()], "input_kwargs": {}, "output": [tensor(low=0.0)]},
    }
    write_dump(tmp_path / "dump", entries)
    done = run_probe("acc-check", "-api_info", tmp_path / "dump", "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert not marker.exists() and not (tmp_path / "UNPICKLED").exists() and not written.exists()
    rows = results(tmp_path / "out")
    refused = {name for name, row in rows.items() if row["Forward Test Success"] == "SKIP"
               and "refused" in row["Message"] and "not a PyTorch operator" in row["Message"]}
    assert refused == {name.rsplit(".", 1)[0] for name in entries} - {"Functional.relu.0"}
    assert rows["Functional.relu.0"]["Forward Test Success"] == "pass"  # real operators still run


def test_the_operator_table_is_the_collectors(tmp_path):
    """What the table hands out: the framework's value operators only (dotted namespaces of torch included)."""
    from probe_core.plugins import current_registry

    table = current_registry().collector_for("pytorch").operators()
    import torch

    assert table("Torch.linalg.norm") is torch.linalg.norm and table("Functional.gelu") is torch.nn.functional.gelu
    assert table("Tensor.__add__") is torch.Tensor.__add__ and table("Aten.mm.default") is torch.ops.aten.mm.default
    assert table("Torch.add") is torch.add and table("Tensor.add_") is torch.Tensor.add_
    for name in ("Torch.os.system", "Torch.load", "Torch.save", "Torch.jit.load", "Torch.classes.x", "Tensor.map_",
                 "Torch.manual_seed", "Torch.from_file", "Aten.from_file", "Torch._C._x", "Tensor.storage",
                 "Torch.sys.exit", "Functional.torch.load", "Torch.nn.Module"):
        assert table(name) is None, name


def test_missing_tensor_files_are_an_error_unless_generated_on_request(tmp_path):
    dump = write_dump(tmp_path / "dump", {
        "Functional.relu.0.forward": {"input_args": [tensor(data_name="Functional.relu.0.forward.input.0.pt")],
                                      "input_kwargs": {}, "output": [tensor(low=0.0)]}}, task="tensor")
    refused = run_probe("acc-check", "-api_info", dump, "-o", tmp_path / "out")
    assert_clean_error(refused, "1 tensor files", "missing", "--generate-missing", "Functional.relu.0.forward.input.0")
    assert not (tmp_path / "out").exists()  # refused before any file is written
    generated = run_probe("acc-check", "-api_info", dump, "-o", tmp_path / "out2", "--generate-missing")
    assert generated.returncode == 0, generated.stderr
    row = results(tmp_path / "out2")["Functional.relu.0"]
    assert "tensor file missing, values generated from its statistics" in row["Message"]


def test_a_data_name_that_leaves_the_dump_is_refused(tmp_path):
    (tmp_path / "outside.pt").write_bytes(b"not read")
    dump = write_dump(tmp_path / "dump", {
        "Functional.relu.0.forward": {"input_args": [tensor(data_name="../../outside.pt")],
                                      "input_kwargs": {}, "output": [tensor(low=0.0)]}}, task="tensor")
    done = run_probe("acc-check", "-api_info", dump, "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    row = results(tmp_path / "out")["Functional.relu.0"]
    assert row["Forward Test Success"] == "SKIP" and "is not a file name inside" in row["Message"]


def test_not_implemented_and_non_finite_bounds_are_no_silent_pass(tmp_path):
    dump = write_dump(tmp_path / "dump", {
        "Tensor.__add__.0.forward": {"input_args": [tensor(), text("x")], "input_kwargs": {}, "output": [tensor()]},
        "Functional.relu.0.forward": {"input_args": [tensor(low=float("-inf"), high=float("nan"))],
                                      "input_kwargs": {}, "output": [tensor(low=0.0)]},
    })
    done = run_probe("acc-check", "-api_info", dump, "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    rows = results(tmp_path / "out")
    assert rows["Tensor.__add__.0"]["Forward Test Success"] == "SKIP"
    assert "NotImplemented" in rows["Tensor.__add__.0"]["Message"]
    assert "non-finite Max/Min" in rows["Functional.relu.0"]["Message"]


def _damage(path, damage, status_column):
    """Append a row to a result/details CSV: bad bytes, a 200,000-character field or an unknown status."""
    header = path.read_text(encoding="utf-8").splitlines()[0].split(",")
    row = ["Functional.x.0.forward.output.0"] + [""] * (len(header) - 1)
    row[header.index(status_column)] = "maybe" if damage == "status" else "pass"
    line = ",".join(row).encode() + b"\n"
    if damage == "bytes":
        line = line.replace(b"pass", b"pass\xff\xfe")
    elif damage == "huge":
        line = line.replace(b"pass", b'"' + b"y" * 200_000 + b'"')
    path.write_bytes(path.read_bytes() + line)


def test_damaged_result_csvs_are_one_line(tmp_path):
    from probe_acc_check.errors import AccCheckError
    from probe_acc_check.precision_compare import compare_results
    from probe_acc_check.results import ResultFiles

    dump = write_dump(tmp_path / "dump", {"Functional.relu.0.forward": {
        "input_args": [tensor()], "input_kwargs": {}, "output": [tensor(low=0.0)]}})
    assert run_probe("acc-check", "-api_info", dump, "-o", tmp_path / "out").returncode == 0
    (result,) = (tmp_path / "out").glob("accuracy_checking_result_*.csv")
    (details,) = (tmp_path / "out").glob("accuracy_checking_details_*.csv")
    whole = result.read_bytes(), details.read_bytes()
    # a huge field: csv's field limit, or (where a library raised the process-wide limit) not a status
    for damage, needle in (("bytes", "not UTF-8"), ("huge", ", line "), ("status", "'maybe' is not a status")):
        result.write_bytes(whole[0]), details.write_bytes(whole[1])
        _damage(result, damage, "Forward Test Success")
        _damage(details, damage, "Status")
        for read, named in ((lambda: ResultFiles.resume(result), result),
                            (lambda: compare_results(result, result, tmp_path / "cmp"), details)):
            with pytest.raises(AccCheckError) as caught:
                read()
            assert len(caught.value.messages) == 1 and named.name in str(caught.value) and needle in str(caught.value)
    resumed = run_probe("acc-check", "-api_info", dump, "-o", tmp_path / "out", "--result_csv_path", result)
    assert_clean_error(resumed, result.name, "'maybe' is not a status")  # the CLI: one red line, exit 2


def test_acc_check_compare_reads_only_regular_files(tmp_path):
    fifo = tmp_path / "accuracy_checking_details_1.csv"
    os.mkfifo(fifo)
    done = run_probe("acc-check", "compare", fifo, fifo, "-o", tmp_path / "cmp", timeout=120)
    assert_clean_error(done, "no such file")


def test_two_runs_in_one_second_keep_their_own_files(tmp_path):
    from probe_acc_check.results import DETAIL_COLUMNS, RESULT_COLUMNS, claim_files

    first = claim_files(tmp_path, "accuracy_checking", {"details": DETAIL_COLUMNS, "result": RESULT_COLUMNS})
    second = claim_files(tmp_path, "accuracy_checking", {"details": DETAIL_COLUMNS, "result": RESULT_COLUMNS})
    assert len(set(first + second)) == 4 and all(p.exists() for p in first + second)
    stamps = {p.name.rsplit("_", 1)[1] for p in first}, {p.name.rsplit("_", 1)[1] for p in second}
    assert len(stamps[0]) == len(stamps[1]) == 1 and stamps[0] != stamps[1]

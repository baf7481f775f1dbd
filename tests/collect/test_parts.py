"""The collection's parts on their own: naming, batch, writer, the facade, and the TensorOps contract."""

from __future__ import annotations

import importlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from probe_core.collect.batch import Batch
from probe_core.collect.filters import EntryFilter
from probe_core.collect.journal import JOURNAL_NAME
from probe_core.collect.naming import Naming, backward_name
from probe_core.collect.session import Collection
from probe_core.collect.tensors import DERIVED_OPERATIONS, OPTIONAL_OPERATIONS, TensorOps
from probe_core.collect.writer import Pending, StepWriter
from probe_core.config import load_config
from probe_core.errors import CollectionError
from probe_core.modes import DataMode

HEADER = {"task": "statistics", "level": "L1", "framework": "fake"}


class FakeOps(TensorOps):
    """Tensors are ``("T", value)`` tuples; a handle is the value; every fetch is counted."""

    framework = "fake"
    tensor_suffix = ".txt"
    capabilities = frozenset({"new_batch"})

    def __init__(self) -> None:
        self.fetches: list[tuple[int, str]] = []  # (handles, thread name)
        self.batches = 0

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, tuple) and len(value) == 2 and value[0] == "T"

    def describe(self, tensor: Any) -> dict[str, Any]:
        return {"type": "fake.Tensor", "dtype": "float", "shape": []}

    def requires_grad(self, tensor: Any) -> bool:
        return False

    def stats(self, tensor: Any) -> Any:
        return tensor[1]

    def fetch_stats(self, handles: list[Any]) -> list[Any]:
        self.fetches.append((len(handles), threading.current_thread().name))
        return [(v, v, v, abs(v)) for v in handles]

    def raw_bytes(self, tensor: Any) -> Any:
        return str(tensor[1]).encode()

    def snapshot(self, tensor: Any) -> Any:
        return tensor[1]

    def save(self, tensor: Any, path: str) -> None:
        Path(path).write_text(str(tensor))

    def encode_other(self, value: Any) -> None:
        return None

    def new_batch(self) -> None:
        self.batches += 1


class FakeMode(DataMode):
    name = "fake"

    def encode(self, tensor: Any, ops: TensorOps, sink: Any, label: str) -> dict[str, Any]:
        record = ops.describe(tensor)
        sink.defer_stats(record, ops.stats(tensor))
        return record


class FirstBad:
    """An entry policy keeping entries marked ``bad`` until ``limit`` are kept."""

    def __init__(self, limit: int) -> None:
        self.limit, self.kept, self.exhausted = limit, 0, False

    def keep(self, entry: Any) -> bool:
        if not entry.get("bad"):
            return False
        self.kept += 1
        self.exhausted = self.kept >= self.limit
        return True


def _writer(tmp_path: Path, policy: Any = None, save: Any = None) -> StepWriter:
    writer = StepWriter(tmp_path, dict(HEADER), saves_tensors=False, save=save or (lambda t, p: None),
                        stack_lines=lambda sid: [f"File f.py, line {sid}, in g, \n x"], policy=policy,
                        registry=None)
    writer.begin_step(0, 0)
    return writer


def _dump(tmp_path: Path, name: str = "dump.json") -> dict[str, Any]:
    return json.loads((tmp_path / "step0" / "rank0" / name).read_text())


# -- naming ---------------------------------------------------------------------------------------


def test_naming_counts_per_name_and_restarts_each_step():
    naming = Naming(EntryFilter())
    naming.new_step(active=True)
    assert [naming.api_forward_name("Torch.add") for _ in range(2)] == ["Torch.add.0.forward", "Torch.add.1.forward"]
    assert naming.api_forward_name("Torch.mul") == "Torch.mul.0.forward"
    assert naming.module_forward_name("Module.fc.Linear") == "Module.fc.Linear.forward.0"
    assert naming.params_grad_name("Module.fc.Linear") == "Module.fc.Linear.parameters_grad.0"
    assert naming.debug_name("loss") == "loss.0.debug"
    naming.new_step(active=True)
    assert naming.api_forward_name("Torch.add") == "Torch.add.0.forward"
    assert naming.module_forward_name("Module.fc.Linear") == "Module.fc.Linear.forward.0"
    assert backward_name("Torch.add.0.forward") == "Torch.add.0.backward"
    assert backward_name("Module.fc.Linear.forward.2") == "Module.fc.Linear.backward.2"


def test_naming_filters_and_module_stack():
    naming = Naming(EntryFilter(names=("fc",)))
    naming.new_step(active=False)
    assert not naming.start_forward("Module.fc.Linear.forward.0")  # inactive step: nothing recorded
    naming.new_step(active=True)
    assert naming.start_forward("Module.fc.Linear.forward.0")
    assert not naming.start_forward("Torch.add.0.forward")
    assert naming.params_grad_name("Module.ln.LayerNorm") is None  # counted, but left out by the list filter
    assert naming.wants_backward("Module.fc.Linear.forward.0") and not naming.wants_backward("Torch.add.0.forward")
    naming.enter_module("Module.a.A.forward.0")
    naming.enter_module(None)  # an unnamed module call keeps its parent's name
    assert naming.current_module() == "Module.a.A.forward.0"
    assert naming.forward_done("Torch.relu.0.forward", "Module.a.A.forward.0", 3)
    assert naming.forward_of("Torch.relu.0.forward") == ("Module.a.A.forward.0", 3)
    naming.exit_module()
    naming.exit_module()
    naming.exit_module()  # one too many is harmless
    assert naming.current_module() is None
    naming.new_step(active=True)
    assert naming.forward_of("Torch.relu.0.forward") == (None, None) and naming.module_stack == []


# -- batch ----------------------------------------------------------------------------------------


def test_batch_fetches_statistics_once_per_flush(tmp_path):
    ops, writer = FakeOps(), _writer(tmp_path)
    batch = Batch(ops, writer, threading.RLock(), async_fetch=False, flush_every=1000)
    for i in range(50):
        record: dict[str, Any] = {"type": "fake.Tensor"}
        batch.defer_stats(record, float(i))
        batch.defer_stats({"ignored": True}, None)  # no statistics for this one: nothing to fetch
        batch.queue("e", f"Torch.add.{i}.forward", {"output": [record]}, None, False, None)
    assert ops.fetches == []  # nothing fetched while entries wait
    batch.flush()
    batch.flush()  # empty: no second fetch
    writer.end_step()
    writer.close()
    assert [n for n, _ in ops.fetches] == [50] and ops.batches == 1
    data = _dump(tmp_path)["data"]
    assert list(data) == [f"Torch.add.{i}.forward" for i in range(50)]
    assert data["Torch.add.7.forward"]["output"][0] == {"type": "fake.Tensor", "Max": 7.0, "Min": 7.0,
                                                         "Mean": 7.0, "Norm": 7.0}


def test_a_full_batch_flushes_itself_and_async_fetches_on_the_writer_thread(tmp_path):
    ops, writer = FakeOps(), _writer(tmp_path)
    batch = Batch(ops, writer, threading.RLock(), async_fetch=True, flush_every=4)
    for i in range(10):
        record: dict[str, Any] = {}
        batch.defer_stats(record, float(i))
        batch.queue("e", f"Torch.add.{i}.forward", {"output": [record]}, None, False, None)
    batch.flush()
    writer.end_step()
    writer.close()
    assert [n for n, _ in ops.fetches] == [4, 4, 2]
    assert all(thread.startswith("probe-writer") for _, thread in ops.fetches)
    assert _dump(tmp_path)["data"]["Torch.add.9.forward"]["output"][0]["Max"] == 9.0


def test_batch_saves_tensors_under_the_current_entry(tmp_path):
    ops = FakeOps()
    writer = StepWriter(tmp_path, dict(HEADER), saves_tensors=True, save=ops.save, stack_lines=lambda sid: [],
                        policy=None, registry=None)
    writer.begin_step(0, 0)
    batch = Batch(ops, writer, threading.RLock(), async_fetch=False)
    batch.current = "Torch.add.0.forward"
    assert batch.save_tensor(("T", 1.5), "input.0") == "Torch.add.0.forward.input.0.txt"
    assert batch.save_tensor(("T", 2.5), "") == "Torch.add.0.forward.txt"
    batch.queue("e", "Torch.add.0.forward", {}, None, False, None)
    batch.flush()
    writer.end_step()
    summary = writer.close()
    folder = tmp_path / "step0" / "rank0"
    assert (folder / "dump_tensor_data" / "Torch.add.0.forward.input.0.txt").read_text() == "1.5"
    assert _dump(tmp_path)["dump_data_dir"] == str(folder / "dump_tensor_data")
    assert summary.entries == 1 and summary.bytes > 0


# -- writer ---------------------------------------------------------------------------------------


def test_writer_applies_the_entry_policy_and_stops_when_exhausted(tmp_path):
    writer = _writer(tmp_path, policy=FirstBad(2))
    first = [Pending("e", f"Torch.add.{i}.forward", {"bad": i in (1, 3, 4)}, None, True, None) for i in range(5)]
    first.append(Pending("d", "loss.0.debug", {"type": "float", "value": 1.0}, None, False, None))
    writer.write(first, lambda: None)
    writer.write([Pending("e", "Torch.add.5.forward", {"bad": True}, None, True, None)], lambda: None)
    writer.wait()
    assert writer.stopped
    writer.end_step()
    summary = writer.close()
    assert list(_dump(tmp_path)["data"]) == ["Torch.add.1.forward", "Torch.add.3.forward"]
    assert list(_dump(tmp_path, "debug.json")["data"]) == ["loss.0.debug"]  # saves are not the policy's
    assert json.loads((tmp_path / "step0" / "rank0" / "construct.json").read_text()) == \
        {"Torch.add.1.forward": None, "Torch.add.3.forward": None}
    assert summary.entries == 2 and summary.steps == {0}


def test_writer_journals_each_batch_before_the_step_ends(tmp_path):
    writer = _writer(tmp_path)
    writer.write([Pending("e", "Torch.add.0.forward", {}, None, False, 0)], lambda: None)
    writer.wait()
    journal = tmp_path / "step0" / "rank0" / JOURNAL_NAME
    kinds = [json.loads(line)[0] for line in journal.read_text().splitlines()]
    assert kinds == ["H", "S", "e"] and not (tmp_path / "step0" / "rank0" / "dump.json").exists()
    writer.end_step()
    writer.close()
    assert not journal.exists()
    assert json.loads((tmp_path / "step0" / "rank0" / "stack.json").read_text()) == \
        {"0": [["Torch.add.0.forward"], ["File f.py, line 0, in g, \n x"]]}


def test_an_interruption_marks_the_step_being_recorded_not_one_still_being_written(tmp_path):
    """SIGTERM during step 1 while the writer thread has not yet written step 0's files: step 0 is complete
    and stays unmarked; step 1 is partial."""
    writer, gate = _writer(tmp_path), threading.Event()
    writer.write([Pending("e", "Torch.add.0.forward", {}, None, False, None)], lambda: None)
    writer._run(gate.wait)  # the writer thread is busy: step 0's files wait behind this
    writer.end_step()
    writer.begin_step(1, 0)
    writer.write([Pending("e", "Torch.add.0.forward", {}, None, False, None)], lambda: None)
    writer.interrupted = "SIGTERM"  # what the collection's signal handler sets
    assert writer.interrupted == "SIGTERM"
    gate.set()
    writer.end_step()
    writer.close()
    headers = [json.loads((tmp_path / f"step{step}" / "rank0" / "dump.json").read_text()) for step in (0, 1)]
    assert "partial" not in headers[0] and "interrupted" not in headers[0]
    assert headers[1]["partial"] is True and headers[1]["interrupted"] == "SIGTERM"


def test_writer_close_raises_its_first_error(tmp_path):
    def broken(tensor: Any, path: str) -> None:
        raise OSError("disk full")

    writer = _writer(tmp_path, save=broken)
    writer.save_tensor(1.0, "a.txt")
    writer.write([Pending("e", "Torch.add.0.forward", {}, None, False, None)], lambda: None)
    writer.end_step()
    with pytest.raises(CollectionError, match="writing the dump failed: OSError: disk full"):
        writer.close()


def test_tensor_files_after_a_failed_one_are_dropped_and_release_their_room(tmp_path):
    """One queue of tensor files: after the first failure nothing more is written (no link, no later file, not the
    step's dump.json), and every queued snapshot's bytes are given back, so the training thread never waits."""
    written: list[str] = []

    def save(tensor: Any, path: str) -> int:
        if tensor == "bad":
            raise OSError("disk full")
        written.append(os.path.basename(path))
        Path(path).write_text(tensor)
        return len(tensor)

    writer = _writer(tmp_path, save=save)
    gate = threading.Event()
    writer._run(gate.wait)  # the writer thread is busy: every file below waits in the queue
    writer.save_tensor("ok", "first.pt", 2)
    writer.save_tensor("bad", "second.pt", 3)
    writer.save_tensor("later", "third.pt", 5)
    writer.link_tensor("first.pt", "again.pt")
    writer.write([Pending("e", "Torch.add.0.forward", {}, None, False, None)], lambda: None)
    writer.end_step()
    assert writer._queued_bytes == 10
    gate.set()
    with pytest.raises(CollectionError, match="disk full"):
        writer.close()
    assert written == ["first.pt"] and writer._queued_bytes == 0
    folder = tmp_path / "step0" / "rank0"
    assert sorted(p.name for p in (folder / "dump_tensor_data").iterdir()) == ["first.pt"]
    assert not (folder / "dump.json").exists()

# -- the facade --------------------------------------------------------------------------------------


def test_the_facade_runs_one_way_without_a_framework(tmp_path):
    config, registry = load_config(None, dump_path=str(tmp_path), level="L1")
    ops = FakeOps()
    session = Collection(config, registry, ops, FakeMode())
    for _ in range(2):
        for i in range(3):
            name = session.api_forward_name("Torch.add")
            assert name == f"Torch.add.{i}.forward" and session.start_forward(name)
            entry = session.encode_inputs(name, (("T", float(i)), 2), None)
            session.finish_forward(name, entry, ("T", float(-i)), session.current_module(), None)
        session.save_variable("loss", ("T", 0.5))
        session.end_step()
    summary = session.close()
    assert summary.steps == {0, 1} and summary.entries == 6
    # every call is journaled before the next one returns (issue 11, item 5): one transfer per pair of
    # top-level calls (2 calls x 2 tensors), then the third call and the save at the step end, per step
    assert [n for n, _ in ops.fetches] == [4, 3] * 2
    data = json.loads((tmp_path / "step1" / "rank0" / "dump.json").read_text())["data"]
    assert data["Torch.add.2.forward"] == {
        "input_args": [{"type": "fake.Tensor", "dtype": "float", "shape": [], "Max": 2.0, "Min": 2.0,
                        "Mean": 2.0, "Norm": 2.0}, {"type": "int", "value": 2}],
        "input_kwargs": {},
        "output": [{"type": "fake.Tensor", "dtype": "float", "shape": [], "Max": -2.0, "Min": -2.0,
                    "Mean": -2.0, "Norm": 2.0}]}


# -- the TensorOps contract --------------------------------------------------------------------------

OPS_CLASSES = [("probe_torch.ops", "TorchTensorOps"), ("probe_mindspore.ops", "MindSporeTensorOps")]


@pytest.mark.parametrize(("module", "name"), OPS_CLASSES)
def test_collector_ops_subclass_the_base_and_declare_their_capabilities_truthfully(module, name):
    ops_class = getattr(importlib.import_module(module), name)
    assert issubclass(ops_class, TensorOps)
    assert ops_class.framework and ops_class.tensor_suffix
    overridden = {op for op in OPTIONAL_OPERATIONS if getattr(ops_class, op) is not getattr(TensorOps, op)}
    assert ops_class.capabilities == overridden
    required = [op for op, value in vars(TensorOps).items()
                if callable(value) and not op.startswith("_") and op not in OPTIONAL_OPERATIONS | DERIVED_OPERATIONS]
    assert not any(getattr(ops_class, op) is not getattr(TensorOps, op) for op in DERIVED_OPERATIONS)
    assert required and all(getattr(ops_class, op) is not getattr(TensorOps, op) for op in required)


def test_the_base_class_defaults_are_neutral():
    ops = FakeOps()
    calls = []
    assert TensorOps.once_per_batch(ops, ("T", 1.0), "md5", lambda: calls.append(1) or "x") == "x"
    assert TensorOps.once_per_batch(ops, ("T", 1.0), "md5", lambda: calls.append(1) or "x") == "x"
    assert calls == [1, 1]
    assert TensorOps.nbytes(ops, ("T", 1.0)) == 0
    assert TensorOps.alias(ops, ("T", 1.0), ("T", 1.0)) is None
    assert TensorOps.new_batch(ops) is None
    before = ops.batches
    TensorOps.values_changed(ops)  # by default, forgetting everything is forgetting the batch
    assert ops.batches == before + 1
    with pytest.raises(NotImplementedError):
        TensorOps().stats(("T", 1.0))

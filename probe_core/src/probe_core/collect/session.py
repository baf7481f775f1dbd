"""One collection run: naming, filtering, batching, journaling and step files.

A collector drives a :class:`Collection` with a handful of calls:

* ``api_forward_name("Functional.linear")`` → ``Functional.linear.3.forward``
  and ``module_forward_name("Module.blocks.0.attn.Attention")`` →
  ``Module.blocks.0.attn.Attention.forward.0`` (counts per name, per step);
* ``start_forward(name)`` (filters), ``encode_inputs`` before the call (so an
  in-place call still shows its inputs), ``finish_forward`` after it;
* ``enter_module``/``exit_module`` around module calls (construct parents);
* ``record_backward``, ``record_params_grad``, ``save_variable``;
* ``end_step()`` at each step end and ``close()`` at the end.

Tensors are encoded at once (their statistics start on their device) and the
entries wait in a batch; a flush fetches every statistic with one transfer,
applies the mode's overflow filter, appends the entries to the step's journal
and emits ``probe_on_record``. Step files are written atomically at step end.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_core.collect.encode import ValueEncoder
from probe_core.collect.filters import EntryFilter
from probe_core.collect.journal import Journal, StepRecords, write_step_files
from probe_core.collect.stacks import StackRegistry
from probe_core.collect.tensors import DataMode, TensorOps
from probe_core.config import ProbeConfig
from probe_core.errors import CollectionError

FLUSH_EVERY = 128  # entries per batch of statistics
TOP_BLOCKS = ("Module.", "Cell.")  # a top-level module/cell call ending also flushes the batch


@dataclass
class _StepState:
    """The files-in-progress of one step and rank."""

    step: int
    rank: int
    rank_dir: Path
    journal: Journal
    records: StepRecords = field(default_factory=StepRecords)
    stacks_written: set[int] = field(default_factory=set)
    saves: list[Future] = field(default_factory=list)
    entries: int = 0


@dataclass
class _Pending:
    kind: str  # "e" (dump.json) or "d" (debug.json)
    name: str
    value: dict[str, Any]
    parent: str | None
    construct: bool
    sid: int | None


@dataclass
class Summary:
    """What a run wrote, for the end-of-run report."""

    steps: set[int] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    entries: int = 0
    bytes: int = 0
    dump_path: str = ""
    folders: list[str] = field(default_factory=list)


def _backward_name(forward_name: str) -> str:
    head, sep, tail = forward_name.rpartition(".forward")
    return f"{head}.backward{tail}" if sep else forward_name


def _overflowed(value: Any) -> bool:
    """True when some tensor record inside ``value`` has a NaN/Inf statistic."""
    if isinstance(value, dict):
        for key in ("Max", "Min"):  # NaN propagates into both, ±Inf shows in one
            stat = value.get(key)
            if isinstance(stat, float) and not math.isfinite(stat):
                return True
        return any(_overflowed(item) for item in value.values() if isinstance(item, (dict, list)))
    if isinstance(value, list):
        return any(_overflowed(item) for item in value)
    return False


class Collection:
    """The framework-neutral state of one collection (see module docstring)."""

    def __init__(self, config: ProbeConfig, registry: Any, ops: TensorOps, mode: DataMode, *,
                 rank_fn: Callable[[], int] = lambda: 0, stack_skip_dirs: tuple[str, ...] = (),
                 stack_skip_files: tuple[str, ...] = ()) -> None:
        self.config = config
        self.registry = registry
        self.ops = ops
        self.mode = mode
        self.level = config.level
        self.task = config.task
        self.with_modules = self.level in ("L0", "mix")
        self.with_apis = self.level in ("L1", "mix")
        self.with_construct = self.level in ("L0", "mix")
        self.with_stack = bool(config.extra_info)
        self.filter = EntryFilter.from_config(config.step, config.rank, config.list, config.scope,
                                              config.data_mode)
        self.dump_root = Path(config.dump_path)
        self.rank_fn = rank_fn
        self.encoder = ValueEncoder(ops, mode, self)
        self.stacks = StackRegistry(stack_skip_dirs, stack_skip_files)
        self.summary = Summary(dump_path=str(self.dump_root))
        self.overflow_limit = int(config.sections.get("overflow_check", {}).get("overflow_nums", 1)) \
            if mode.only_overflow else -1
        self.overflows = 0
        self.step = 0
        self.stopped = False
        self._lock = threading.RLock()
        self._writer: ThreadPoolExecutor | None = None
        self._async = bool(config.async_dump)
        self._errors: list[Exception] = []
        self._listen_record = registry.listens("probe_on_record") if registry is not None else False
        self._begin_step()

    # -- steps --------------------------------------------------------------------

    def _begin_step(self) -> None:
        self.counters: dict[str, int] = {}
        self.module_stack: list[str | None] = []
        self._forward_info: dict[str, tuple[str | None, int | None]] = {}
        self._pending: list[_Pending] = []
        self._deferred_records: list[dict[str, Any]] = []
        self._deferred_handles: list[Any] = []
        self._current = ""
        self.filter.new_step()
        self.rank = self._read_rank()
        self.active = (not self.stopped and self.filter.step_wanted(self.step)
                       and self.filter.rank_wanted(self.rank))
        rank_dir = self.dump_root / f"step{self.step}" / f"rank{self.rank}"
        self._state = _StepState(self.step, self.rank, rank_dir, Journal(rank_dir))

    def _read_rank(self) -> int:
        try:
            return int(self.rank_fn())
        except Exception:
            return 0

    @property
    def all_steps_done(self) -> bool:
        """True when no later step can be recorded (step filter exhausted or overflow limit hit)."""
        last = self.filter.last_step()
        return self.stopped or (last is not None and self.step > last)

    def end_step(self) -> None:
        """Flush and start the next step; the writer thread writes this step's files atomically, then emits
        ``probe_on_step_end`` (``close()`` waits for it)."""
        with self._lock:
            self.flush()
            state = self._state
            self._run(lambda: self._finish_step(state))
            self.step += 1
            self._begin_step()

    def close(self) -> Summary:
        """End the current step (when it recorded anything) and wait for every file."""
        with self._lock:
            self.flush()
            state = self._state
            # always queued: the batch just flushed is counted on the writer thread, and an empty step writes nothing
            self._run(lambda: self._finish_step(state))
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None
            if self._errors:
                raise self._errors[0]
            return self.summary

    def wait(self) -> None:
        """Block until the writer thread has written everything submitted so far."""
        if self._writer is not None:
            self._writer.submit(lambda: None).result()

    def _finish_step(self, state: _StepState) -> None:
        for future in state.saves:
            future.result()
        state.journal.close(remove=False)
        if not state.records.entries and not state.records.debug:
            state.journal.close(remove=True)
            return
        paths = write_step_files(state.rank_dir, self._header(state), state.records)
        state.journal.close(remove=True)
        self.summary.steps.add(state.step)
        self.summary.ranks.add(state.rank)
        self.summary.bytes += sum(p.stat().st_size for p in paths)
        self.summary.folders.append(str(state.rank_dir))
        if self.registry is not None and self.registry.listens("probe_on_step_end"):
            self.registry.emit("probe_on_step_end", step=state.step, rank=state.rank,
                               dump_dir=str(state.rank_dir))

    def _header(self, state: _StepState) -> dict[str, Any]:
        data_dir = str(state.rank_dir / "dump_tensor_data") if self.task == "tensor" else None
        return {"task": self.task, "level": self.level, "framework": self.ops.framework,
                "dump_data_dir": data_dir}

    # -- threads -------------------------------------------------------------------

    def _executor(self) -> ThreadPoolExecutor:
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe-writer")
        return self._writer

    def _run(self, work: Callable[[], None]) -> None:
        """Run file work on the writer thread, in submission order; its first error is raised by close()."""
        def guarded() -> None:
            try:
                work()
            except Exception as exc:  # reported at close(); later batches still try to write
                if not self._errors:
                    self._errors.append(exc if isinstance(exc, CollectionError) else
                                        CollectionError(f"writing the dump failed: {type(exc).__name__}: {exc}"))

        try:
            self._executor().submit(guarded)
        except RuntimeError:  # interpreter exit (an atexit close): the pool takes no more work, its queue is done
            guarded()

    # -- naming --------------------------------------------------------------------

    def _count(self, key: str) -> int:
        n = self.counters.get(key, 0)
        self.counters[key] = n + 1
        return n

    def api_forward_name(self, api: str) -> str:
        """``Functional.linear`` → ``Functional.linear.{n}.forward``."""
        return f"{api}.{self._count(api)}.forward"

    def module_forward_name(self, prefix: str) -> str:
        """``Module.blocks.0.ln1.LayerNorm`` → ``Module.blocks.0.ln1.LayerNorm.forward.{n}``."""
        return f"{prefix}.forward.{self._count(prefix)}"

    # -- forward -------------------------------------------------------------------

    def start_forward(self, name: str) -> bool:
        """True when the call named ``name`` is recorded (filters say yes)."""
        return self.active and self.filter.forward_starts(name)

    def enter_module(self, name: str | None) -> None:
        self.module_stack.append(name)

    def exit_module(self) -> None:
        if self.module_stack:
            self.module_stack.pop()

    def current_module(self) -> str | None:
        for name in reversed(self.module_stack):
            if name is not None:
                return name
        return None

    def capture_stack(self, depth: int = 2) -> int | None:
        return self.stacks.capture(depth + 1) if self.with_stack else None

    def encode_inputs(self, name: str, args: Any, kwargs: dict[str, Any] | None) -> dict[str, Any]:
        """The input half of a forward entry (call before the API runs)."""
        self._current = name
        if not (self.filter.forward and self.filter.inputs):
            return {}
        return {"input_args": self.encoder.encode_args(args, "input"),
                "input_kwargs": self.encoder.encode_kwargs(kwargs)}

    def finish_forward(self, name: str, entry: dict[str, Any], output: Any, parent: str | None,
                       sid: int | None, parameters: dict[str, Any] | None = None) -> None:
        """Complete and queue a forward entry; remembers its parent and stack for its backward."""
        self._forward_info[name] = (parent, sid)
        self.filter.forward_ends(name)
        if not self.filter.forward:
            return
        self._current = name
        if self.filter.outputs:
            entry["output"] = self.encoder.encode_output(output)
        if parameters is not None and self.filter.inputs:
            entry["parameters"] = {key: self.encoder.encode(value, f"parameters.{key}")
                                   for key, value in parameters.items()}
        self._queue("e", name, entry, parent, self.with_construct, sid)
        if parent is None and name.startswith(TOP_BLOCKS):
            self.flush()  # a top-level block finished: journal it, so a crash keeps it

    def end_forward_unrecorded(self, name: str) -> None:
        """A started call that will not be recorded still closes a scope."""
        self.filter.forward_ends(name)

    # -- backward, gradients, saves -----------------------------------------------------

    def wants_backward(self, forward_name: str) -> bool:
        return self.active and self.filter.backward and self.filter.backward_wanted(forward_name)

    def record_backward(self, forward_name: str, grad_outputs: Any, grad_inputs: Any) -> None:
        """``input``: gradients w.r.t. the call's outputs; ``output``: w.r.t. its inputs."""
        if not self.active:
            return
        with self._lock:
            name = _backward_name(forward_name)
            parent, sid = self._forward_info.get(forward_name, (None, None))
            self._current = name
            entry: dict[str, Any] = {}
            if self.filter.inputs:
                entry["input"] = self.encoder.encode_args(grad_outputs, "input")
            if self.filter.outputs:
                entry["output"] = self.encoder.encode_args(grad_inputs, "output")
            back_parent = _backward_name(parent) if parent else None
            self._queue("e", name, entry, back_parent, self.with_construct, sid)
            if parent is None and name.startswith(TOP_BLOCKS):
                self.flush()

    def record_params_grad(self, prefix: str, grads: dict[str, Any], sid: int | None = None) -> None:
        """``{prefix}.parameters_grad.{n}`` with ``{param: [grad]}`` (not in construct.json, like msprobe)."""
        if not (self.active and self.filter.backward):
            return
        with self._lock:
            name = f"{prefix}.parameters_grad.{self._count(prefix + '.parameters_grad')}"
            if not self.filter.name_wanted(name):
                return
            self._current = name
            if sid is None:
                sid = self._forward_info.get(f"{prefix}.forward.0", (None, None))[1]
            entry = {key: [self.encoder.encode(value, f"{key}.0")] for key, value in grads.items()}
            self._queue("e", name, entry, None, False, sid)

    def save_variable(self, name: str, value: Any) -> str | None:
        """``PrecisionDebugger.save``: a ``{name}.{n}.debug`` entry of debug.json."""
        if not self.active:
            return None
        with self._lock:
            entry_name = f"{name}.{self._count(name + '.debug')}.debug"
            self._current = entry_name
            self._queue("d", entry_name, self.encoder.encode(value, ""), None, False, None)
            return entry_name

    # -- batching ------------------------------------------------------------------

    def defer_stats(self, record: dict[str, Any], handle: Any) -> None:
        if handle is None:
            return
        self._deferred_records.append(record)
        self._deferred_handles.append(handle)

    def save_tensor(self, tensor: Any, label: str) -> str:
        label = label.strip(".")
        data_name = f"{self._current}.{label}{self.ops.tensor_suffix}" if label else \
            f"{self._current}{self.ops.tensor_suffix}"
        snapshot = self.ops.snapshot(tensor)
        path = self._state.rank_dir / "dump_tensor_data" / data_name
        self._state.saves.append(self._executor().submit(self._save_one, snapshot, path))
        return data_name

    def _save_one(self, tensor: Any, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            raise CollectionError(f"{path}: refusing to write through a symbolic link")
        self.ops.save(tensor, str(path))
        self.summary.bytes += path.stat().st_size

    def _queue(self, kind: str, name: str, value: dict[str, Any], parent: str | None, construct: bool,
               sid: int | None) -> None:
        self._pending.append(_Pending(kind, name, value, parent, construct, sid))
        if len(self._pending) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Fetch the batch's statistics (one transfer) and journal its entries."""
        with self._lock:
            if not self._pending:
                return
            pending, records, handles = self._pending, self._deferred_records, self._deferred_handles
            self._pending, self._deferred_records, self._deferred_handles = [], [], []
            begin = getattr(self.ops, "new_batch", None)
            if begin is not None:
                begin()
            state = self._state
            if self._async:  # async_dump: even the statistics transfer happens off the training thread
                self._run(lambda: self._write_batch(state, pending, records, self.ops.fetch_stats(handles)))
            else:
                values = self.ops.fetch_stats(handles)
                self._run(lambda: self._write_batch(state, pending, records, values))

    def _write_batch(self, state: _StepState, pending: list[_Pending], records: list[dict[str, Any]],
                     values: list[Any]) -> None:
        for record, stats in zip(records, values):
            if stats is not None:
                record["Max"], record["Min"], record["Mean"], record["Norm"] = stats
        lines: list[str] = []
        header_needed = not state.entries and not state.records.debug
        for item in pending:
            if self.mode.only_overflow and item.kind == "e":
                if self.stopped or not _overflowed(item.value):
                    continue
                self.overflows += 1
                if self.overflow_limit != -1 and self.overflows >= self.overflow_limit:
                    self.stopped = True
            text = json.dumps(item.value, ensure_ascii=False)
            if header_needed:
                lines.append(json.dumps(["H", self._header(state)]))
                header_needed = False
            if item.sid is not None and item.sid not in state.stacks_written:
                state.stacks_written.add(item.sid)
                stack = ["S", item.sid, self.stacks.lines(item.sid)]
                lines.append(json.dumps(stack, ensure_ascii=False))
                state.records.add_line(stack)
            if item.kind == "e":
                lines.append(f'["e", {json.dumps(item.name)}, {json.dumps(item.sid)}, {text}]')
                state.records.add_line(["e", item.name, item.sid], text)
                state.entries += 1
                self.summary.entries += 1
                if item.construct:
                    edge = ["c", item.name, item.parent]
                    lines.append(json.dumps(edge))
                    state.records.add_line(edge)
            else:
                lines.append(f'["d", {json.dumps(item.name)}, {text}]')
                state.records.add_line(["d", item.name], text)
            if self._listen_record:
                self.registry.emit("probe_on_record", name=item.name, entry=item.value,
                                   step=state.step, rank=state.rank)
        try:
            state.journal.append(lines)
        except OSError as exc:
            raise CollectionError(f"{state.rank_dir}: cannot write the record journal: {exc}; "
                                  "check free space and permissions of dump_path") from None


def check_dump_path(path: str | os.PathLike[str]) -> Path:
    """Fail early (nothing written) when ``path`` cannot hold a dump; returns it as a Path."""
    target = Path(path)
    probe = target
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise CollectionError(f'dump_path "{path}": {probe} is a file, not a folder; choose another dump_path')
    try:  # a real write test (permission bits do not stop root; read-only file systems do)
        os.rmdir(tempfile.mkdtemp(prefix=".probe-write-test-", dir=probe))
    except OSError as exc:
        raise CollectionError(f'dump_path "{path}": {probe} is not writable ({exc.strerror}); choose a writable '
                              "dump_path (config key dump_path or --dump-path)") from None
    if target.is_symlink():
        raise CollectionError(f'dump_path "{path}" is a symbolic link; probe does not write through links')
    return target

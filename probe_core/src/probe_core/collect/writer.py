"""Step writing: the writer thread, the record journal, the entry policy, step files, summary and events.

Everything here runs in submission order on one ``probe-writer`` thread; the
first error is kept and raised by :meth:`StepWriter.close`. The writer gets
complete batches of :class:`Pending` entries and never calls back into the
naming or batching parts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_core.collect.journal import Journal, StepRecords, write_step_files
from probe_core.errors import CollectionError
from probe_core.modes import EntryPolicy


@dataclass
class Pending:
    """One entry waiting in a batch for its statistics."""

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


class StepWriter:
    """Writes one collection's files off the training thread.

    ``header`` holds dump.json's ``task``, ``level`` and ``framework``;
    ``saves_tensors`` adds ``dump_data_dir``; ``stack_lines(sid)`` renders a
    call stack; ``policy`` (the data mode's entry policy, or ``None``) decides
    which completed entries are kept, and :attr:`stopped` turns true once it
    is exhausted.
    """

    def __init__(self, dump_root: Path, header: dict[str, Any], *, saves_tensors: bool,
                 save: Callable[[Any, str], None], stack_lines: Callable[[int], list[str]],
                 policy: EntryPolicy | None, registry: Any) -> None:
        self.dump_root = dump_root
        self._header_base = header
        self._saves_tensors = saves_tensors
        self._save = save
        self._stack_lines = stack_lines
        self.policy = policy
        self.stopped = False
        self.summary = Summary(dump_path=str(dump_root))
        self._registry = registry
        if registry is not None:
            registry.unmute()  # an event plugin muted in an earlier run of this process gets a fresh start
        self._listen_record = registry is not None and registry.listens("probe_on_record")
        self._listen_step_end = registry is not None and registry.listens("probe_on_step_end")
        self._pool: ThreadPoolExecutor | None = None
        self._errors: list[Exception] = []
        self._state: _StepState | None = None

    # -- the thread -------------------------------------------------------------------

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe-writer")
        return self._pool

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

    def wait(self) -> None:
        """Block until the writer thread has written everything submitted so far."""
        if self._pool is not None:
            self._pool.submit(lambda: None).result()

    # -- steps -------------------------------------------------------------------------

    def begin_step(self, step: int, rank: int) -> None:
        rank_dir = self.dump_root / f"step{step}" / f"rank{rank}"
        self._state = _StepState(step, rank, rank_dir, Journal(rank_dir))

    def end_step(self) -> None:
        """Queue the step's final files (written atomically, then ``probe_on_step_end``); an empty step
        writes nothing. Always queued, so that the batches before it are counted first."""
        state = self._state
        self._run(lambda: self._finish_step(state))

    def close(self) -> Summary:
        """Wait for every file; raises the first error the writer met."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._errors:
            raise self._errors[0]
        return self.summary

    def _header(self, state: _StepState) -> dict[str, Any]:
        data_dir = str(state.rank_dir / "dump_tensor_data") if self._saves_tensors else None
        return {**self._header_base, "dump_data_dir": data_dir}

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
        if self._listen_step_end:
            self._registry.emit("probe_on_step_end", step=state.step, rank=state.rank,
                                dump_dir=str(state.rank_dir))

    # -- tensor files --------------------------------------------------------------------

    def save_tensor(self, snapshot: Any, data_name: str) -> None:
        """Write a tensor snapshot to the step's ``dump_tensor_data/{data_name}`` (before its step ends)."""
        state = self._state
        path = state.rank_dir / "dump_tensor_data" / data_name
        state.saves.append(self._executor().submit(self._save_one, snapshot, path))

    def _save_one(self, snapshot: Any, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            raise CollectionError(f"{path}: refusing to write through a symbolic link")
        self._save(snapshot, str(path))
        self.summary.bytes += path.stat().st_size

    # -- batches ---------------------------------------------------------------------------

    def write(self, pending: list[Pending], resolve: Callable[[], None]) -> None:
        """Journal a batch on the writer thread: ``resolve()`` first fills in its statistics."""
        state = self._state
        self._run(lambda: self._write_batch(state, pending, resolve))

    def _write_batch(self, state: _StepState, pending: list[Pending], resolve: Callable[[], None]) -> None:
        resolve()
        policy = self.policy
        records = state.records
        lines: list[str] = []
        header_needed = not state.entries and not records.debug
        for item in pending:
            if policy is not None and item.kind == "e":
                if self.stopped or not policy.keep(item.value):
                    continue
                self.stopped = policy.exhausted
            text = json.dumps(item.value, ensure_ascii=False)
            if header_needed:
                lines.append(json.dumps(["H", self._header(state)]))
                header_needed = False
            if item.sid is not None and item.sid not in state.stacks_written:
                state.stacks_written.add(item.sid)
                stack = ["S", item.sid, self._stack_lines(item.sid)]
                lines.append(json.dumps(stack, ensure_ascii=False))
                records.add_line(stack)
            if item.kind == "e":
                lines.append(f'["e", {json.dumps(item.name)}, {json.dumps(item.sid)}, {text}]')
                records.add_line(["e", item.name, item.sid], text)
                state.entries += 1
                self.summary.entries += 1
                if item.construct:
                    edge = ["c", item.name, item.parent]
                    lines.append(json.dumps(edge))
                    records.add_line(edge)
            else:
                lines.append(f'["d", {json.dumps(item.name)}, {text}]')
                records.add_line(["d", item.name], text)
            if self._listen_record:
                self._registry.emit("probe_on_record", name=item.name, entry=item.value,
                                    step=state.step, rank=state.rank)
        try:
            state.journal.append(lines)
        except OSError as exc:
            raise CollectionError(f"{state.rank_dir}: cannot write the record journal: {exc}; "
                                  "check free space and permissions of dump_path") from None

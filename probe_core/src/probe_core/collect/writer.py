"""Step writing: the writer thread, the record journal, the entry policy, step files, summary and events.

Everything here runs in submission order on one ``probe-writer`` thread; the
first error is kept and raised by :meth:`StepWriter.close`. The writer gets
complete batches of :class:`Pending` entries and never calls back into the
naming or batching parts.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_core.collect.journal import Journal, StepRecords, safe_dir, write_step_files
from probe_core.errors import CollectionError
from probe_core.fastjson import value_text
from probe_core.modes import EntryPolicy

#: Bytes of tensor snapshots that may wait for the writer thread before the training thread waits for it.
SAVE_QUEUE_BYTES = 1 << 30

#: In the queue of tensor files: the end of one step's files (see StepWriter._drain_files).
_STEP_END = None

_string = json.encoder.encode_basestring_ascii  # json.dumps of a str, without the call's set-up


def _edge_line(name: str, parent: str | None) -> str:
    """The journal line of a construct.json edge: ``json.dumps(["c", name, parent])``."""
    return f'["c", {_string(name)}, {"null" if parent is None else _string(parent)}]'


@dataclass
class Pending:
    """One entry waiting in a batch for its statistics."""

    kind: str  # "e" (dump.json), "d" (debug.json) or "c" (a construct.json node without an entry)
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
    tensor_dir: str  # the step's dump_tensor_data folder, with a trailing separator
    records: StepRecords = field(default_factory=StepRecords)
    stacks_written: set[int] = field(default_factory=set)
    entries: int = 0
    interrupted: str | None = None  # the signal (SIGTERM/SIGINT) that ended the run in this step


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
                 policy: EntryPolicy | None, registry: Any, inline: bool = False, extra_files: bool = True,
                 with_values: bool = True) -> None:
        self.dump_root = dump_root
        self._extra_files = extra_files  # stack.json and construct.json (config extra_info)
        self._with_values = with_values  # False: task structure, dump.json's data is {}
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
        #: journal batches on the calling thread (no thread hand-off per top-level call: measured cheaper for the
        #: small per-call batches of item 5); off when a probe_on_record listener must run on the writer thread
        self._inline = inline and not self._listen_record
        self._pool: ThreadPoolExecutor | None = None
        self._errors: list[Exception] = []
        self._state: _StepState | None = None
        self._last: Future | None = None  # the batch submitted last (see sync)
        self._finishing: Future | None = None  # the final files of the step ended last (see end_step)
        #: called once before the first file is written (the run lock of the dump path)
        self.before_write: Callable[[], None] | None = None
        self._prepare_lock = threading.Lock()
        self._prepared = False
        self._queue_room = threading.Condition()  # signalled as queued snapshots are written
        self._queued_bytes = 0
        self._files: deque[tuple[Any, str, int, str | None] | None] = deque()  # tensor files and _STEP_END
        self._files_lock = threading.Lock()
        self._draining = False  # a task draining self._files is queued or running
        self._checked: str | None = None  # the tensor folder safe_dir made and checked last (once, not per file)

    @property
    def interrupted(self) -> str | None:
        """The signal (SIGTERM/SIGINT) that interrupted the step being recorded, which is then marked partial;
        a step recorded before it and still being written is not."""
        return self._state.interrupted if self._state is not None else None

    @interrupted.setter
    def interrupted(self, name: str | None) -> None:
        if self._state is not None:
            self._state.interrupted = name

    @property
    def error(self) -> Exception | None:
        """The first error the writer met (a full disk, a symlink in the dump path, ...), or ``None``."""
        return self._errors[0] if self._errors else None

    # -- the thread -------------------------------------------------------------------

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe-writer")
        return self._pool

    def _run(self, work: Callable[[], None]) -> Future | None:
        """Run file work on the writer thread, in submission order; its first error is kept (:attr:`error`),
        stops collection (:attr:`stopped`) and is raised by close(). Returns its future (``None`` when it ran
        at once)."""
        def guarded() -> None:
            if self._errors:
                return  # nothing is written after the first error: what is on disk stays as it was
            try:
                work()
            except Exception as exc:
                self._record_error(exc)

        try:
            self._last = self._executor().submit(guarded)
        except RuntimeError:  # interpreter exit (an atexit close): the pool takes no more work, its queue is done
            guarded()
            return None
        return self._last

    def _prepare(self) -> None:
        """Run ``before_write`` once, before any file is written by either thread (the training thread's
        inline batches and the writer thread's tensor files wait for each other here)."""
        if self._prepared:
            return
        with self._prepare_lock:
            if not self._prepared:
                if self.before_write is not None:
                    self.before_write()
                self._prepared = True

    def _record_error(self, exc: Exception) -> None:
        self.stopped = True
        if not self._errors:
            self._errors.append(exc if isinstance(exc, CollectionError) else
                                CollectionError(f"writing the dump failed: {type(exc).__name__}: {exc}"))

    @property
    def inline(self) -> bool:
        """Whether batches are journaled on the calling thread (see ``inline`` of the constructor)."""
        return self._inline

    def sync(self) -> None:
        """Block until the batch submitted last is in the journal (usually long done: costs nothing; inline
        batches are there already)."""
        if self._inline:
            return
        last = self._last
        if last is not None and not last.done():
            last.result()

    def wait(self) -> None:
        """Block until the writer thread has written everything submitted so far."""
        if self._pool is not None:
            self._pool.submit(lambda: None).result()

    # -- steps -------------------------------------------------------------------------

    def begin_step(self, step: int, rank: int) -> None:
        rank_dir = self.dump_root / f"step{step}" / f"rank{rank}"
        self._state = _StepState(step, rank, rank_dir, Journal(rank_dir, self.dump_root),
                                 os.path.join(rank_dir, "dump_tensor_data", ""))

    def end_step(self) -> None:
        """Queue the step's final files (written atomically once its tensor files are, then
        ``probe_on_step_end``); an empty step writes nothing. Always queued, so that the batches before it are
        counted first. Back-pressure: the training thread first waits until the step before this one is
        written whole, so training runs at most one step ahead of the files and a killed run loses at most
        the step it was in and the one it had just ended (their journals: ``probe recover``). Once stopped (a
        forked child, whose copy of the writer thread never runs) nothing is waited for."""
        previous, self._finishing = self._finishing, None
        if previous is not None and not self.stopped:
            previous.result()
        state = self._state
        self._finishing = self._run(lambda: self._finish_step(state))
        with self._files_lock:
            if self._draining:  # the step's tensor files still wait: its final files wait for them only
                self._files.append(_STEP_END)

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
        header = {**self._header_base, "dump_data_dir": data_dir}
        if state.interrupted:
            header.update(partial=True, interrupted=state.interrupted)
        return header

    def _finish_step(self, state: _StepState) -> None:
        state.journal.close(remove=False)
        if not state.records.entries and not state.records.debug:
            state.journal.close(remove=True)
            return
        self._prepare()
        paths = write_step_files(state.rank_dir, self._header(state), state.records, self.dump_root,
                                 extra_files=self._extra_files, with_values=self._with_values)
        state.journal.close(remove=True)
        self.summary.steps.add(state.step)
        self.summary.ranks.add(state.rank)
        self.summary.bytes += sum(p.stat().st_size for p in paths)
        self.summary.folders.append(str(state.rank_dir))
        if self._listen_step_end:
            self._registry.emit("probe_on_step_end", step=state.step, rank=state.rank,
                                dump_dir=str(state.rank_dir))

    # -- tensor files --------------------------------------------------------------------

    def save_tensor(self, snapshot: Any, data_name: str, nbytes: int = 0) -> None:
        """Write a tensor snapshot to the step's ``dump_tensor_data/{data_name}`` (before its step ends).
        At most :data:`SAVE_QUEUE_BYTES` of snapshots wait for the writer: beyond that the training thread
        waits here until enough are written (one snapshot larger than the bound still goes alone)."""
        with self._queue_room:
            while self._queued_bytes and self._queued_bytes + nbytes > SAVE_QUEUE_BYTES and not self._errors:
                self._queue_room.wait()
            self._queued_bytes += nbytes
        self._queue_file((snapshot, self._state.tensor_dir + data_name, nbytes, None))

    def link_tensor(self, saved_name: str, data_name: str) -> None:
        """``data_name`` holds the same values as ``saved_name``, saved earlier in this step: a hard link to
        that file (a copy where the file system has no links)."""
        folder = self._state.tensor_dir
        self._queue_file((None, folder + data_name, 0, folder + saved_name))

    def _queue_file(self, item: tuple[Any, str, int, str | None]) -> None:
        """Queue a tensor file for the writer thread: (snapshot, path, its bytes, or for a link: None, path, 0,
        the file linked). The files wait in one queue that one writer task drains, not a task each: a step
        writes thousands, and a future per file was enough garbage to set off full collections of the
        training process's objects (~0.1 s each, every few steps)."""
        with self._files_lock:
            self._files.append(item)
            if self._draining:
                return
            self._draining = True
        try:
            self._executor().submit(self._drain_files)
        except RuntimeError:  # interpreter exit (an atexit close): the pool takes no more work
            self._drain_files()

    def _drain_files(self) -> None:
        """Write the queued tensor files, in order, up to the end of a step's files: there this task queues
        itself again, behind that step's final files (queued after its tensor files), so a step's dump.json
        waits for its own files, not for those of the steps training has gone on to."""
        while True:
            with self._files_lock:
                if not self._files:
                    self._draining = False
                    return
                item = self._files.popleft()
                if item is _STEP_END:
                    if self._drain_later():
                        return
                    continue
            snapshot, path, nbytes, source = item
            item = None
            try:
                if self._errors:
                    continue  # nothing is written after the first error
                if source is None:
                    self._write_file(path, self._save, snapshot, path)
                else:
                    self._write_file(path, _link, source, path, counted=False)
            except Exception:  # noqa: S112 (kept by _write_file: stops collection, close() raises it)
                continue
            finally:
                snapshot = None  # freed now, not when the next file is taken
                if nbytes:
                    with self._queue_room:
                        self._queued_bytes -= nbytes
                        self._queue_room.notify_all()

    def _drain_later(self) -> bool:
        """At the end of a step's files (under the queue's lock): queue the draining of the next step's files
        behind the step's final files; False where the pool takes no more work (interpreter exit)."""
        if not self._files:
            self._draining = False
            return True
        try:
            self._executor().submit(self._drain_files)
        except RuntimeError:
            return False
        return True

    def _write_file(self, path: str, write: Callable[..., Any], *args: Any, counted: bool = True) -> None:
        try:
            self._prepare()
            folder = os.path.dirname(path)
            if folder != self._checked:
                safe_dir(self.dump_root, *Path(folder).relative_to(self.dump_root).parts)
                self._checked = folder
            if os.path.islink(path):
                raise CollectionError(f"{path}: refusing to write through a symbolic link")
            written = write(*args)
            if counted:  # the size the save returned, else the file's
                self.summary.bytes += written if isinstance(written, int) else os.stat(path).st_size
        except Exception as exc:  # a full disk stops the collection at once, not at the step's end
            self._record_error(exc)
            raise

    # -- batches ---------------------------------------------------------------------------

    def write(self, pending: list[Pending], resolve: Callable[[], None]) -> None:
        """Journal a batch (on the writer thread, or at once when inline): ``resolve()`` first fills in its
        statistics. Tensor files are always written on the writer thread."""
        state = self._state
        if self._inline:
            if self._errors:
                return
            try:
                self._prepare()
                self._write_batch(state, pending, resolve)
            except Exception as exc:
                self._record_error(exc)
            return
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
            text = value_text(item.value)
            if header_needed:
                lines.append(json.dumps(["H", self._header(state)]))
                header_needed = False
            if item.sid is not None and item.sid not in state.stacks_written:
                state.stacks_written.add(item.sid)
                stack = ["S", item.sid, self._stack_lines(item.sid)]
                lines.append(json.dumps(stack, ensure_ascii=False))
                records.add_line(stack)
            if item.kind == "e":
                sid = "null" if item.sid is None else str(item.sid)
                lines.append(f'["e", {_string(item.name)}, {sid}, {text}]')
                records.add_line(["e", item.name, item.sid], text)
                state.entries += 1
                self.summary.entries += 1
                if item.construct:
                    lines.append(_edge_line(item.name, item.parent))
                    records.add_line(["c", item.name, item.parent])
            elif item.kind == "c":
                lines.append(_edge_line(item.name, item.parent))
                records.add_line(["c", item.name, item.parent])
            else:
                lines.append(f'["d", {_string(item.name)}, {text}]')
                records.add_line(["d", item.name], text)
            if self._listen_record:
                self._registry.emit("probe_on_record", name=item.name, entry=item.value,
                                    step=state.step, rank=state.rank)
        try:
            if lines:
                self._prepare()
            state.journal.append(lines)
        except OSError as exc:
            raise CollectionError(f"{state.journal.path}: cannot write the record journal ({exc.strerror or exc}); "
                                  "collection stopped at once: the finished steps and this step's journal are "
                                  "kept (probe recover DUMP_PATH finalises it); free space or fix the permissions "
                                  "of dump_path and run again") from None


def _link(source: str, path: str) -> None:
    """Hard-link ``path`` to ``source`` (a copy where the file system has no links)."""
    try:
        os.link(source, path)
    except OSError:
        shutil.copyfile(source, path, follow_symlinks=False)

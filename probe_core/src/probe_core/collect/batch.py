"""Batching: entries wait here until their tensors' statistics are fetched, all in one transfer.

:class:`Batch` is the :class:`~probe_core.collect.tensors.TensorSink` a data
mode encodes into: ``defer_stats`` queues a statistics handle beside the record
it fills, ``save_tensor`` hands a snapshot to the writer. :meth:`Batch.flush`
fetches every queued statistic with one ``ops.fetch_stats`` call (on the
writer thread under ``async_dump``) and passes the batch on to the
:class:`~probe_core.collect.writer.StepWriter`.
"""

from __future__ import annotations

import threading
from typing import Any

from probe_core.collect.tensors import STAT_KEYS, TensorOps
from probe_core.collect.writer import Pending, StepWriter

FLUSH_EVERY = 128  # entries per batch of statistics

_NOT_IN_NAMES = str.maketrans({"/": "_", "\\": "_", "\x00": "_"})


def file_name(name: str) -> str:
    """``name`` as one file name inside ``dump_tensor_data/``: path separators (and NUL) become ``_``, so no
    name leaves the folder (``PrecisionDebugger.save(x, "../../x")``, an absolute path, a ``ModuleDict`` key
    ``"a/b"``); every other name is kept as msprobe writes it."""
    return name.translate(_NOT_IN_NAMES)


class Batch:
    """Queued entries and their deferred statistics, for one collection."""

    def __init__(self, ops: TensorOps, writer: StepWriter, lock: threading.RLock, *, async_fetch: bool,
                 flush_every: int = FLUSH_EVERY, statistics: tuple[str, ...] | None = None) -> None:
        self.ops = ops
        self.writer = writer
        self.lock = lock
        self.async_fetch = async_fetch
        self.flush_every = flush_every
        #: config summary_mode as a list: the statistics written (the others are null); None: all four
        self._dropped = tuple(i for i, key in enumerate(STAT_KEYS) if key not in statistics) \
            if statistics is not None else ()
        self.current = ""  # the entry being encoded: names its saved tensors
        self._suffix = ops.tensor_suffix
        self.clear()

    def clear(self) -> None:
        """Drop what waits (a new step: statistics of calls that never completed are not fetched)."""
        self._pending: list[Pending] = []
        self._records: list[dict[str, Any]] = []
        self._handles: list[Any] = []
        self.current = ""

    # -- TensorSink ------------------------------------------------------------------

    def defer_stats(self, record: dict[str, Any], handle: Any) -> None:
        """Fill ``record``'s Max/Min/Mean/Norm from ``handle`` at the next flush."""
        if handle is None:
            return
        self._records.append(record)
        self._handles.append(handle)

    def save_tensor(self, tensor: Any, label: str) -> str:
        """Save ``tensor`` as ``{current entry}.{label}{suffix}`` (off the training thread; see :func:`file_name`);
        returns that name.
        A tensor saved again in the same batch, unchanged (a module's output that is the next module's
        input), is a hard link to its first file: one copy and one write, every ``data_name`` still a file."""
        label = label.strip(".")
        data_name = file_name(f"{self.current}.{label}{self._suffix}" if label else f"{self.current}{self._suffix}")
        first = self.ops.once_per_batch(tensor, "save", lambda: data_name)
        if first != data_name:
            self.writer.link_tensor(first, data_name)
        else:
            self.writer.save_tensor(self.ops.snapshot(tensor), data_name, self.ops.nbytes(tensor))
        return data_name

    # -- entries -----------------------------------------------------------------------

    def queue(self, kind: str, name: str, value: dict[str, Any], parent: str | None, construct: bool,
              sid: int | None) -> None:
        """Add a complete entry; a full batch is flushed."""
        self._pending.append(Pending(kind, name, value, parent, construct, sid))
        if len(self._pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Fetch the batch's statistics (one transfer) and hand the batch to the writer."""
        with self.lock:
            if not self._pending:
                return
            pending, records, handles = self._pending, self._records, self._handles
            self._pending, self._records, self._handles = [], [], []
            self.ops.new_batch()
            fetch = self._fetch_some if self._dropped else self.ops.fetch_stats
            if self.async_fetch:  # async_dump: even the statistics transfer happens off the training thread
                self.writer.write(pending, lambda: _fill(records, fetch(handles)))
            else:
                values = fetch(handles)
                self.writer.write(pending, lambda: _fill(records, values))


    def _fetch_some(self, handles: list[Any]) -> list[Any]:
        values = self.ops.fetch_stats(handles)
        return [None if stats is None else tuple(None if i in self._dropped else v for i, v in enumerate(stats))
                for stats in values]


def _fill(records: list[dict[str, Any]], values: list[Any]) -> None:
    for record, stats in zip(records, values, strict=True):  # one value per handle
        if stats is not None:
            record["Max"], record["Min"], record["Mean"], record["Norm"] = stats

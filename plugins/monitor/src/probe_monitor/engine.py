"""The framework-neutral monitor: which steps record, pending statistics, one fetch per step, writers, anomalies.

A framework adapter (:mod:`probe_monitor.torch_monitor`, :mod:`probe_monitor.mindspore_monitor`) hooks
the model and the optimizer and calls :meth:`MonitorEngine.record` with tensors; the statistics of each
tensor are computed right away **on the tensor's device** (a small vector, no host sync) and kept until
:meth:`MonitorEngine.end_step`, which stacks them and fetches them to the host **once per step**, then
hands the rows to the writer and the anomaly detector. Nothing here changes a training tensor.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from probe_core.api import ProbeError, spans, writing

from probe_monitor.anomalies import AnomalyLog
from probe_monitor.config import MonitorConfig, load_monitor_config, plugin_stats
from probe_monitor.output import open_output
from probe_monitor.records import Row, grad_norm
from probe_monitor.writers import WriterContext, open_writer

OUTPUT_ENV = "MONITOR_OUTPUT_DIR"  # msprobe's variable for the output root
DYNAMIC_ENV = "DYNAMIC_MONITOR"
DEFAULT_OUTPUT = "./monitor_output"


class TensorBackend(Protocol):
    """The tensor operations a framework supplies; ``framework`` names it (``pytorch``), ``extra`` holds the
    statistics plugins add (``name -> fn(tensor, eps)``, set by the engine from the config's ``ops``)."""

    framework: str
    extra: dict[str, Any]

    def stats(self, tensor: Any, ops: tuple[str, ...], eps: float) -> Any:
        """A float32 vector on the tensor's device, one value per op (no host sync), or those values computed on
        the host already, as a list of floats that :meth:`fetch` rounds to float32."""

    def fetch(self, vectors: list[Any]) -> list[list[float]]:
        """Every vector of one step on the host, in one transfer."""

    def describe(self, tensor: Any) -> tuple[tuple[int, ...], str]:
        """(shape, dtype name as the framework prints it)."""


@dataclass
class _Pending:
    tag: str
    name: str | Callable[[], str]
    vector: Any
    shape: tuple[int, ...] | None
    dtype: str | None
    micro_step: int | None
    vpp_stage: int


def output_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The folder rank folders go in: ``explicit``, else ``$MONITOR_OUTPUT_DIR``, else ``./monitor_output``."""
    return Path(explicit or os.environ.get(OUTPUT_ENV) or DEFAULT_OUTPUT)


class MonitorEngine:
    """One rank's monitor: step bookkeeping, pending statistics, writer, anomalies."""

    def __init__(self, config: MonitorConfig, backend: TensorBackend, *, rank: int, output: Path,
                 registry: Any = None, start_iteration: int = 0, config_path: str | None = None) -> None:
        self.backend = backend
        self.rank = rank
        self.root = output
        self.registry = registry
        self.config_path = config_path
        self.step = start_iteration
        self.micro_step = 0
        self.steps_recorded: list[int] = []
        self._pending: dict[tuple, _Pending] = {}
        self._first_recorded = 0  # start_step counts from here (absolute; dynamic mode: from switch-on)
        self._config_mtime = self._mtime()
        self.dynamic = os.environ.get(DYNAMIC_ENV, "").strip().lower() in ("1", "true", "yes", "on")
        self.enabled = not self.dynamic or config.dynamic_on
        self.folder: Path | None = None
        self._lock: Any = None  # the run lock of the output folder (probe_core.collect.runlock.RunLock)
        self.writer: Any = None
        self._format: str | None = None
        self.anomalies: AnomalyLog | None = None
        self._apply(config)

    # -- configuration ------------------------------------------------------------------------------

    def _apply(self, config: MonitorConfig) -> None:
        """Take ``config`` on; what can fail (the statistics, the folder, the writer) happens before anything
        changes."""
        extra = plugin_stats(config, self.registry, self.backend.framework)
        records = not config.module_ranks or self.rank in config.module_ranks
        if records and self.folder is None:
            self.folder, self._lock = open_output(self.root, self.rank, config.overwrite)
            self.anomalies = AnomalyLog(config.rules, self.rank, self.folder)
        if records and config.format != self._format:
            writer = open_writer(config, self.registry, WriterContext(self.folder, self.rank, config.ops, config))
            if self.writer is not None:
                self.writer.close()
            self.writer, self._format = writer, config.format
        self.config, self.ops, self.records_rank = config, config.ops, records
        self.backend.extra = extra
        self.backend.full_dtensor = config.dtensor == "full"
        if self.anomalies is not None:
            self.anomalies.rules = config.rules
        self.active = self._is_active()

    def _is_active(self) -> bool:
        c = self.config
        offset = self.step - self._first_recorded - c.start_step
        return (self.enabled and self.records_rank and offset >= 0 and offset % c.step_interval == 0
                and len(self.steps_recorded) < c.collect_times)

    def _mtime(self) -> float:
        try:
            return os.stat(self.config_path).st_mtime if self.config_path else 0.0
        except OSError:
            return 0.0

    def _reload(self) -> None:
        """Dynamic mode: a changed config with ``dynamic_on`` true starts recording at the next step
        (``start_step`` counted from there); ``dynamic_on`` false stops it."""
        mtime = self._mtime()
        if mtime == self._config_mtime:
            return
        self._config_mtime = mtime
        try:
            config = load_monitor_config(self.config_path, registry=self.registry)
            self._apply(config)
        except ProbeError as exc:  # a typo saved while training runs: said once per edit, never fatal
            print(f"probe monitor: the live config edit is ignored, the monitor goes on with the last good config: "
                  f"{'; '.join(exc.messages)}", file=sys.stderr, flush=True)
            return
        self.enabled = config.dynamic_on
        if self.enabled:
            self._first_recorded = self.step
            self.steps_recorded = []

    # -- recording ----------------------------------------------------------------------------------

    def record(self, tag: str, name: str | Callable[[], str], tensor: Any, *, micro_step: int | None = None,
               vpp_stage: int = 0) -> None:
        """Compute ``tensor``'s statistics now, on its device; a later record of the same quantity in the
        same step replaces it (gradients accumulated over micro-steps keep the last, complete value)."""
        key = (tag, name, micro_step, vpp_stage)
        if tensor is None:
            self._pending[key] = _Pending(tag, name, None, None, None, micro_step, vpp_stage)
            return
        shape, dtype = self.backend.describe(tensor)
        vector = self.backend.stats(tensor, self.ops, self.config.eps)
        self._pending[key] = _Pending(tag, name, vector, shape, dtype, micro_step, vpp_stage)

    def end_step(self) -> list[Row]:
        """Finish the step: fetch its statistics once, write them, look for anomalies; next step."""
        rows: list[Row] = []
        if self._pending:
            rows = self._rows()
            self._pending = {}
            self._write(rows)
            self.steps_recorded.append(self.step)
        self.step += 1
        self.micro_step = 0
        if self.dynamic:
            self._reload()
        self.active = self._is_active()
        return rows

    def _write(self, rows: list[Row]) -> None:
        """Write one step; a failed write (a full disk) stops the monitor with one error line that says which
        steps were written completely."""
        done = list(self.steps_recorded)
        try:
            with writing(f"the monitor output of step {self.step} in {self.folder}",
                         lambda: [f"steps {spans(done)}"] if done else []):
                self.writer.write_step(self.step, rows)
                self.anomalies.check(self.step, rows)
        except ProbeError:
            self.enabled = self.active = False
            self._close_writer(quiet=True)
            raise

    def _rows(self) -> list[Row]:
        pending = list(self._pending.values())
        values = self.backend.fetch([p.vector for p in pending if p.vector is not None])
        nan = {op: math.nan for op in self.ops}
        it = iter(values)
        rows = []
        for p in pending:
            name = p.name() if callable(p.name) else p.name
            stats = dict(zip(self.ops, next(it))) if p.vector is not None else dict(nan)
            rows.append(Row(p.tag, name, self.step, stats, p.shape, p.dtype, p.micro_step, p.vpp_stage))
        if self.config.ndigits is not None:
            rows = [replace(r, stats={k: round(v, self.config.ndigits) if math.isfinite(v) else v
                                      for k, v in r.stats.items()}) for r in rows]
        return rows + grad_norm(rows, self.step)

    def write_struct(self, struct: dict[str, list[str]]) -> None:
        """``print_struct``: the module → parameter names, printed and added to ``module_struct.json``."""
        if self.folder is None:
            return
        path = self.folder / "module_struct.json"
        merged = (json.loads(path.read_text()) if path.is_file() else {}) | struct
        with writing(f"the module names in {path}"):
            path.write_text(json.dumps(merged, indent=1))
        print("probe monitor: modules (targets may name any of them):", *(name or '""' for name in struct),
              f"(written to {path})", sep="\n  ", file=sys.stderr)

    def _close_writer(self, quiet: bool = False) -> None:
        writer, self.writer, self._format = self.writer, None, None
        if writer is None:
            return
        try:
            with writing(f"the monitor output in {self.folder}"):
                writer.close()
        except ProbeError:
            if not quiet:  # after a failed write the error is said already
                raise

    def close(self) -> None:
        """Write what is left, print the first anomaly, release the folder (idempotent)."""
        try:
            self._close_writer()
        finally:
            if self.anomalies is not None:
                self.anomalies.close()
                self.anomalies = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None


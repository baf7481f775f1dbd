"""One collection run: the facade a collector drives, composing naming, batching and step writing.

A collector drives a :class:`Collection` with a handful of calls:

* ``api_forward_name("Functional.linear")`` → ``Functional.linear.3.forward``
  and ``module_forward_name("Module.blocks.0.attn.Attention")`` →
  ``Module.blocks.0.attn.Attention.forward.0`` (counts per name, per step);
* ``start_forward(name)`` (filters), ``encode_inputs`` before the call (so an
  in-place call still shows its inputs), ``finish_forward`` after it;
* ``enter_module``/``exit_module`` around module calls (construct parents);
* ``record_backward``, ``record_params_grad``, ``save_variable``;
* ``end_step()`` at each step end and ``close()`` at the end.

Data flows one way through three parts:

* :class:`~probe_core.collect.naming.Naming` — names, counters, filters and
  the module stack: which calls become entries;
* :class:`~probe_core.collect.batch.Batch` — tensors are encoded at once
  (their statistics start on their device) into it; its flush fetches every
  statistic with one transfer;
* :class:`~probe_core.collect.writer.StepWriter` — on its own thread, applies
  the mode's entry policy, appends the entries to the step's journal, emits
  ``probe_on_record``, and writes the step files atomically at step end.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe_core.collect.batch import Batch
from probe_core.collect.encode import ValueEncoder
from probe_core.collect.filters import EntryFilter
from probe_core.collect.hotreload import DumpSwitch
from probe_core.collect.naming import OPTIMIZER_NODE, Naming, backward_name
from probe_core.collect.runlock import RunLock, check_free
from probe_core.collect.stacks import StackRegistry
from probe_core.collect.tensor_options import TensorOptions
from probe_core.collect.tensors import TensorOps
from probe_core.collect.writer import StepWriter, Summary
from probe_core.config import ProbeConfig
from probe_core.errors import CollectionError
from probe_core.modes import DataMode

__all__ = ["Collection", "Summary", "check_dump_path"]

MODULE_PREFIXES = ("Module.", "Cell.")  # a top-level module/cell call is journaled when it ends


class Collection:
    """The framework-neutral state of one collection (see module docstring).

    The naming part's call-path methods (``api_forward_name``, ``start_forward``,
    ``current_module``, ...) are bound here as attributes, so a collector's
    call costs no extra hop. Methods that queue entries or flush hold the
    collection's ``RLock`` (backward hooks may run on another thread).
    """

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
        # extra_info false: dump.json only, as msprobe (no stack.json, no construct.json)
        self.with_construct = self.level in ("L0", "mix") and bool(config.extra_info)
        self.with_stack = bool(config.extra_info)
        #: task structure: the entries' names, parents and stacks, no values (dump.json's data is {}, as msprobe)
        self.with_values = self.task != "structure"
        self.switch = DumpSwitch(config)
        self.dump_root = Path(config.dump_path)
        self.rank_fn = rank_fn
        self.stacks = StackRegistry(stack_skip_dirs, stack_skip_files)
        self._lock = threading.RLock()
        self.naming = naming = Naming(EntryFilter.from_config(config.step, config.rank, config.list,
                                                              config.scope, config.data_mode))
        self.filter = naming.filter
        header = {"task": self.task, "level": self.level, "framework": ops.framework}
        if config.top.get("api_backward") == "inputs":  # not msprobe's layout: say so, compare can tell
            header["api_backward"] = "inputs"
        self.writer = StepWriter(self.dump_root, header,
                                 saves_tensors=mode.saves_tensors or bool(config.tensor_list), save=ops.save,
                                 stack_lines=self.stacks.lines, policy=mode.entry_policy(config), registry=registry,
                                 inline=not config.async_dump, extra_files=bool(config.extra_info),
                                 with_values=self.with_values)
        self.run_lock = RunLock(self.dump_root, overwrite=bool(getattr(config, "overwrite", False)))
        self.writer.before_write = self.run_lock.acquire
        self.batch = Batch(ops, self.writer, self._lock, async_fetch=bool(config.async_dump),
                           statistics=config.summary_statistics)
        self.options = TensorOptions(mode, config.slice, config.tensor_list) if TensorOptions.wanted(config) else None
        self.encoder = ValueEncoder(ops, self.options or mode, self.batch)
        # the call path, straight to its part
        self.api_forward_name = naming.api_forward_name
        self.module_forward_name = naming.module_forward_name
        self.start_forward = naming.start_forward
        self.end_forward_unrecorded = naming.end_forward_unrecorded
        self.wants_backward = naming.wants_backward
        self.enter_module = naming.enter_module
        self.exit_module = naming.exit_module
        self.current_module = naming.current_module
        self.flush = self.batch.flush
        self.wait = self.writer.wait
        self.dumps = True  # False: load-only (see dump_nothing)
        self.step = 0
        self._failed = False
        self._closing = False
        self._closed = False
        self._held_top = False  # a top-level call's records wait for the next one's end (see _flush_top)
        self._pending_signal: int | None = None
        self._signals: dict[int, Any] = {}
        self._install_signal_handlers()
        self._begin_step()

    # -- interruption and failure ------------------------------------------------------

    def _install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT: the step being recorded is written marked ``"partial": true`` (its dump.json
        header says so, and compare warns), instead of being lost (SIGTERM) or looking whole (Ctrl-C)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(signum)
            if previous in (signal.SIG_IGN, None):
                continue
            self._signals[signum] = previous
            signal.signal(signum, self._on_signal)

    def _restore_signal_handlers(self) -> None:
        for signum, previous in self._signals.items():
            if signal.getsignal(signum) == self._on_signal:
                signal.signal(signum, previous)
        self._closed = True  # a later collection's handler may still call this one: it passes the signal on

    def _on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        previous = self._signals.get(signum, signal.SIG_DFL)
        if self._closed:  # finished: nothing to mark, the signal goes where it went before
            if callable(previous):
                previous(signum, frame)
                return
            raise SystemExit(128 + signum)  # the default action; a live collection calling this one finishes first
        if self._closing:  # the files are being finished: let that end, then act on the signal
            self._pending_signal = signum
            return
        self.writer.interrupted = name
        if callable(previous):  # SIGINT's default raises KeyboardInterrupt; a user's handler may let the run go on
            previous(signum, frame)
            self.writer.interrupted = None
            return
        raise SystemExit(128 + signum)  # the default action (terminate), with the dump finished on the way out

    def _check_writer(self) -> None:
        """A write failed (full disk, link in the dump path): stop recording at once and raise its error."""
        error = self.writer.error
        if error is None or self._failed:
            return
        self._failed = True
        self.naming.active = False
        raise error

    def _flush_top(self, module: bool = False) -> None:
        """A top-level call ended. Every record must be in the journal before the next top-level call
        returns, so a killed process keeps every call but, at most, the last one. Inline (the default) this
        holds with a flush at every second top-level API call: the calls of each pair are journaled when
        the second ends (half the statistics transfers of a flush per call); a top-level module call
        flushes at once. With ``async_dump`` or a ``probe_on_record`` listener the batch goes to the writer
        thread at every call, and the previous call's batch is waited for."""
        writer = self.writer
        if writer.inline and not module:  # a top-level module (few, long) is journaled at once, as before
            self._held_top = not self._held_top
            if self._held_top:
                return  # this call's records are journaled when the next top-level call ends
        else:
            writer.sync()
        self.batch.flush()
        self._check_writer()

    @property
    def summary(self) -> Summary:
        return self.writer.summary

    @property
    def active(self) -> bool:
        """True while this step and rank are recorded."""
        return self.naming.active

    @active.setter
    def active(self, value: bool) -> None:
        self.naming.active = value

    @property
    def stopped(self) -> bool:
        """True once nothing more is recorded (the entry policy is exhausted, or a forked child)."""
        return self.writer.stopped

    @stopped.setter
    def stopped(self, value: bool) -> None:
        self.writer.stopped = value

    # -- steps --------------------------------------------------------------------

    def _begin_step(self) -> None:
        self.rank = self._read_rank()
        self.naming.new_step(active=self.dumps and not self.stopped and self.switch.poll(self.step)
                             and self.naming.step_wanted(self.step, self.rank))
        self.batch.clear()
        self.writer.begin_step(self.step, self.rank)

    def dump_nothing(self) -> None:
        """No step writes anything from now on (``load`` without ``dump_after_load``); calls are still counted."""
        self.dumps = self.naming.active = False

    def poll_switch(self) -> None:
        """``start()``: a ``dump_enable`` change (one stat() of config.json) applies from here, as msprobe's
        start() re-reads it; the step boundary checks it too (``probe run`` calls no start())."""
        if self.switch.path is None:
            return
        was = self.switch.enabled
        if self.switch.poll(self.step) != was:
            self.naming.active = self.dumps and self.switch.enabled and not self.stopped and \
                self.naming.step_wanted(self.step, self.rank)

    def _read_rank(self) -> int:
        try:
            return int(self.rank_fn())
        except Exception:
            return 0

    @property
    def all_steps_done(self) -> bool:
        """True when no later step can be recorded (step filter exhausted or overflow limit hit)."""
        return self.stopped or self.naming.past_last_step(self.step)

    def end_step(self) -> None:
        """Flush and start the next step; the writer thread writes this step's files atomically, then emits
        ``probe_on_step_end`` (``close()`` waits for it)."""
        with self._lock:
            self.batch.flush()
            self._held_top = False
            self.writer.end_step()
            self.step += 1
            self._begin_step()
            self._check_writer()

    def close(self) -> Summary:
        """End the current step (when it recorded anything) and wait for every file; raises the first
        error the writer met."""
        self._closing = True
        try:
            with self._lock:
                self.batch.flush()
                self.writer.end_step()
                return self.writer.close()
        finally:
            self.run_lock.release()
            self._restore_signal_handlers()
            if self._pending_signal is not None:
                signal.raise_signal(self._pending_signal)

    # -- forward -------------------------------------------------------------------

    def schedule_tokens(self, scheduled_tokens: Any) -> None:
        """``start(scheduled_tokens={request: n_tokens, ...})`` with ``request_id``: cut dim 0 of every tensor to
        that request's tokens; a batch without the request is not dumped (this step), as msprobe."""
        request = self.config.request_id
        if not request or self.options is None or not isinstance(scheduled_tokens, dict):
            return
        if not self.options.request_tokens(request, scheduled_tokens):
            print(f"probe: request_id {request!r} is not in scheduled_tokens; step {self.step} is not dumped",
                  file=sys.stderr)
            self.naming.active = False

    def optimizer_update(self, running: bool) -> None:
        """An optimizer update starts (``running``) or ends between start() and stop(): its calls are entries
        whose construct.json parent is the ``optimizer`` node (mix level, as msprobe's)."""
        self.naming.update_node = OPTIMIZER_NODE if running and self.with_construct else None

    def capture_stack(self, depth: int = 2) -> int | None:
        return self.stacks.capture(depth + 1) if self.with_stack else None

    def encode_inputs(self, name: str, args: Any, kwargs: dict[str, Any] | None) -> dict[str, Any]:
        """The input half of a forward entry (call before the API runs)."""
        self.batch.current = name
        if not (self.filter.forward and self.filter.inputs and self.with_values):
            return {}
        return {"input_args": self.encoder.encode_args(args, "input"),
                "input_kwargs": self.encoder.encode_kwargs(kwargs)}

    def finish_forward(self, name: str, entry: dict[str, Any], output: Any, parent: str | None,
                       sid: int | None, parameters: dict[str, Any] | None = None) -> None:
        """Complete and queue a forward entry; remembers its parent and stack for its backward."""
        if not self.naming.forward_done(name, parent, sid):
            return
        batch = self.batch
        if parent == OPTIMIZER_NODE and self.with_construct and parent not in self.naming.nodes_written:
            self.naming.nodes_written.add(parent)
            batch.queue("c", parent, {}, None, True, None)  # msprobe's root node of the update's calls
        batch.current = name
        if self.filter.outputs and self.with_values:
            entry["output"] = self.encoder.encode_output(output)
            if parameters is not None:  # written with the output, as msprobe: data_mode input leaves them out
                entry["parameters"] = {key: self.encoder.encode(value, f"parameters.{key}")
                                       for key, value in parameters.items()}
        batch.queue("e", name, entry, parent, self.with_construct, sid)
        if parent is None:
            self._flush_top(name.startswith(MODULE_PREFIXES))  # a top-level call finished: a crash keeps it

    # -- backward, gradients, saves -----------------------------------------------------

    def record_backward(self, forward_name: str, grad_outputs: Any, grad_inputs: Any) -> None:
        """``input``: gradients w.r.t. the call's outputs; ``output``: w.r.t. its inputs."""
        if not self.naming.active:
            return
        with self._lock:
            name = backward_name(forward_name)
            if not self.filter.backward_in_scope(name):
                return
            parent, sid = self.naming.forward_of(forward_name)
            self.batch.current = name
            entry: dict[str, Any] = {}
            if self.filter.inputs and self.with_values:
                entry["input"] = self.encoder.encode_args(grad_outputs, "input")
            if self.filter.outputs and self.with_values:
                entry["output"] = self.encoder.encode_args(grad_inputs, "output")
            back_parent = backward_name(parent) if parent else None
            self.batch.queue("e", name, entry, back_parent, self.with_construct, sid)
            if parent is None:
                self._flush_top(name.startswith(MODULE_PREFIXES))

    def record_params_grad(self, prefix: str, grads: dict[str, Any], sid: int | None = None) -> None:
        """``{prefix}.parameters_grad.{n}`` with ``{param: [grad]}`` (not in construct.json, like msprobe)."""
        if not (self.naming.active and self.filter.backward and self.with_values):
            return
        with self._lock:
            name = self.naming.params_grad_name(prefix)
            if name is None or not self.filter.in_scope_now():
                return
            self.batch.current = name
            if sid is None:
                sid = self.naming.forward_of(f"{prefix}.forward.0")[1]
            entry = {key: [self.encoder.encode(value, key)] for key, value in grads.items()}  # file: ...weight.pt, as msprobe
            self.batch.queue("e", name, entry, None, False, sid)

    def save_variable(self, name: str, value: Any, entry_name: str | None = None) -> str | None:
        """``PrecisionDebugger.save``: a ``{name}.{n}.debug`` entry of debug.json (``entry_name``: one numbered
        before, as a gradient's ``{name}_grad.{n}.debug``)."""
        if not self.naming.active:
            return None
        with self._lock:
            entry_name = entry_name or self.naming.debug_name(name)
            self.batch.current = entry_name
            self.batch.queue("d", entry_name, self.encoder.encode(value, ""), None, False, None)
            return entry_name


def check_dump_path(path: str | os.PathLike[str], overwrite: bool = False) -> Path:
    """Fail early (nothing written) when ``path`` cannot hold a dump; returns it as a Path.

    Checked completely before the script runs: a NUL byte or characters the file system cannot encode,
    a name longer than the file system allows, a file or a link on the way, no write permission, and
    a path that already holds another run (refused unless ``overwrite``) or that another run is writing.
    """
    text = os.fspath(path)
    where = f'dump_path "{text!r}"' if "\x00" in text else f'dump_path "{text}"'
    fix = "choose another dump_path (config key dump_path or --dump-path)"
    if not text.strip():
        raise CollectionError(f"{where}: is empty; {fix}")
    if "\x00" in text:
        raise CollectionError(f"{where}: holds a NUL byte, which no file name can; {fix}")
    try:
        encoded = os.fsencode(text)
    except UnicodeError:
        raise CollectionError(f"{where}: holds characters the file system encoding cannot write; {fix}") from None
    target = Path(text)
    name_max = _limit("PC_NAME_MAX", 255)
    for part in encoded.split(b"/"):
        if len(part) > name_max:
            raise CollectionError(f"{where}: the name {part[:40].decode(errors='replace')}... is {len(part)} bytes, "
                                  f"more than the {name_max} the file system allows; {fix}")
    if len(os.fsencode(os.path.abspath(text))) + 64 > _limit("PC_PATH_MAX", 4096):
        raise CollectionError(f"{where}: is too long for the file system once step and rank folders are added; {fix}")
    probe = target
    while not os.path.lexists(probe):
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.is_symlink() and probe == target:
        raise CollectionError(f"{where}: is a symbolic link; probe does not write through links: {fix}")
    if probe.exists() and not probe.is_dir():
        raise CollectionError(f"{where}: {probe} is a file, not a folder; {fix}")
    try:  # a real write test (permission bits do not stop root; read-only file systems do)
        os.rmdir(tempfile.mkdtemp(prefix=".probe-write-test-", dir=probe))
    except OSError as exc:
        raise CollectionError(f"{where}: {probe} is not writable ({exc.strerror}); choose a writable "
                              "dump_path (config key dump_path or --dump-path)") from None
    if target.is_symlink():
        raise CollectionError(f"{where}: is a symbolic link; probe does not write through links: {fix}")
    check_free(target, overwrite)
    return target


def _limit(name: str, default: int) -> int:
    try:
        return int(os.pathconf("/", name))
    except (OSError, ValueError, AttributeError):
        return default

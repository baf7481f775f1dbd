"""``from probe_mindspore import PrecisionDebugger, seed_all`` — msprobe's MindSpore entry points."""

from __future__ import annotations

import atexit
import weakref
from typing import Any

from probe_core.api import PrecisionDebuggerBase, seed_python


class PrecisionDebugger(PrecisionDebuggerBase):
    """msprobe-compatible debugger for MindSpore (PyNative); a step's files are written at ``step()``,
    and the step in progress at interpreter exit once the debugger has started."""

    framework = "mindspore"

    def start(self, model: Any = None) -> None:
        _started.add(self)
        super().start(model)


_started: weakref.WeakSet[PrecisionDebugger] = weakref.WeakSet()


@atexit.register
def _close_started() -> None:
    for debugger in list(_started):
        debugger.close()


def seed_all(seed: int = 1234, mode: bool = False, rm_dropout: bool = True) -> None:
    """Seed python, numpy and mindspore; ``mode`` asks for deterministic kernels; ``rm_dropout`` disables dropout."""
    import mindspore as ms

    seed_python(seed)
    ms.set_seed(seed)
    if mode:
        ms.set_context(deterministic="ON")
    if rm_dropout:
        _remove_dropout()


def _remove_dropout() -> None:
    """Make ``ops.dropout``, ``mint.nn.functional.dropout`` and ``nn.Dropout`` return their input unchanged."""
    from mindspore import mint, nn, ops

    if getattr(ops, "_probe_dropout_removed", False):
        return

    def identity(input: Any, *args: Any, **kwargs: Any) -> Any:
        return input

    ops.dropout = identity
    mint.nn.functional.dropout = identity
    for cell in (nn.Dropout, getattr(mint.nn, "Dropout", None)):
        if cell is not None:
            cell.construct = lambda self, x, *args, **kwargs: x
    ops._probe_dropout_removed = True

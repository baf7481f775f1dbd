"""Framework-neutral collection engine.

A collector plugin (PyTorch, MindSpore, ...) intercepts module/cell and API
calls and hands what it sees to a :class:`~probe_core.collect.session.Collection`;
the collection names entries exactly as msprobe does, applies the config's
filters, asks the active data mode to encode every tensor (statistics are
computed on the tensor's device and fetched in one batch per flush), keeps the
construct/stack bookkeeping and journals every record so that a crash loses
nothing already flushed. At each step end it writes ``dump.json``,
``stack.json``, ``construct.json`` (and ``debug.json``) atomically.

The collection is three parts with one-way flow — naming/filtering
(:mod:`~probe_core.collect.naming`) → batching (:mod:`~probe_core.collect.batch`)
→ step writing (:mod:`~probe_core.collect.writer`) — behind the
:class:`Collection` facade. Nothing here imports a framework: the collector
supplies an instance of a :class:`~probe_core.collect.tensors.TensorOps` subclass.
"""

from importlib import import_module
from typing import Any

_WHERE = {"Collection": "session", "TensorOps": "tensors", "TensorSink": "tensors", "recover_step": "journal"}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """The facade's names, imported on first use: a module that needs one part of the engine (the in-place rules
    of :mod:`~probe_core.collect.calls`, which the compare judge reads) does not import the rest."""
    if name not in _WHERE:
        raise AttributeError(f"module 'probe_core.collect' has no attribute {name!r}")
    return getattr(import_module(f"probe_core.collect.{_WHERE[name]}"), name)

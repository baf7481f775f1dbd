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

from probe_core.collect.journal import recover_step
from probe_core.collect.session import Collection
from probe_core.collect.tensors import TensorOps, TensorSink

__all__ = ["Collection", "TensorOps", "TensorSink", "recover_step"]

"""Naming and filtering: which calls of a step become entries, and under which names.

Entry names count per name and per step, as msprobe's do
(``Functional.linear.3.forward``, ``Module.blocks.0.attn.Attention.forward.0``,
``{prefix}.parameters_grad.{n}``, ``{name}.{n}.debug``); the config's filters
(:class:`~probe_core.collect.filters.EntryFilter`) decide which are recorded;
the stack of open module calls gives each entry its construct.json parent.
Nothing here touches a tensor or a file.
"""

from __future__ import annotations

from probe_core.collect.filters import EntryFilter


#: construct.json parent of the calls an optimizer update makes between start() and stop(), as msprobe's
OPTIMIZER_NODE = "optimizer"


def backward_name(forward_name: str) -> str:
    """``X.3.forward`` → ``X.3.backward``; ``M.forward.0`` → ``M.backward.0``."""
    head, sep, tail = forward_name.rpartition(".forward")
    return f"{head}.backward{tail}" if sep else forward_name


class Naming:
    """Per-step counters, filter decisions and the module stack of one collection."""

    def __init__(self, entry_filter: EntryFilter) -> None:
        self.filter = entry_filter
        self.active = False  # this step and rank are recorded
        self.update_node: str | None = None  # OPTIMIZER_NODE while an optimizer update runs (the calls' parent)
        self.new_step(active=False)

    def new_step(self, *, active: bool) -> None:
        """Start a step: counters, open modules and forward bookkeeping begin afresh."""
        self.active = active
        self.counters: dict[str, int] = {}
        self.module_stack: list[str | None] = []
        self._forward_info: dict[str, tuple[str | None, int | None]] = {}  # name -> (parent, stack id)
        self.nodes_written: set[str] = set()  # construct.json nodes without entries of their own (optimizer)
        self.filter.new_step()

    def step_wanted(self, step: int, rank: int) -> bool:
        return self.filter.step_wanted(step) and self.filter.rank_wanted(rank)

    def past_last_step(self, step: int) -> bool:
        """True when the step filter allows no step from ``step`` on."""
        last = self.filter.last_step()
        return last is not None and step > last

    # -- names -----------------------------------------------------------------------

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

    def params_grad_name(self, prefix: str) -> str | None:
        """``{prefix}.parameters_grad.{n}``, or ``None`` when the ``list`` filter leaves it out."""
        name = f"{prefix}.parameters_grad.{self._count(prefix + '.parameters_grad')}"
        return name if self.filter.name_wanted(name) else None

    def debug_name(self, name: str) -> str:
        """``PrecisionDebugger.save``'s ``{name}.{n}.debug``."""
        return f"{name}.{self._count(name + '.debug')}.debug"

    # -- forward ---------------------------------------------------------------------

    def start_forward(self, name: str) -> bool:
        """True when the call named ``name`` is recorded (filters say yes)."""
        return self.active and self.filter.forward_starts(name)

    def end_forward_unrecorded(self, name: str) -> None:
        """A started call that will not be recorded still closes a scope."""
        self.filter.forward_ends(name)

    def forward_done(self, name: str, parent: str | None, sid: int | None) -> bool:
        """A recorded call returned: remember its parent and stack for its backward; True when the
        forward entry itself is written (data_mode)."""
        self._forward_info[name] = (parent, sid)
        self.filter.forward_ends(name)
        return self.filter.forward

    def enter_module(self, name: str | None) -> None:
        self.module_stack.append(name)

    def exit_module(self) -> None:
        if self.module_stack:
            self.module_stack.pop()

    def current_module(self) -> str | None:
        if self.update_node is not None:
            return self.update_node
        for name in reversed(self.module_stack):
            if name is not None:
                return name
        return None

    # -- backward --------------------------------------------------------------------

    def wants_backward(self, forward_name: str) -> bool:
        return self.active and self.filter.backward and self.filter.backward_wanted(forward_name)

    def forward_of(self, forward_name: str) -> tuple[str | None, int | None]:
        """The (parent, stack id) a recorded forward call had (``(None, None)`` when unknown)."""
        return self._forward_info.get(forward_name, (None, None))

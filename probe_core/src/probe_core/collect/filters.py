"""config.json filters: step, rank, scope, list and data_mode."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class EntryFilter:
    """Decides which steps, ranks, entries and sides of an entry are recorded.

    * ``steps``/``ranks``: empty means all.
    * ``names`` (config ``list``): an entry is kept when its name contains one of them.
    * ``scope``: ``[first, last]`` — recording runs from the call named ``first``
      to the end of the call named ``last`` (inclusive), in execution order;
      a backward entry is kept when its forward was.
    * ``data_mode``: ``all``, ``forward``, ``backward``, ``input``, ``output``.
    """

    steps: frozenset[int] = frozenset()
    ranks: frozenset[int] = frozenset()
    names: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    data_mode: tuple[str, ...] = ("all",)
    _in_scope: bool = field(default=False, init=False)
    _scope_done: bool = field(default=False, init=False)
    _kept_forward: set[str] = field(default_factory=set, init=False)

    @classmethod
    def from_config(cls, steps: Sequence[int], ranks: Sequence[int], names: Sequence[str],
                    scope: Sequence[str], data_mode: Sequence[str]) -> EntryFilter:
        from probe_core.config import IdSet  # ids stay ranges: "0-200000000" is two integers

        return cls(IdSet.of(steps), IdSet.of(ranks), tuple(names), tuple(scope), tuple(data_mode or ("all",)))

    # -- coarse switches -----------------------------------------------------------

    def step_wanted(self, step: int) -> bool:
        return not self.steps or step in self.steps

    def rank_wanted(self, rank: int) -> bool:
        return not self.ranks or rank in self.ranks

    def last_step(self) -> int | None:
        if not self.steps:
            return None
        last = getattr(self.steps, "last", None)  # an IdSet knows it without walking its ranges
        return last if last is not None else max(self.steps)

    @property
    def forward(self) -> bool:
        return "all" in self.data_mode or "forward" in self.data_mode or \
            "input" in self.data_mode or "output" in self.data_mode

    @property
    def backward(self) -> bool:
        return "all" in self.data_mode or "backward" in self.data_mode or \
            "input" in self.data_mode or "output" in self.data_mode

    @property
    def inputs(self) -> bool:
        return not ("output" in self.data_mode and "input" not in self.data_mode and "all" not in self.data_mode)

    @property
    def outputs(self) -> bool:
        return not ("input" in self.data_mode and "output" not in self.data_mode and "all" not in self.data_mode)

    @property
    def any_name_filter(self) -> bool:
        return bool(self.names or self.scope)

    # -- per entry -----------------------------------------------------------------

    def new_step(self) -> None:
        self._in_scope = False
        self._scope_done = False
        self._kept_forward.clear()

    def forward_starts(self, name: str) -> bool:
        """Called when a forward call named ``name`` starts; True when it is recorded."""
        if self.scope:
            if not self._in_scope and not self._scope_done and name == self.scope[0]:
                self._in_scope = True
            if not self._in_scope:
                return False
        if self.names and not any(item in name for item in self.names):
            return False
        self._kept_forward.add(name)
        return True

    def forward_ends(self, name: str) -> None:
        """Called when a forward call ends (closes a scope ending at ``name``)."""
        if self.scope and self._in_scope and name == self.scope[-1]:
            self._in_scope = False
            self._scope_done = True

    def backward_wanted(self, forward_name: str) -> bool:
        return not self.any_name_filter or forward_name in self._kept_forward

    def name_wanted(self, name: str) -> bool:
        """For entries without a forward call (parameters_grad, saves): the ``list`` filter only."""
        return not self.names or any(item in name for item in self.names)

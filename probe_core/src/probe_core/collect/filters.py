"""config.json filters: step, rank, scope, list, data_mode and risk_level."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: msprobe's API risk levels, narrowest first: a level records the APIs whose risk is in its set.
RISK_LEVELS: dict[str, frozenset[str]] = {
    "CORE": frozenset({"CORE"}),
    "FOCUS": frozenset({"CORE", "FOCUS"}),
    "ALL": frozenset({"CORE", "FOCUS", "LOW"}),
}


@dataclass
class EntryFilter:
    """Decides which steps, ranks, entries and sides of an entry are recorded.

    * ``steps``/``ranks``: empty means all.
    * ``names`` (config ``list``): an entry is kept when its name contains one of them.
    * ``scope``: ``[first, last]`` — recording runs from the call named ``first``
      to the end of the call named ``last`` (inclusive), in execution order,
      backward entries and parameter gradients included (msprobe's range: one of
      forward calls takes no backward entry).
    * ``data_mode``: ``all``, ``forward``, ``backward``, ``input``, ``output``.
    * ``risk_level`` (:meth:`use_risk_level`): APIs whose risk (``CORE``, ``FOCUS``
      or ``LOW``, as the framework classifies them) is below the level are not
      recorded; as msprobe, it applies only where neither ``scope`` nor ``list`` is set.
    """

    steps: frozenset[int] = frozenset()
    ranks: frozenset[int] = frozenset()
    names: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    data_mode: tuple[str, ...] = ("all",)
    _in_scope: bool = field(default=False, init=False)
    _scope_done: bool = field(default=False, init=False)
    _kept_forward: set[str] = field(default_factory=set, init=False)
    _risk_ok: dict[str, bool] | None = field(default=None, init=False)  # API -> recorded (None: all are)
    _risk_of: Callable[[str], str] | None = field(default=None, init=False)
    _risks: frozenset[str] = field(default=frozenset(), init=False)

    @classmethod
    def from_config(cls, steps: Sequence[int], ranks: Sequence[int], names: Sequence[str],
                    scope: Sequence[str], data_mode: Sequence[str]) -> EntryFilter:
        from probe_core.config import IdSet  # ids stay ranges: "0-200000000" is two integers

        return cls(IdSet.of(steps), IdSet.of(ranks), tuple(names), tuple(scope), tuple(data_mode or ("all",)))

    def use_risk_level(self, level: str, risk_of: Callable[[str], str]) -> None:
        """Record only the APIs (``Tensor.reshape``) whose ``risk_of(api)`` is in ``level``'s set."""
        if level not in RISK_LEVELS:
            raise ValueError(f"risk_level {level!r}: choose one of {', '.join(RISK_LEVELS)}")
        if level == "ALL" or self.any_name_filter:
            self._risk_ok = None
            return
        self._risk_ok, self._risk_of, self._risks = {}, risk_of, RISK_LEVELS[level]

    def api_wanted(self, api: str) -> bool:
        """Whether the risk level records calls of ``api`` (``Functional.linear``); cached per API."""
        table = self._risk_ok
        if table is None:
            return True
        wanted = table.get(api)
        if wanted is None:
            wanted = table[api] = self._risk_of(api) in self._risks
        return wanted

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
        if self._risk_ok is not None and name.endswith(".forward") and not self.api_wanted(name.rsplit(".", 2)[0]):
            return False
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
        """Whether a forward call's backward is hooked. Under ``scope`` (a range in time, as msprobe's) only while
        the range can still take it: it is open or not reached yet, or it names a backward entry."""
        if self.scope:
            return not self._scope_done or any(".backward" in name for name in self.scope)
        return not self.names or forward_name in self._kept_forward

    def backward_in_scope(self, name: str) -> bool:
        """Called when the backward entry ``name`` is written: under ``scope`` it is kept only inside the range
        (a backward name may open or close it), so a range of forward calls takes no backward entry."""
        if not self.scope:
            return True
        if not self._in_scope and not self._scope_done and name == self.scope[0]:
            self._in_scope = True
        kept = self._in_scope and (not self.names or any(item in name for item in self.names))
        if self._in_scope and name == self.scope[-1]:
            self._in_scope = False
            self._scope_done = True
        return kept

    def in_scope_now(self) -> bool:
        """For parameter gradients under ``scope``: whether the range is open now."""
        return not self.scope or self._in_scope

    def name_wanted(self, name: str) -> bool:
        """For entries without a forward call (parameters_grad, saves): the ``list`` filter only."""
        return not self.names or any(item in name for item in self.names)

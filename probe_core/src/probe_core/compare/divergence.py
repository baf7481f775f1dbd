"""Finding the first divergent entry while compare outcomes stream by in execution order."""

from __future__ import annotations

from typing import Any

from probe_core.compare.rules import UNMATCHED


class DivergenceTracker:
    """Finds the first divergent entry while outcomes stream by in execution order.

    The first divergent entry is the earliest matched entry whose inputs
    agree and whose outputs do not. When a matched entry's inputs already
    differ before any such entry (the change happened in a call the other
    dump does not have), the latest target-only entry before it is reported
    instead, or that entry itself when there is none.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.first: dict[str, Any] | None = None
        self._last_matched: str | None = None
        self._last_unmatched: Any = None
        self._after: str | None = None

    def _record(self, outcome, reason: str, after: str | None = None) -> None:
        entry = outcome.npu_entry or outcome.bench_entry
        self.first = {"name": outcome.name, "bench_name": outcome.bench_entry.name if outcome.bench_entry else None,
                      "module": entry.parent if entry else None, "stack": list(entry.stack) if entry else [],
                      "reason": reason, "result": outcome.result, "rank": self.label, "after": after}

    def see(self, outcome) -> None:
        if self.first is not None:
            return
        if outcome.result == UNMATCHED:
            if outcome.npu_entry is not None:
                self._last_unmatched, self._after = outcome, self._last_matched
            return
        if outcome.divergence:
            self._record(outcome, outcome.divergence)
        elif outcome.inputs_differ:
            if self._last_unmatched is not None:
                after = f" after {self._after}" if self._after else ""
                self._record(self._last_unmatched,
                             f"only in the target dump{after}; the next matched entry {outcome.name} already has "
                             f"differing inputs ({outcome.inputs_differ})", self._after)
            else:
                self._record(outcome, f"inputs already differ ({outcome.inputs_differ}): the change comes from "
                                      f"outside the dumped calls")
        self._last_matched = outcome.name

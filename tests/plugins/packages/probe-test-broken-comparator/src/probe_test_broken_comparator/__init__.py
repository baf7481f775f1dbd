"""A comparator whose ``compare`` always raises (plugin ``broken_column``): the compare must go on without it."""

from __future__ import annotations

from typing import Any

from probe_core.api import ComparatorSpec, hookimpl



class Broken:
    columns = ("BrokenColumn",)

    def compare(self, pair: Any) -> dict[str, Any]:
        raise RuntimeError("this comparator is broken on purpose")


@hookimpl
def probe_comparators() -> list[ComparatorSpec]:
    return [ComparatorSpec("broken_column", "statistics", "always raises", Broken)]

"""How the suite splits across ``pytest -n N --dist loadgroup`` workers (``make test``).

Tests that share a fixture made once per session go to one worker, grouped by the folder of the conftest
that defines it; tests that share a module-scoped fixture, by file; the others are spread one by one. A test
marked ``xdist_group`` by hand keeps its group (the client matrix groups by client). Without ``-n`` this
changes nothing.
"""

from __future__ import annotations

import pytest


def _group(item: pytest.Item) -> str | None:
    shared = {"session": set(), "module": set()}
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        definition = definitions[-1]
        if definition.scope in shared and definition.baseid:  # fixtures of plugins (tmp_path_factory) have none
            shared[definition.scope].add(definition.baseid)
    if shared["session"]:
        return min(shared["session"], key=len)  # the folder whose tests all see the fixture
    if shared["module"]:
        return item.nodeid.split("::", 1)[0]
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = _group(item)
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))

"""How the suite splits across ``pytest -n N`` workers (``make test``): which tests must run on one worker.

* the tests of a folder whose conftest.py makes fixtures once per session (dumps, pip-installed packages) go to
  one worker, so those are made once;
* the client matrix goes to one worker per client (a client's three levels read the same five runs);
* any other test file goes to one worker (its module-scoped fixtures are made once);
* the longest units (:data:`LONGEST_FIRST`) are handed out first, so one worker runs each of them while the other
  takes the many short ones, and the run does not end on one worker still busy with a long unit.

xdist's own ``--dist loadgroup`` cannot say this under pytest 9: it tags a test's node id through an attribute
pytest no longer reads, so ``xdist_group`` marks are ignored. The scheduler below groups by these scopes
instead (xdist's ``pytest_xdist_make_scheduler``). Without ``-n`` nothing changes.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_CLIENT = re.compile(r"^tests/clients/test_clients\.py::(?:test_client_under_probe_run\[(?P<name>.+)-(?:L0|L1|mix)\]"
                     r"|test_float64_bench\w*\[(?P<float64>.+)\]|test_(?P<compiled>torch_compile)\w*)$")
_SESSION = re.compile(r"""scope\s*=\s*["']session["']""")


@lru_cache(maxsize=None)
def _makes_session_fixtures(folder: str) -> bool:
    conftest = ROOT / folder / "conftest.py"
    return conftest.is_file() and _SESSION.search(conftest.read_text(encoding="utf-8")) is not None


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to (tests of one unit run on one worker, in order)."""
    client = _CLIENT.match(nodeid)
    if client:
        return f"client {client['name'] or client['float64'] or 'torch-compile'}"
    path = nodeid.split("::", 1)[0]
    folder = path.rpartition("/")[0]
    while folder.count("/") >= 1:  # the folders between the file and tests/ (whose conftest makes none)
        if _makes_session_fixtures(folder):
            return folder
        folder = folder.rpartition("/")[0]
    return path


#: the units that take longest on the 2-core box (``--durations``, 2026-12-08: the interop tests ~10 min of one
#: worker, the sharded runs ~4 min, locate ~2.5 min), in the order they start
LONGEST_FIRST = ("tests/interop", "tests/collect/test_sharded.py", "tests/locate/test_locate.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest units first, the rest in collection order (every xdist worker sorts alike)."""
    rank = {scope: place for place, scope in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(scope_of(item.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ScopeScheduling(config, log)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The client matrix's table (client x level) at the end of a run that used it. Each client test records its
    row (``matrix_row``); the reports carry it from xdist's workers to this process, which loads this conftest
    (and not tests/clients', being no collector)."""
    rows = [value for reports in terminalreporter.stats.values() for report in reports
            if getattr(report, "when", None) == "call"
            for key, value in getattr(report, "user_properties", ()) if key == "matrix_row"]
    if rows:
        from tests.clients import matrix

        terminalreporter.write_sep("=", "probe run on real clients (each planted run vs its clean reference)")
        terminalreporter.write_line(matrix.table(rows))

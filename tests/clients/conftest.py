"""Prints the client matrix's table (client x level) at the end of a run that used it."""

from __future__ import annotations

from tests.clients import matrix


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if matrix.RESULTS:
        terminalreporter.write_sep("=", "probe run on real clients (each planted run vs its clean reference)")
        terminalreporter.write_line(matrix.table(list(matrix.RESULTS.values())))

"""Prints the client matrix's table (client x level) at the end of a run that used it: each test records its row
(``matrix_row``), which reaches this process from xdist's workers too."""

from __future__ import annotations

from tests.clients import matrix


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    rows = [value for reports in terminalreporter.stats.values() for report in reports
            if getattr(report, "when", None) == "call"
            for key, value in getattr(report, "user_properties", ()) if key == "matrix_row"]
    if rows:
        terminalreporter.write_sep("=", "probe run on real clients (each planted run vs its clean reference)")
        terminalreporter.write_line(matrix.table(rows))

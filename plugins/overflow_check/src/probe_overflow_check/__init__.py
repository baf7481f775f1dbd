"""probe-overflow-check: ``probe overflow-check``, the first NaN/Inf of a run, across ranks and through communication.

:mod:`~probe_overflow_check.scan` finds each rank's first NaN/Inf, :mod:`~probe_overflow_check.analyze`
orders the ranks (with ``probe_core.api``'s ``first_across_ranks`` and ``concurrent_with``) and writes
msprobe's report, :mod:`~probe_overflow_check.command` is the CLI (plugin ``overflow-check``).
"""

"""``probe overflow-check``: the first NaN/Inf of a run, across ranks and through communication.

:mod:`~probe_core.anomaly.scan` finds each rank's first NaN/Inf, :mod:`~probe_core.anomaly.analyze`
orders the ranks (with :mod:`probe_core.dump.order`) and writes msprobe's report,
:mod:`~probe_core.anomaly.command` is the CLI.
"""

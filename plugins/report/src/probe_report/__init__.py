"""probe-report: ``probe report OUT_OR_DUMPS... -o report.html`` writes one self-contained HTML page of a
``probe compare`` or ``probe monitor compare`` output (:mod:`~probe_report.command`, plugin ``report``)."""

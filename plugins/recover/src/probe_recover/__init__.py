"""probe-recover: ``probe recover DUMP`` finalises the steps a killed run left as record journals
(:mod:`~probe_recover.command`, plugin ``recover``)."""

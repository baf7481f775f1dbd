"""Collection side of the data modes: how one tensor becomes a dump.json record.

Framework-neutral: every mode uses only the collector's
:class:`probe_core.collect.TensorOps` and the collection's
:class:`probe_core.collect.TensorSink`, so the PyTorch and MindSpore collectors
share them unchanged.
"""

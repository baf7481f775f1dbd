"""probe's built-in data modes, each its own plugin: ``statistics``, ``md5``, ``tensor``, ``overflow_check``.

One module per mode owns the whole mode (collection, dump recognition,
compare columns and verdicts, graph) and implements its plugin's hooks.
"""

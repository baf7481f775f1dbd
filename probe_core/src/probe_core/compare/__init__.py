"""Compare two dumps: matching, comparators, the legend's rules, first divergence, CSV/XLSX.

Stable pieces other parts build on:

* :mod:`probe_core.compare.rules` — ``judge_entry(entry_name, rows, mode)``
  (the structural rules; msprobe's value legend with ``rules="msprobe"``),
  ``RowResult`` and the result levels ``PASS``/``WARNING``/``ERROR``/``UNMATCHED``;
* :mod:`probe_core.compare.judge` — the noise-aware judge: ``entry_facts``,
  ``judge_step`` (which entry adds error, where a step first went wrong);
* :mod:`probe_core.compare.verdicts` — one answer for a whole job: steps
  chained (an update that diverged), ranks ordered through communication;
* :mod:`probe_core.compare.metrics` — statistics-mode metrics;
* :mod:`probe_core.compare.comparator` — the comparator interface
  (``columns`` + ``compare(LeafPair)``) and ``load_comparators(registry, mode)``;
* :mod:`probe_core.compare.match` — ``match_entries`` (exact / fuzzy / mapped);
* :mod:`probe_core.compare.mapping` — the built-in MindSpore<->PyTorch tables and
  msprobe's mapping files (-lm, -cm, -am, -dm);
* :mod:`probe_core.compare.postprocess` — ``--config`` tensor post-processing;
* :mod:`probe_core.compare.merge_result` — ``probe merge-result``;
* :mod:`probe_core.compare.engine` — ``compare_entry`` for one entry,
  ``run_compare(CompareOptions, registry)`` for a whole run.
"""

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
* :mod:`probe_core.compare.mapping` — name maps (the installed plugins' built-in tables, ``probe_name_maps``) and
  msprobe's mapping files (-lm, -cm, -am, -dm);
* :mod:`probe_core.compare.postprocess` — ``--config`` tensor post-processing;
* :mod:`probe_core.compare.entries` — ``compare_entry`` for one entry (the row path);
* :mod:`probe_core.compare.columnar` — the plain entries of a chunk as columns;
* :mod:`probe_core.compare.render` — rows as the CSV/XLSX hold them;
* :mod:`probe_core.compare.chunks` / :mod:`probe_core.compare.rank` — one rank pair, a chunk at a time, then
  written with the job's verdicts;
* :mod:`probe_core.compare.engine` — ``run_compare(CompareOptions, registry)`` for a whole run.
"""

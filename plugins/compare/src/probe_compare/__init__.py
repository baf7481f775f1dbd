"""probe-compare: compare two dumps: matching, comparators, the legend's rules, the noise-aware judge, first
divergence, CSV/XLSX. A plugin like any other (entry point ``compare``: the ``probe compare`` command); its
public surface is :mod:`probe_compare.api`, what comparators, name maps and the commands built on the
pipeline (graph, locate, report) import.

The modules, in the order the pipeline runs them:

* :mod:`probe_compare.engine` — ``run_compare(CompareOptions, registry)`` for a whole run: pairs of rank
  dumps (:mod:`~probe_compare.pairs`), each compared and written (:mod:`~probe_compare.rank`), then one answer;
* :mod:`probe_compare.chunks` — one rank pair, a chunk at a time: matched (:mod:`~probe_compare.match`,
  names mapped by :mod:`~probe_compare.mapping`), compared on the columnar path
  (:mod:`~probe_compare.columnar`) or row by row (:mod:`~probe_compare.entries`), rendered
  (:mod:`~probe_compare.render`);
* :mod:`probe_compare.comparator` — the comparator interface (``columns`` + ``compare(LeafPair)``) and
  ``load_comparators(registry, mode)``;
* :mod:`probe_compare.rules` — ``RowResult``, the verdicts and the structural rules (msprobe's value legend
  with ``rules="msprobe"``);
* :mod:`probe_compare.judge` — the noise-aware judge: what each entry adds, where a step first went wrong;
  :mod:`probe_compare.verdicts` — one answer for a whole job: steps chained, ranks ordered through
  communication; :mod:`probe_compare.reference` — noise references;
* :mod:`probe_compare.output` / :mod:`probe_compare.xlsx` — the CSV, XLSX and summary;
  :mod:`probe_compare.postprocess` — ``--config`` tensor post-processing;
* :mod:`probe_compare.command` — the ``probe compare`` command.
"""

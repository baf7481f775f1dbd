"""The public API of probe-compare: what comparators and name maps are handed and return, and the compare
pipeline that ``probe graph``, ``probe locate`` and ``probe report`` build on.

A comparator or name-map plugin imports these names from here (and everything else from ``probe_core.api``),
and declares ``probe-compare`` among its dependencies. Everything else in ``probe_compare`` is private and may
move. Names are imported on first use, as in ``probe_core.api``.

- what a comparator sees and gives: ``LeafPair``, ``RowResult``, the verdicts ``PASS``/``WARNING``/``ERROR``,
  ``is_bad``, ``metric_values``, ``NA`` (a cell with no value); the loaded comparators of a mode
  (``LoadedComparator``, ``load_comparators``);
- name maps between frameworks: ``NameMap`` (what a ``NameMapSpec`` loads), ``builtin_map``;
- XLSX results: ``StreamingXlsx``, ``read_first_sheet``;
- the pipeline: the row and columnar compare of one entry (``compare_entry``, ``ColumnarCompare``, ``Plain``),
  the judge (``entry_facts``, ``plain_facts``, ``EntryFacts``, ``Finding``, ``largest``, ``roundoff``) and its
  verdicts over steps and ranks (``StepFacts``, ``judge_job``), noise references (``NoiseReference``,
  ``noise_references``, ``reference_pair``), and a whole compare (``CompareOptions``, ``run_compare``).
"""

from __future__ import annotations

from probe_core.api import lazy_surface

_EXPORTS: dict[str, tuple[str, ...]] = {
    "probe_compare.comparator": ("LeafPair", "LoadedComparator", "load_comparators"),
    "probe_compare.rules": ("ERROR", "PASS", "WARNING", "RowResult", "is_bad", "metric_values"),
    "probe_compare.output": ("NA",),
    "probe_compare.mapping": ("NameMap", "builtin_map"),
    "probe_compare.xlsx": ("StreamingXlsx", "read_first_sheet"),
    "probe_compare.columnar": ("ColumnarCompare", "Plain"),
    "probe_compare.entries": ("compare_entry",),
    "probe_compare.judge": ("EntryFacts", "Finding", "NoiseReference", "entry_facts", "largest", "plain_facts",
                            "roundoff"),
    "probe_compare.verdicts": ("StepFacts", "judge_job"),
    "probe_compare.reference": ("noise_references", "reference_pair"),
    "probe_compare.options": ("CompareOptions",),
    "probe_compare.engine": ("run_compare",),
}

__getattr__, __dir__, __all__, WHERE = lazy_surface(__name__, _EXPORTS)

"""The public plugin API of probe: the one module a plugin imports (and :mod:`probe_core.testing` in its tests).

Everything named here is stable: plugins of this repository and third parties use these names, and
whatever else lives in ``probe_core`` is private and may move. Names are imported on first use, so
``from probe_core.api import DataModeSpec`` imports no framework and none of the collection engine.

The families (see docs/plugins.md):

- registration: :data:`hookimpl`, the spec dataclasses the hooks return (``CollectorSpec``,
  ``DataModeSpec``, ``ComparatorSpec``, ``CheckerSpec``, ``GraphMergerSpec``, ``CommandSpec``,
  ``ConfigSectionSpec``/``ConfigKey``, ``MonitorWriterSpec``, ``AccStandardSpec``, ``AccBackendSpec``,
  ``RunTaskSpec``, ``NameMapSpec``) and what hooks are handed (``CheckContext``, ``RunRequest``, ``Registry``);
- errors and warnings: ``ProbeError`` and its kinds, ``ProbeWarning``;
- data modes and collectors: ``DataMode``, ``TensorOps``, ``CollectorBase``, ``PrecisionDebuggerBase``,
  ``start_script_collector``,
  the in-place and operator rules, seeding, the fused statistics kernel, run locks;
- compare: ``LeafPair``, ``RowResult``, the verdicts ``PASS``/``WARNING``/``ERROR``, metric helpers, name maps
  (``NameMap``, ``builtin_map``), XLSX results (``StreamingXlsx``, ``read_first_sheet``);
- dumps: ``discover``, ``RankDump``, ``DumpEntry``, ``TensorMeta``, JSON reading and writing, the order of ranks
  through communication, record journals;
- graphs: ``Graph``, ``Node``, ``NodeKind`` and the entry-name helpers graph mergers use, ``build_graph``,
  the parallel ``Layout`` and ``merge_side`` (the graph mergers run in order);
- the compare pipeline (``probe graph`` scores its nodes with it): the row and columnar compare of one entry,
  loaded comparators, the judge and its verdicts, noise references;
- outputs and inputs: output folders (:mod:`probe_core.outputs`), bounded YAML, executors, id selections.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS: dict[str, tuple[str, ...]] = {
    "probe_core": ("hookimpl",),
    "probe_core.specs": (
        "AccBackendSpec", "AccStandardSpec", "CheckContext", "CheckRow", "CheckerSpec", "CollectorSpec", "CommandSpec",
        "ComparatorSpec", "ConfigKey", "ConfigSectionSpec", "DataModeSpec", "Deferred", "GraphMergerSpec", "Json",
        "LoadableSpec", "MonitorStatSpec", "MonitorWriterSpec", "NameMapSpec", "RunRequest", "RunTaskSpec"),
    "probe_core.errors": ("CheckError", "CollectionError", "CompareError", "ConfigError", "DumpError", "GraphError",
                          "PluginError", "ProbeError"),
    "probe_core.plugins": ("ProbeWarning", "Registry", "current_registry"),
    "probe_core.config": ("DEFAULT_TASK", "load_config", "plugin_selection", "read_config", "validate_config"),
    "probe_core.modes": ("DataMode", "load_mode", "pair_mode"),
    "probe_core.collect.tensors": ("TensorOps",),
    "probe_core.collect.driver": ("CollectorBase",),
    "probe_core.collect.debugger": ("PrecisionDebuggerBase", "start_script_collector"),
    "probe_core.collect.calls": ("GradSlots", "OPERATOR_DUNDERS", "is_inplace", "writes_in_place"),
    "probe_core.collect.seeding": ("seed_python",),
    "probe_core.collect.fused": ("KINDS", "host_stats", "row_layout"),
    "probe_core.collect.journal": ("drop_unwritten", "recover_step", "safe_dir"),
    "probe_core.collect.runlock": ("MARKER_NAME", "RunLock", "check_free", "job_key", "lock_held"),
    "probe_core.compare.comparator": ("LeafPair", "LoadedComparator", "load_comparators"),
    "probe_core.compare.rules": ("ERROR", "PASS", "WARNING", "RowResult", "is_bad", "metric_values"),
    "probe_core.compare.metrics": ("as_float", "cosine", "relative_error"),
    "probe_core.compare.output": ("NA",),
    "probe_core.compare.mapping": ("NameMap", "builtin_map"),
    "probe_core.compare.xlsx": ("StreamingXlsx", "read_first_sheet"),
    # compare pipeline (graph, locate, report call it): the row and columnar compare of one entry, the judge
    # and its verdicts over steps and ranks, noise references (also comparator, modes, fastjson, executor,
    # selection and config names above and below)
    "probe_core.compare.columnar": ("ColumnarCompare", "Plain"),
    "probe_core.compare.entries": ("compare_entry",),
    "probe_core.compare.judge": ("EntryFacts", "Finding", "NoiseReference", "entry_facts", "largest", "plain_facts",
                                 "roundoff"),
    "probe_core.compare.verdicts": ("StepFacts", "judge_job"),
    "probe_core.compare.reference": ("noise_references", "reference_pair"),
    "probe_core.gcpause": ("collector_paused", "left_to_exit"),
    "probe_core.dump.leaves": ("short_text",),
    "probe_core.dump": ("DumpEntry", "RankDump", "TensorMeta", "discover"),
    "probe_core.dump.order": ("RankAnomaly", "communication_positions", "concurrent_with", "first_across_ranks",
                              "is_communication"),
    "probe_core.dump.journal": ("read_journal",),
    "probe_core.dump.jsonstream": ("loads",),
    "probe_core.fastjson": ("dumps", "float_texts", "tables_json"),
    "probe_core.graph.model": ("API_GROUP_PREFIX", "ROOT_NAME", "Graph", "Node", "NodeKind", "TensorTable"),
    "probe_core.graph.names": ("BACKWARD", "FORWARD", "counterpart", "direction", "is_module", "is_params_grad",
                               "split_module", "without_count"),
    "probe_core.graph.flatten": ("INPUT_KEYS",),
    "probe_core.graph.build": ("build_graph", "group_top_level_apis"),
    "probe_core.graph.merge": ("DEFAULT_ORDER", "Layout", "merge_side"),
    "probe_core.outputs": ("OutputError", "create_exclusive", "human_size", "output_folder", "prepare_output_dir",
                           "replaced_whole", "unique_path", "write_new", "writing"),
    "probe_core.safeyaml": ("MAX_DEPTH", "load_yaml", "parse_yaml", "read_capped"),
    "probe_core.executor": ("ExecutorChoice", "RegistryRef", "add_executor_arguments", "executor_choice",
                            "job_executor", "registry_of", "registry_ref", "run_jobs"),
    "probe_core.selection": ("abridged", "add_selection_arguments", "gaps", "selection", "spans"),
    "probe_core.ranks": ("launcher_rank", "process_rank"),
    "probe_core.runtag": ("MONTHS", "TAG", "tag_started", "time_tag"),
    "probe_core.cli": ("refuse_options", "run_command"),
    "probe_core.htmlflag": ("add_html_argument", "check_html", "write_html"),
    "probe_core.cause": ("ArgumentChange", "argument_changes", "csv_argument_changes"),
    "probe_core.terminal": ("print_table",),
    "probe_core.stackframe": ("Frame", "parse_stack"),
}

#: public name -> the private module that defines it
WHERE: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(WHERE)


def __getattr__(name: str) -> Any:
    module = WHERE.get(name)
    if module is None:
        raise AttributeError(f"probe_core.api has no {name!r}; the public names are listed in docs/plugins.md")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__

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
- numbers: ``as_float``, ``relative_error``, ``cosine`` (comparators and checkers alike);
- dumps: ``discover``, ``RankDump``, ``DumpEntry``, ``TensorMeta``, ``EntryRef``, entry names and what they say
  (module or API, forward or backward: ``direction``, ``counterpart``, ...), JSON reading and writing, the order
  of ranks through communication, record journals;
- outputs and inputs: output folders (:mod:`probe_core.outputs`), bounded YAML, executors, id selections;
- ``lazy_surface``: how a distribution others build on gives its own such module.

The compare pipeline and what comparators see (``LeafPair``, ``RowResult``, the verdicts, name maps, the judge)
are ``probe_compare.api`` (distribution probe-compare); graphs (``Graph``, ``Node``, ``build_graph``,
``Layout``, ``merge_side``) are ``probe_graph.api`` (probe-graph). Reading one of those names here says where
it went.
"""

from __future__ import annotations

from probe_core.surface import lazy_surface

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
    "probe_core.collect.naming": ("OPTIMIZER_NODE",),
    "probe_core.collect.journal": ("drop_unwritten", "recover_step", "safe_dir"),
    "probe_core.collect.runlock": ("MARKER_NAME", "RunLock", "check_free", "job_key", "lock_held"),
    "probe_core.numbers": ("as_float", "cosine", "relative_error"),
    "probe_core.records": ("record",),
    "probe_core.gcpause": ("collector_paused", "left_to_exit"),
    "probe_core.dump.leaves": ("SECTIONS", "short_text"),
    "probe_core.dump": ("DumpEntry", "EntryRef", "RankDump", "TensorMeta", "discover"),
    "probe_core.dump.names": ("DIRECTIONS", "common_api_name", "parse_entry_name"),
    "probe_core.dump.kinds": ("BACKWARD", "FORWARD", "counterpart", "direction", "is_module", "is_params_grad",
                              "split_module", "without_count"),
    "probe_core.dump.order": ("RankAnomaly", "communication_positions", "concurrent_with", "first_across_ranks",
                              "is_communication"),
    "probe_core.dump.journal": ("read_journal",),
    "probe_core.dump.jsonstream": ("loads",),
    "probe_core.fastjson": ("dumps", "float_texts", "native_flatten_entry", "native_join_rows", "numbers_json",
                            "tables_json"),
    "probe_core.outputs": ("OutputError", "create_exclusive", "human_size", "output_folder", "prepare_output_dir",
                           "replaced_whole", "unique_path", "write_new", "writing"),
    "probe_core.safeyaml": ("MAX_DEPTH", "load_yaml", "parse_yaml", "read_capped"),
    "probe_core.executor": ("ExecutorChoice", "RegistryRef", "add_executor_arguments", "executor_choice",
                            "job_executor", "registry_of", "registry_ref", "run_jobs"),
    "probe_core.selection": ("SHOWN_ROWS", "abridged", "add_selection_arguments", "gaps", "selection", "spans"),
    "probe_core.ranks": ("launcher_rank", "process_rank"),
    "probe_core.runtag": ("MONTHS", "TAG", "tag_started", "time_tag"),
    "probe_core.cli": ("refuse_options", "run_command"),
    "probe_core.htmlflag": ("add_html_argument", "check_html", "write_html"),
    "probe_core.cause": ("ArgumentChange", "argument_changes", "csv_argument_changes"),
    "probe_core.terminal": ("print_table",),
    "probe_core.stackframe": ("Frame", "parse_stack"),
    "probe_core.surface": ("lazy_surface",),
}

#: names that left this surface with the compare pipeline and the graph: where they are now
_MOVED = {**dict.fromkeys(("LeafPair", "LoadedComparator", "load_comparators", "ERROR", "PASS", "WARNING", "RowResult",
                           "is_bad", "metric_values", "NA", "NameMap", "builtin_map", "StreamingXlsx",
                           "read_first_sheet", "ColumnarCompare", "Plain", "compare_entry", "EntryFacts", "Finding",
                           "NoiseReference", "entry_facts", "largest", "plain_facts", "roundoff", "StepFacts",
                           "judge_job", "noise_references", "reference_pair"), "probe_compare.api"),
          **dict.fromkeys(("API_GROUP_PREFIX", "ROOT_NAME", "Graph", "Node", "NodeKind", "TensorTable", "INPUT_KEYS",
                           "build_graph", "group_top_level_apis", "DEFAULT_ORDER", "Layout", "merge_side"),
                          "probe_graph.api")}

__getattr__, __dir__, __all__, WHERE = lazy_surface(__name__, _EXPORTS, _MOVED)

"""The public plugin API of probe: the one module a plugin imports (and :mod:`probe_core.testing` in its tests).

Everything named here is stable: plugins of this repository and third parties use these names, and
whatever else lives in ``probe_core`` is private and may move. Names are imported on first use, so
``from probe_core.api import DataModeSpec`` imports no framework and none of the collection engine.

The families (see docs/plugins.md):

- registration: :data:`hookimpl`, the spec dataclasses the hooks return (``CollectorSpec``,
  ``DataModeSpec``, ``ComparatorSpec``, ``CheckerSpec``, ``GraphMergerSpec``, ``CommandSpec``,
  ``ConfigSectionSpec``/``ConfigKey``, ``MonitorWriterSpec``, ``AccStandardSpec``, ``AccBackendSpec``,
  ``RunTaskSpec``) and what hooks are handed (``CheckContext``, ``RunRequest``, ``Registry``);
- errors and warnings: ``ProbeError`` and its kinds, ``ProbeWarning``;
- data modes and collectors: ``DataMode``, ``TensorOps``, ``CollectorBase``, ``PrecisionDebuggerBase``,
  the in-place and operator rules, seeding, the fused statistics kernel, run locks;
- compare: ``LeafPair``, ``RowResult``, the verdicts ``PASS``/``WARNING``/``ERROR``, metric helpers;
- dumps: ``discover``, ``RankDump``, ``DumpEntry``, ``TensorMeta``, JSON reading and writing;
- graphs: ``Graph``, ``Node``, ``NodeKind`` and the entry-name helpers graph mergers use;
- outputs and inputs: output folders (:mod:`probe_core.outputs`), bounded YAML, executors, id selections.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS: dict[str, tuple[str, ...]] = {
    "probe_core": ("hookimpl",),
    "probe_core.specs": (
        "AccBackendSpec", "AccStandardSpec", "CheckContext", "CheckRow", "CheckerSpec", "CollectorSpec", "CommandSpec",
        "ComparatorSpec", "ConfigKey", "ConfigSectionSpec", "DataModeSpec", "GraphMergerSpec", "Json", "LoadableSpec",
        "MonitorStatSpec", "MonitorWriterSpec", "RunRequest", "RunTaskSpec"),
    "probe_core.errors": ("CheckError", "CollectionError", "CompareError", "ConfigError", "DumpError", "GraphError",
                          "PluginError", "ProbeError"),
    "probe_core.plugins": ("ProbeWarning", "Registry", "current_registry"),
    "probe_core.config": ("load_config", "plugin_selection", "read_config", "validate_config"),
    "probe_core.modes": ("DataMode",),
    "probe_core.collect.tensors": ("TensorOps",),
    "probe_core.collect.driver": ("CollectorBase",),
    "probe_core.collect.debugger": ("PrecisionDebuggerBase",),
    "probe_core.collect.calls": ("GradSlots", "OPERATOR_DUNDERS", "is_inplace", "writes_in_place"),
    "probe_core.collect.seeding": ("seed_python",),
    "probe_core.collect.fused": ("KINDS", "host_stats"),
    "probe_core.collect.journal": ("safe_dir",),
    "probe_core.collect.runlock": ("MARKER_NAME", "RunLock", "check_free", "job_key"),
    "probe_core.compare.comparator": ("LeafPair",),
    "probe_core.compare.rules": ("ERROR", "PASS", "WARNING", "RowResult", "is_bad", "metric_values"),
    "probe_core.compare.metrics": ("as_float", "cosine", "relative_error"),
    "probe_core.compare.output": ("NA",),
    "probe_core.compare.mapping": ("builtin_map",),
    "probe_core.dump": ("DumpEntry", "RankDump", "TensorMeta", "discover"),
    "probe_core.dump.jsonstream": ("loads",),
    "probe_core.fastjson": ("float_texts",),
    "probe_core.graph.model": ("API_GROUP_PREFIX", "ROOT_NAME", "Graph", "Node", "NodeKind"),
    "probe_core.graph.names": ("BACKWARD", "FORWARD", "counterpart", "direction", "is_module", "is_params_grad",
                               "split_module"),
    "probe_core.graph.build": ("group_top_level_apis",),
    "probe_core.outputs": ("OutputError", "create_exclusive", "prepare_output_dir", "replaced_whole", "unique_path",
                           "writing"),
    "probe_core.safeyaml": ("MAX_DEPTH", "load_yaml", "parse_yaml", "read_capped"),
    "probe_core.executor": ("ExecutorChoice", "add_executor_arguments", "executor_choice", "job_executor"),
    "probe_core.selection": ("spans",),
    "probe_core.ranks": ("launcher_rank", "process_rank"),
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

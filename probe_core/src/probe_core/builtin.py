"""The plugin that ships inside probe-core: msprobe's config.json sections and ``probe plugins``.

It is registered like any other plugin (under the name ``core``), so the
core's own keys and commands go through the same hooks third parties use.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from probe_core import hookimpl
from probe_core.config import (
    DATA_MODES,
    LEGACY_TASKS,
    LEVELS,
    NPU_TASKS,
    SUMMARY_MODE_DEFAULT,
    TOP,
    check_dump_path,
    check_ids,
    check_load,
    check_names,
    check_overflow_nums,
    check_scope,
    check_slice,
    check_summary_mode,
    load_config,
)
from probe_core.specs import SPEC_FAMILIES, CommandSpec, ConfigKey, ConfigSectionSpec


def _filters() -> tuple[ConfigKey, ...]:
    """The keys every dump task's section takes (msprobe's BaseConfig)."""
    return (
        ConfigKey("scope", list, [], check=check_scope, doc="first and last API/module of a range to dump"),
        ConfigKey("list", list, [], check=check_names, doc="dump only APIs/modules whose names contain one of these"),
        ConfigKey("data_mode", list, ["all"], choices=DATA_MODES, doc="which sides of each call to dump"),
        ConfigKey("slice", list, [], check=check_slice,
                  doc='cut each tensor before its statistics and file: [{"dim": 0, "begin": 0, "end": 4}]'),
        ConfigKey("request_id", (str, type(None)), None,
                  doc="inference: with start(scheduled_tokens=...), dump only this request's tokens (dim 0)"),
        ConfigKey("summary_mode", (str, list), SUMMARY_MODE_DEFAULT, check=check_summary_mode,
                  doc="statistics, md5 (or another data mode), or a list of statistics to write"),
    )


def _stat_keys() -> tuple[ConfigKey, ...]:
    return (
        ConfigKey("tensor_list", list, [], check=check_names,
                  doc="also save whole tensors of the entries whose names contain one of these"),
    )


#: msprobe's API risk levels: CORE (compute-heavy APIs only) ⊂ FOCUS (leaves out view/shape/creation ops) ⊂ ALL
RISK_LEVELS = ("CORE", "FOCUS", "ALL")
#: Why msprobe keys that probe accepts have no effect (``ConfigKey.ignored``).
_SEED = ("seed the script with seed_all(seed, mode=is_deterministic) from probe_torch or probe_mindspore "
         "(msprobe 26.2 does not read this key either)")
_ONLINE_RUN_UT = ("msprobe's online pre-check streams tensors to a benchmark host; probe pre-checks a tensor "
                  "dump offline: probe acc-check -api_info DUMP")


@hookimpl
def probe_config_sections() -> list[ConfigSectionSpec]:
    legacy = {
        "run_ut": "online API pre-check (msprobe 8.x)",
        "grad_probe": "gradient monitoring (msprobe 8.x)",
        "free_benchmark": "perturbation benchmark (msprobe 8.x)",
    }
    return [
        ConfigSectionSpec(TOP, (
            ConfigKey("task", str, "statistics", doc="a task of an installed data mode (statistics, tensor, "
                                                     "overflow_check, structure, ...); msprobe's "
                                                     + ", ".join((*NPU_TASKS, *LEGACY_TASKS)) + " load with a warning"),
            ConfigKey("dump_path", str, "./probe_dump", check=check_dump_path),
            ConfigKey("overwrite", bool, False, doc="replace a run already in dump_path (else it is refused)"),
            ConfigKey("rank", list, [], check=check_ids, doc="ranks to dump; [] for all"),
            ConfigKey("step", list, [], check=check_ids, doc="steps to dump; [] for all"),
            ConfigKey("exit_after_last_step", bool, False,
                      doc="probe run: end the script (exit code 0) right after the last step of the step filter"),
            ConfigKey("level", str, "mix", choices=LEVELS),
            ConfigKey("async_dump", bool, False),
            ConfigKey("extra_info", bool, True),
            ConfigKey("enable_dataloader", bool, False, doc="deprecated in msprobe; ignored"),
            ConfigKey("precision", str, "high", choices=("high", "low")),
            ConfigKey("is_deterministic", bool, False, ignored=_SEED),
            ConfigKey("seed", int, 1234, ignored=_SEED),
            ConfigKey("framework", str, None, doc="the framework of an installed collector (pytorch, mindspore, ...)"),
            ConfigKey("acl_config", str, "", ignored="ACL dumps run on an Ascend NPU"),
            ConfigKey("dump_enable", (bool, type(None)), None,
                      doc="hot switch: dumping on/off, re-read from the file at each step boundary"),
            ConfigKey("custom_op_namespaces", list, [], check=check_names,
                      doc="torch.ops namespaces whose custom operators are recorded as APIs"),
            ConfigKey("load", dict, None, check=check_load,
                      doc="replace module inputs by the tensors of an earlier tensor dump"),
            ConfigKey("risk_level", str, "FOCUS", choices=RISK_LEVELS,
                      doc="which APIs to record: FOCUS (msprobe's default) leaves out view/shape ops; "
                          "ALL records every API"),
            ConfigKey("api_backward", str, "grad_fn", choices=("grad_fn", "inputs"),
                      doc="an API's backward entry: grad_fn (msprobe's layout: the gradients its first output's "
                          "grad_fn computes) or inputs (probe's: the gradient w.r.t. each input, in argument order)"),
        ), description="common keys"),
        ConfigSectionSpec("statistics", _filters() + _stat_keys() + (
            ConfigKey("device", str, "device", choices=("device", "host")),
            ConfigKey("precision", str, "high", choices=("high", "low")),
        ), description="task statistics"),
        ConfigSectionSpec("tensor", _filters() + (
            ConfigKey("file_format", str, "npy", choices=("npy", "bin"),
                      ignored="tensor files are the framework's own (.pt for PyTorch, .npy for MindSpore), as "
                              "msprobe 26.2 writes them"),
            ConfigKey("backward_input", list, [], ignored="msprobe 1.x's backward input files of its online "
                                                          "pre-check, which msprobe 26.2 no longer reads either"),
            *(ConfigKey(name, kind, default, ignored=_ONLINE_RUN_UT) for name, kind, default in (
                ("online_run_ut", bool, False), ("online_run_ut_recompute", bool, False), ("nfs_path", str, ""),
                ("host", str, ""), ("port", int, -1), ("tls_path", str, ""))),
            ConfigKey("bench_path", str, ""),
        ), description="task tensor"),
        ConfigSectionSpec("overflow_check", (
            ConfigKey("overflow_nums", int, 1, check=check_overflow_nums),
            ConfigKey("check_mode", str, "all", choices=("all", "aicore", "atomic"),
                      ignored="aicore and atomic are overflow modes of an Ascend NPU; probe checks every output "
                              'for NaN/Inf ("all")'),
        ), description="task overflow_check"),
        ConfigSectionSpec("structure", _filters(), description="task structure"),
        ConfigSectionSpec("nan_check", _filters() + _stat_keys(),
                          description="task nan_check (Ascend NPU; probe collects overflow_check)"),
        ConfigSectionSpec("acc_check", (
            ConfigKey("white_list", list, [], check=check_names),
            ConfigKey("black_list", list, [], check=check_names),
            ConfigKey("error_data_path", str, "./"),
        ), description="task acc_check (msprobe's online pre-check; probe: probe acc-check on a dump)"),
        ConfigSectionSpec("exception_dump", _filters(),
                          description="task exception_dump (MindSpore on an Ascend NPU; nothing is dumped here)"),
        ConfigSectionSpec("diff_check", _filters() + (
            ConfigKey("diff_nums", int, 1, check=check_overflow_nums),
        ), description="task diff_check (Ascend NPU; probe collects statistics)"),
    ] + [ConfigSectionSpec(name, (), description=text, runs=False) for name, text in legacy.items()]


# -- probe plugins ----------------------------------------------------------------


def _configure_plugins(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    # -c/--config: the CLI gives it to every command


def plugins_report(registry: Any) -> list[dict[str, Any]]:
    """One dict per plugin: name, distribution, version, status, hooks, error, and what it provides."""
    provides: dict[str, dict[str, list[str]]] = {}
    for family in SPEC_FAMILIES:
        for spec in registry.family(family).values():
            if family == "config_sections":
                continue
            provides.setdefault(spec.plugin, {}).setdefault(family, []).append(spec.name)
    return [info.as_json() | {"provides": provides.get(info.name, {})} for info in registry.plugins]


def _run_plugins(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from probe_core.terminal import print_table

    if args.config:  # the whole file must be valid, not only its "plugins" section
        load_config(args.config, registry=args.registry)
    report = plugins_report(args.registry)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    colours = {"enabled": "green", "disabled": "yellow", "failed": "red", "not loaded": "dim"}
    rows = []
    for row in report:
        hooks = ", ".join(hook.removeprefix("probe_") for hook in row["hooks"])
        provides = "; ".join(f"{family}: {', '.join(names)}" for family, names in row["provides"].items())
        if row["error"]:
            provides = row["error"]
        rows.append([row["name"], row["distribution"], row["version"], Text(row["status"], colours[row["status"]]),
                     hooks, provides])
    print_table(Console(), "probe plugins", ("name", "distribution", "version", "status", "hooks", "provides"), rows)
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("plugins", "list installed plugins, their hooks and status",
                        _configure_plugins, _run_plugins)]

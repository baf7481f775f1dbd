"""``probe run [-c config.json] [--task T] [--level L] [--dump-path P] SCRIPT [ARGS...]``.

Runs an unmodified training script under collection: the framework's
collector installs global hooks before the script starts, every model it
calls is named from its own submodules, a step ends at each optimizer step
(and at exit), and a summary of what was written prints at the end — also
when the script calls ``sys.exit`` or raises. The config, the dump path and
the script are all checked before anything is written. A ``--task`` that
names a plugin's run task (``probe_run_tasks``, e.g. ``monitor``) hands the
script to that task instead: core knows nothing of what it does.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import runpy
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probe_core import hookimpl
from probe_core.config import SUMMARY_MODE_DEFAULT
from probe_core.errors import CollectionError, ProbeError
from probe_core.outputs import human_size
from probe_core.selection import spans
from probe_core.specs import CommandSpec, RunRequest

if TYPE_CHECKING:
    from probe_core.collect.session import Summary


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", "--config-path", dest="config", metavar="CONFIG",
                        help="config.json (default: task statistics, level mix, dump_path ./probe_dump)")
    parser.add_argument("--task", help="statistics, tensor or overflow_check (overrides the config), "
                        "or a plugin's run task (probe plugins lists run_tasks)")
    parser.add_argument("--level", help="L0, L1 or mix (overrides the config)")
    parser.add_argument("--dump-path", dest="dump_path", metavar="PATH", help="where step folders go")
    parser.add_argument("--overwrite", action="store_true", default=None,
                        help="replace a run already in the dump path (else probe refuses to mix two runs)")
    parser.add_argument("--framework", default=None, help="pytorch or mindspore (default: from the script's imports)")
    parser.add_argument("script", help="the training script to run, unmodified")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")


#: The exit code of a script that Ctrl-C (SIGINT) ended: 128 + SIGINT, as a shell reports it.
INTERRUPTED = 130


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_script(script: Path, argv: list[str]) -> int:
    """Run ``script`` as ``__main__`` with ``argv``; returns its exit code (1 with a traceback when it raised,
    :data:`INTERRUPTED` when Ctrl-C ended it)."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script)] + argv
    sys.path.insert(0, str(script.resolve().parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except KeyboardInterrupt:  # Ctrl-C (SIGINT) reached the top: the shell's code for it
        print("probe: the script was interrupted (KeyboardInterrupt, SIGINT)", file=sys.stderr)
        return INTERRUPTED
    except ProbeError:  # collection stopped (a full disk): one line, exit 2
        raise
    except BaseException:
        kind, value, tb = sys.exc_info()
        while tb is not None and (tb.tb_frame.f_code.co_filename == __file__
                                  or os.path.basename(tb.tb_frame.f_code.co_filename) == "runpy.py"):
            tb = tb.tb_next
        traceback.print_exception(kind, value, tb)
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def framework_modules(registry: Any) -> dict[str, str]:
    """Top-level module -> framework, as the installed collectors declare (``CollectorSpec.modules``)."""
    return {module: spec.framework for spec in registry.collectors.values() for module in spec.modules}


def imported_frameworks(source: str, modules: Mapping[str, str]) -> set[str]:
    """The frameworks (by ``modules``: top-level module -> framework) a script imports anywhere
    (``import sys, mindspore as ms``, ``from mindspore import nn``, imports inside functions or ``try``);
    a line-based search stands in when the script does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {framework for module, framework in modules.items()
                if re.search(rf"^\s*(import|from)\s+[^#\n]*\b{re.escape(module)}\b", source, re.M)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        found.update(modules[n.split(".")[0]] for n in names if n.split(".")[0] in modules)
    return found


def guess_framework(script: Path, registry: Any) -> str | None:
    """The framework of the one installed collector whose modules the script imports; ``None`` when it
    imports none or several (then ``--framework``, the config's ``framework`` or the default decides)."""
    try:
        source = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = imported_frameworks(source, framework_modules(registry))
    return found.pop() if len(found) == 1 else None


def print_summary(summary: Summary, code: int, config: Any) -> None:
    """The end-of-run report: steps, ranks, entries, bytes, dump path."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="probe run — collection summary", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    mode = config.summary_mode  # md5 is task statistics with summary_mode md5, as msprobe spells it
    task = config.task if mode == SUMMARY_MODE_DEFAULT else f"{config.task} (summary_mode {mode})"
    table.add_row("task / level", Text(f"{task} / {config.level}"))
    table.add_row("steps written", spans(summary.steps) or "none")
    table.add_row("ranks", spans(summary.ranks) or "none")
    table.add_row("entries", str(summary.entries))
    table.add_row("bytes written", human_size(summary.bytes))
    table.add_row("dump path", Text(os.path.abspath(summary.dump_path)))  # a path's brackets are no markup
    table.add_row("script exit code", f"{code} (interrupted: Ctrl-C, SIGINT)" if code == INTERRUPTED else str(code))
    Console(stderr=False).print(table)


def nothing_recorded_reasons(collector: Any, code: int) -> list[str]:
    """Why a run recorded no entry, best guess first (printed loudly: an empty dump is never silent)."""
    config = collector.session.config
    framework = collector.framework
    reasons = []
    if code != 0:
        reasons.append(f"the script exited with code {code}, maybe before its first forward")
    ran = sorted({other for module, other in framework_modules(collector.session.registry).items()
                  if other != framework and module in sys.modules})
    if ran and not collector.forward_seen:
        reasons.append(f"the script ran {' and '.join(ran)} but probe watched {framework}: pass --framework {ran[0]}")
    elif not collector.forward_seen:
        reasons.append(f"no {framework} model forward was seen (recording starts at the model's first forward)")
    reasons += collector.unrecorded()
    if config.step:
        reasons.append(f"the step filter {config.step} selected no step that ran")  # IdSet: ranges, never expanded
    if config.rank:
        reasons.append(f"the rank filter {config.rank} selected no rank that ran")
    if config.list or config.scope:
        reasons.append("the list/scope filters matched no call")
    return reasons or ["no recorded call ran"]


def print_warnings(collector: Any, summary: Summary, code: int) -> None:
    """Loud lines on stderr for what the run could not record."""
    for line in collector.unrecorded():
        print(f"probe: WARNING: {line}", file=sys.stderr)
    if summary.entries == 0:
        print("probe: WARNING: this run recorded NO entries, the dump is empty: "
              + "; ".join(nothing_recorded_reasons(collector, code)), file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    script = Path(args.script)
    if not script.is_file():
        raise CollectionError(f"{script}: no such script; pass the path of the training script "
                              "(probe run [-c config.json] SCRIPT [ARGS...])")
    registry = args.registry
    detected = guess_framework(script, registry)
    if args.task and args.task in registry.family("run_tasks"):
        framework = args.framework or detected or registry.default_framework()
        return _run_task(registry.family("run_tasks")[args.task], args, script, framework)
    overrides = {"task": args.task, "level": args.level, "dump_path": args.dump_path, "overwrite": args.overwrite}
    from probe_core.collect.debugger import start_script_collector  # the engine, only when a script runs

    collector = start_script_collector(args.framework, args.config, detected=detected, **overrides)
    code = 1
    try:
        code = run_script(script, list(args.script_args))
    finally:
        summary = collector.close()
        print_summary(summary, code, collector.session.config)
        print_warnings(collector, summary, code)
    return code


def _run_task(spec: Any, args: argparse.Namespace, script: Path, framework: str) -> int:
    """``probe run --task NAME`` for a plugin's run task: attach it, run the script, close it."""
    request = RunRequest(str(script), args.config, args.dump_path, framework, args.registry,
                         overwrite=bool(args.overwrite))
    handle = spec.load()(request)
    code = 1
    try:
        code = run_script(script, list(args.script_args))
    finally:
        handle.close(code)
    return code


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("run", "run an unmodified training script under collection (dump per step)",
                        _configure, _run)]

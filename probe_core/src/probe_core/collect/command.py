"""``probe run [-c config.json] [--task T] [--level L] [--dump-path P] SCRIPT [ARGS...]``.

Runs an unmodified training script under collection: the framework's
collector installs global hooks before the script starts, every model it
calls is named from its own submodules, a step ends at each optimizer step
(and at exit), and a summary of what was written prints at the end — also
when the script calls ``sys.exit`` or raises. The config, the dump path and
the script are all checked before anything is written.
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

from probe_core import hookimpl
from probe_core.collect.debugger import build_collector
from probe_core.collect.session import Summary
from probe_core.errors import CollectionError
from probe_core.specs import CommandSpec


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", "--config-path", dest="config", metavar="CONFIG",
                        help="config.json (default: task statistics, level mix, dump_path ./probe_dump)")
    parser.add_argument("--task", help="statistics, tensor or overflow_check (overrides the config)")
    parser.add_argument("--level", help="L0, L1 or mix (overrides the config)")
    parser.add_argument("--dump-path", dest="dump_path", metavar="PATH", help="where step folders go")
    parser.add_argument("--framework", default=None, help="pytorch or mindspore (default: from the script's imports)")
    parser.add_argument("script", help="the training script to run, unmodified")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="the script's arguments")


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_script(script: Path, argv: list[str]) -> int:
    """Run ``script`` as ``__main__`` with ``argv``; returns its exit code (1 with a traceback when it raised)."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script)] + argv
    sys.path.insert(0, str(script.resolve().parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except KeyboardInterrupt:
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


_IMPORTS = {"mindspore": re.compile(r"^\s*(import|from)\s+mindspore\b", re.M),
            "pytorch": re.compile(r"^\s*(import|from)\s+torch\b", re.M)}


def guess_framework(script: Path) -> str | None:
    """``mindspore`` for a script that imports mindspore and not torch; else ``None`` (the config's
    ``framework``, default pytorch). ``--framework`` wins over both."""
    try:
        source = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if _IMPORTS["mindspore"].search(source) and not _IMPORTS["pytorch"].search(source):
        return "mindspore"
    return None


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _ranges(values: set[int]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    parts, start, prev = [], ordered[0], ordered[0]
    for value in ordered[1:] + [None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ", ".join(parts)


def print_summary(summary: Summary, code: int, config: Any) -> None:
    """The end-of-run report: steps, ranks, entries, bytes, dump path."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="probe run — collection summary", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("task / level", f"{config.task} / {config.level}")
    table.add_row("steps written", _ranges(summary.steps))
    table.add_row("ranks", _ranges(summary.ranks))
    table.add_row("entries", str(summary.entries))
    table.add_row("bytes written", _human(summary.bytes))
    table.add_row("dump path", os.path.abspath(summary.dump_path))
    table.add_row("script exit code", str(code))
    Console(stderr=False).print(table)


def _run(args: argparse.Namespace) -> int:
    script = Path(args.script)
    if not script.is_file():
        raise CollectionError(f"{script}: no such script; pass the path of the training script "
                              "(probe run [-c config.json] SCRIPT [ARGS...])")
    overrides = {"task": args.task, "level": args.level, "dump_path": args.dump_path}
    framework = args.framework or guess_framework(script)
    collector = build_collector(framework, args.config, auto_step=True, **overrides)
    collector.start(None, from_first_forward=True)
    code = 1
    try:
        code = run_script(script, list(args.script_args))
    finally:
        summary = collector.close()
        print_summary(summary, code, collector.session.config)
    return code


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("run", "run an unmodified training script under collection (dump per step)",
                        _configure, _run)]

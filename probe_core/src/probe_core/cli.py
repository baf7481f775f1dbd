"""The ``probe`` command: a thin argparse shell whose subcommands come from plugins.

Plugins are loaded before the parser is built (their commands are part of
it), so the config file that may disable plugins is found by a pre-scan of
the arguments: the first ``-c``/``--config`` before ``--`` or the script of
``probe run``. Every :class:`~probe_core.errors.ProbeError` becomes red lines
on stderr and exit code 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from probe_core import __version__
from probe_core.errors import ProbeError
from probe_core.plugins import ProbeWarning

CONFIG_FLAGS = ("-c", "--config", "--config-path")


def _prescan(argv: Sequence[str]) -> tuple[str | None, bool]:
    """(config path, debug) from the arguments that belong to probe itself."""
    config, debug = None, False
    for i, token in enumerate(argv):
        if token == "--" or token.endswith(".py"):
            break
        if token == "--debug":
            debug = True
        elif config is None and token in CONFIG_FLAGS and i + 1 < len(argv):
            config = argv[i + 1]
        elif config is None and token.startswith(("--config=", "--config-path=")):
            config = token.split("=", 1)[1]
    return config, debug


def build_parser(registry) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="probe",
        description="Find where two training runs' numbers first diverge: collect, check, compare, see.",
        epilog="Run 'probe COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"probe {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for spec in registry.commands.values():
        command = sub.add_parser(spec.name, help=spec.help, description=spec.help)
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show full tracebacks on errors")
        spec.configure(command)
        command.set_defaults(_run=spec.run)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, ProbeWarning):
        _stderr().print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code."""
    from probe_core.config import plugin_selection, read_config
    from probe_core.plugins import load_registry

    argv = list(sys.argv[1:] if argv is None else argv)
    config, debug = _prescan(argv)
    previous = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        selection = plugin_selection(read_config(config), config) if config else None
        registry = load_registry(selection)
        parser = build_parser(registry)
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return 0
        args.registry = registry
        return int(args._run(args) or 0)
    except ProbeError as exc:
        if debug:
            raise
        console = _stderr()
        for message in exc.messages:
            console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        _stderr().print("[red]interrupted[/]")
        return 130
    finally:
        warnings.showwarning = previous


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())

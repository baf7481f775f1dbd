"""The ``probe`` command: a thin argparse shell whose subcommands come from plugins.

Plugins are loaded before the parser is built (their commands are part of
it), so the config file that may disable plugins is found by a pre-scan of
the arguments: the first ``-c``/``--config`` anywhere before ``--`` or the
script of ``probe run`` (the script's own arguments are never read). Every
command takes ``-c``. Every :class:`~probe_core.errors.ProbeError` becomes
red lines on stderr and exit code 2; ``--debug`` shows the traceback
instead; ``--trace-plugins`` (or ``PROBE_DEBUG=1``) traces every hook call.
"""

from __future__ import annotations

import argparse
import gc
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import probe_core
from probe_core.errors import PluginError, ProbeError

if TYPE_CHECKING:  # (the plugin machinery is imported once a command needs it: not for --version)
    from probe_core.specs import CommandSpec

CONFIG_FLAGS = ("-c", "--config", "--config-path", "-config", "--config_path")
#: Commands where msprobe gives one of those spellings another meaning (probe's config.json stays ``-c``):
#: ``compare --config`` is the tensor post-process YAML, ``merge-result --config-path`` the merge YAML.
OWN_CONFIG_FLAGS = {"compare": ("--config",), "merge-result": ("--config-path", "-config"),
                    "merge_result": ("--config-path", "-config")}
#: The same before the command's first positional (its action): ``check -c BENCH TARGET`` is msprobe's
#: ``config_check -c``, ``check collect -c FILE`` probe's config.json.
LEADING_OWN_FLAGS = {"check": ("-c", "--compare"), "config_check": ("-c", "--compare")}
CONFIG_HELP = ('config.json whose "plugins" section enables/disables plugins; '
               "other keys are validated when the command reads them")
#: Options of ``probe run`` that take no value (every other one does).
_FLAGS = ("-h", "--help", "--debug", "--trace-plugins", "--overwrite")


def _prescan(argv: Sequence[str]) -> tuple[str | None, bool, bool]:
    """(config path, debug, trace) from the arguments that belong to probe itself.

    Scans every token up to ``--``; for ``probe run`` it stops at the script
    (the first positional after ``run``, or any ``*.py``): what follows is
    the script's own, ``-c`` included.
    """
    config, debug, trace = None, False, False
    command, action = None, None
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--" or (command == "run" and token.endswith(".py")):
            break
        own = OWN_CONFIG_FLAGS.get(command or "", ()) + (() if action else LEADING_OWN_FLAGS.get(command or "", ()))
        if token in own or token.startswith(tuple(f"{flag}=" for flag in own)):
            i += 1 if "=" in token else 2  # the command's own option and its value
            continue
        if token == "--debug":
            debug = True
        elif token == "--trace-plugins":
            trace = True
        elif token in CONFIG_FLAGS:
            if config is None and i + 1 < len(argv):
                config = argv[i + 1]
            i += 1
        elif token.startswith(("--config=", "--config-path=")):
            config = config or token.split("=", 1)[1]
        # (no attached "-cFILE" form: msprobe's single-dash options such as acc-check's -csv_path start with -c)
        elif not token.startswith("-"):
            if command == "run":
                break  # the script
            action = action or (command and token)
            command = command or token
        elif command == "run" and "=" not in token and token not in _FLAGS:
            i += 1  # the value of a `probe run` option (--task T, --level L, ...)
        i += 1
    return config, debug, trace


#: Commands that come with a distribution other than probe-core: named when the command is missing.
COMMAND_DISTRIBUTIONS = {"compare": "probe-compare", "check": "probe-config-check", "monitor": "probe-monitor",
                         "acc-check": "probe-acc-check", "overflow-check": "probe-overflow-check",
                         "merge-result": "probe-merge-result", "recover": "probe-recover", "data2db": "probe-data2db",
                         "graph": "probe-graph", "report": "probe-report"}
#: msprobe's names of those commands that are not probe's with "-" for "_" (``merge_result``): what a missing
#: distribution is named by. The commands themselves declare their aliases (``CommandSpec.aliases``); a test
#: keeps this table in step with them.
MSPROBE_NAMES = {"graph_visualize": "graph", "config_check": "check", "api_precision_compare": "acc-check",
                 "multi_acc_check": "acc-check"}
#: msprobe commands probe has no counterpart of yet: what to use instead.
NOT_YET: dict[str, str] = {}


def _command_of(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (its first token that is no option or option value of ``probe``)."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in CONFIG_FLAGS:
            i += 2
            continue
        if not token.startswith("-"):
            return token
        i += 1
    return None


def _leads(argv: Sequence[str], typed: str | None) -> bool:
    """True when argparse reads ``typed`` as the command: only probe's own flags come before it (not ``-h`` or
    ``--version``, which answer with every command, nor an option whose value argparse would read as the command,
    which names them all in its error)."""
    if typed is None or typed not in argv:
        return False
    return all(token in ("--debug", "--trace-plugins") for token in argv[:argv.index(typed)])


def command_names(registry) -> dict[str, CommandSpec]:
    """Every command's name and aliases -> its spec; a name two commands claim is an error naming both."""
    names: dict[str, CommandSpec] = {}
    for spec in registry.commands.values():
        for name in (spec.name, *spec.aliases):
            other = names.setdefault(name, spec)
            if other is not spec:
                raise PluginError(f"command name {name!r} is claimed by plugin {other.plugin!r} (command "
                                  f"{other.name!r}) and by plugin {spec.plugin!r} (command {spec.name!r}); "
                                  'disable one in config.json "plugins"')
    return names


def run_command(argv: Sequence[str], registry) -> int:
    """``probe ARGV...`` in this process with ``registry``'s commands, parsed as the CLI parses them; returns the
    command's exit code. A command no enabled plugin gives is a :class:`PluginError` naming it; the command's own
    :class:`ProbeError` propagates (the caller says it in its words)."""
    argv = [str(arg) for arg in argv]
    if not argv or argv[0] not in command_names(registry):
        raise PluginError(f"no enabled plugin gives the command 'probe {argv[0] if argv else ''}': install and "
                          "enable the plugin that brings it (probe plugins lists what is installed)")
    args = build_parser(registry, argv[0], alone=True).parse_args(argv)
    args.registry = registry
    return int(args._run(args) or 0)


def check_command_installed(argv: Sequence[str], registry) -> None:
    """A command of another distribution that is not there: say which distribution brings it; one of msprobe's
    that probe does not have yet: say what to use instead."""
    from probe_core.installed import version

    typed = _command_of(argv)
    if typed is None or typed in command_names(registry):
        return
    if typed in NOT_YET:
        raise ProbeError(f"probe {typed}: {NOT_YET[typed]}")
    command = MSPROBE_NAMES.get(typed, typed.replace("_", "-"))
    dist = COMMAND_DISTRIBUTIONS.get(command)
    if dist is None:
        return
    if command != typed:
        command = f"{typed} (probe {command})"
    if version(dist) is None:
        raise ProbeError(f"probe {command}: this command comes with the distribution {dist}, which is not "
                         f"installed; pip install {dist}")
    raise ProbeError(f"probe {command}: {dist} is installed but its plugin is not enabled (disabled in config.json "
                     f'"plugins", by PROBE_DISABLE_PLUGIN_AUTOLOAD, or it failed to load): run probe plugins')


class Parser(argparse.ArgumentParser):
    """probe's parsers (a command's subcommands inherit it): an option is read only as spelled, so a flag
    probe does not define is refused, not taken for another (``-ofs False`` is not ``-o fs``, ``-config`` not
    ``-c onfig``, ``-api`` not ``-api_info``, ``--out`` not ``--output``): no abbreviations, no value glued to
    a one-letter option, no grouped one-letter flags (``-o=DIR`` and ``-o DIR`` are the spellings)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def _get_option_tuples(self, option_string: str) -> list:
        return []  # argparse's prefix and glued-value readings of an undefined option: none

    def error(self, message: str):
        if message.startswith("unrecognized arguments"):
            message += " (probe reads options only as --help spells them: no abbreviations, no -oVALUE)"
        super().error(message)


class _Refused(argparse.Action):
    def __init__(self, option_strings, dest, reason: str, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs="*", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self.reason = reason

    def __call__(self, parser, namespace, values, option_string=None):
        raise ProbeError(f"{parser.prog} {option_string}: {self.reason}")


def refuse_options(parser: argparse.ArgumentParser, flags: Sequence[str], reason: str) -> None:
    """msprobe's options of a mode this command does not have: each refused with ``reason`` (what the option
    belongs to, what to do instead) with whatever values follow it; hidden from ``--help``."""
    parser.add_argument(*flags, action=_Refused, reason=reason)


def build_parser(registry, typed: str | None = "", alone: bool = False) -> argparse.ArgumentParser:
    """probe's parser with every command of ``registry``. ``typed``: the command word the user typed (or None:
    none): only that command's options are defined (a command's ``configure`` may import its whole plugin; the
    other commands are listed with their help only). The default defines every command's options. ``alone``:
    the parser reads ``typed`` as the command (:func:`_leads`), so the other commands are left out (argparse
    makes a parser for each: some milliseconds of every command)."""
    names = command_names(registry)  # a name claimed twice: one clear error
    chosen = names.get(typed) if typed else None
    parser = Parser(
        prog="probe",
        description="Find where two training runs' numbers first diverge: collect, check, compare, see.",
        epilog="Run 'probe COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"probe {probe_core.__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    parser.add_argument("--trace-plugins", action="store_true",
                        help="trace every plugin hook call and its result on stderr (or set PROBE_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for spec in registry.commands.values():
        if alone and chosen is not None and spec is not chosen:
            continue
        command = sub.add_parser(spec.name, aliases=list(spec.aliases), help=spec.help, description=spec.help)
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show full tracebacks on errors")
        command.add_argument("--trace-plugins", action="store_true", default=argparse.SUPPRESS,
                             help=argparse.SUPPRESS)
        if typed == "" or spec is chosen:
            spec.configure(command)
            _add_config_option(command)
        command.set_defaults(_run=spec.run)
    return parser


def _add_config_option(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` ``-c/--config`` unless the command defined it; a command with subcommands
    (``probe check collect``) gets it on each subcommand, where argparse reads it."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if actions:
        for child in {id(p): p for a in actions for p in a.choices.values()}.values():
            _add_config_option(child)
    else:
        free = [flag for flag in ("-c", "--config") if flag not in parser._option_string_actions]
        if free == ["-c", "--config"]:
            parser.add_argument("-c", "--config", metavar="CONFIG", help=CONFIG_HELP)
        elif free == ["-c"]:  # a command that took --config for itself (compare) keeps -c for probe's config.json
            parser.add_argument("-c", dest="probe_config", metavar="CONFIG", help=CONFIG_HELP)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    from probe_core.plugins import ProbeWarning

    if issubclass(category, ProbeWarning):
        _stderr().print(f"[yellow]warning:[/] {_literal(message)}", highlight=False, soft_wrap=True)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def _literal(text: object) -> str:
    """``text`` as rich prints it literally: a path or a pip extra in brackets (``probe-core[dask]``, ``[/x]``)
    is no markup tag."""
    from rich.markup import escape

    return escape(str(text))


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def main(argv: Sequence[str] | None = None, *, process_ends: bool = False) -> int:
    """Run the CLI; return the exit code. ``process_ends``: the process ends right after the command (the console
    script), which the command reads as ``args.process_ends``: what it built may be left to the exit, not freed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # what the parser would print, without loading the plugins that build it
        print(f"probe {probe_core.__version__}")
        return 0
    from probe_core.config import plugin_selection, read_config
    from probe_core.plugins import current_registry

    config, debug, trace = _prescan(argv)
    previous = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        selection = plugin_selection(read_config(config), config) if config else None
        registry = current_registry(selection)
        if trace:
            registry.enable_tracing()
        check_command_installed(argv, registry)
        typed = _command_of(argv)
        parser = build_parser(registry, typed, alone=_leads(argv, typed))
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return 0
        args.registry, args.process_ends = registry, process_ends
        return int(args._run(args) or 0)
    except ProbeError as exc:
        if debug:
            raise
        console = _stderr()
        for message in exc.messages:
            console.print(f"[bold red]error:[/] {_literal(message)}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        _stderr().print("[red]interrupted[/]")
        return 130
    finally:
        warnings.showwarning = previous


def run() -> None:
    """Console-script entry point."""
    code = main(process_ends=True)
    if _command_of(sys.argv[1:]) != "run":
        # The command's objects die with the process: spare the garbage collector's last pass over them at exit
        # (0.1 s after a 20k-node graph). Not after `probe run`, whose script's objects may need their finalizers.
        gc.freeze()
    sys.exit(code)

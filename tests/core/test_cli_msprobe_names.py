"""msprobe's command names and flags on probe's CLI: aliases declared by the plugins that own the commands,
listed once in ``probe --help``; no parser reads an option it does not define (no abbreviations, no value
glued to a one-letter option); flags of msprobe modes probe lacks refused with a sentence saying so."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from probe_core import cli
from probe_core.api import CommandSpec, PluginError, ProbeError, hookimpl
from probe_core.plugins import current_registry
from probe_core.testing import registry_with

from tests.core.conftest import run_probe

REPO = Path(__file__).resolve().parents[2]
DUMP = REPO / "tests" / "fixtures" / "msprobe_pytorch_stat_mix" / "step0" / "proc11440"
#: msprobe 26.2.0's option strings of each command (read from its parsers)
MSPROBE_FLAGS = json.loads((REPO / "tests" / "fixtures" / "msprobe_cli_flags.json").read_text())["commands"]
#: msprobe's command names and the probe commands they are
MSPROBE_COMMANDS = {"compare": "compare", "graph_visualize": "graph", "config_check": "check",
                    "merge_result": "merge-result", "api_precision_compare": "acc-check", "acc_check": "acc-check",
                    "multi_acc_check": "acc-check", "overflow_check": "overflow-check", "data2db": "data2db"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: child for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, child in action.choices.items()}


def _every_parser(parser: argparse.ArgumentParser, path: str = "probe"):
    yield path, parser
    for name, child in _subparsers(parser).items():
        yield from _every_parser(child, f"{path} {name}")


def _reading(parser: argparse.ArgumentParser, token: str) -> list:
    """The (action, ...) readings argparse gives ``token`` (a list from Python 3.12, one tuple before)."""
    found = parser._parse_optional(token)
    readings = found if isinstance(found, list) else [found] if found else []
    return [r for r in readings if r[0] is not None]


def test_every_parser_reads_only_the_options_it_defines():
    parser = cli.build_parser(current_registry())
    walked = list(_every_parser(parser))
    assert {"probe compare", "probe check ckpt", "probe monitor compare", "probe acc-check"} <= {p for p, _ in walked}
    for path, each in walked:
        assert each.allow_abbrev is False, path
        defined = each._option_string_actions
        for option in defined:
            for token in (option[:-1], option + "x"):  # an abbreviation; a value glued to it
                if len(token) > 1 and token not in defined:
                    assert _reading(each, token) == [], f"{path}: {token!r} is read as an option"
    compare = _subparsers(parser)["compare"]
    assert _reading(compare, "-ofs")[0][1] == "-ofs"  # msprobe's flag, refused by name (not "-o fs")
    assert _reading(_subparsers(parser)["acc-check"], "-config")[0][1] == "-config"  # not "-c onfig"


def test_each_msprobe_name_is_listed_once_in_help_beside_its_command():
    done = run_probe("--help")
    assert done.returncode == 0, done.stderr
    for name, command in MSPROBE_COMMANDS.items():
        if name == command:
            continue
        assert len(re.findall(rf"\b{name}\b", done.stdout)) == 1, name
        assert re.search(rf"^    {re.escape(command)} \([^)]*\b{name}\b", done.stdout, re.M), name


def test_every_msprobe_flag_is_an_option_of_the_alias():
    parser = cli.build_parser(current_registry())
    commands = _subparsers(parser)
    for name, flags in MSPROBE_FLAGS.items():
        assert commands[name] is commands[MSPROBE_COMMANDS[name]], name  # the same parser, not a copy
        assert [f for f in flags if f not in commands[name]._option_string_actions] == [], name


def test_flags_of_modes_probe_lacks_are_refused_naming_the_mode(tmp_path):
    done = run_probe("compare", str(DUMP), str(DUMP), "-ofs", "False", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "-ofs: this flag belongs to msprobe's offline_model compare" in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written to ./fs or ./compare_output
    done = run_probe("compare", "-tp", str(DUMP), "-gp", str(DUMP), "-fr", "fusion.json", "-o", "out", cwd=tmp_path)
    assert done.returncode == 2 and "-fr: this flag belongs to msprobe's offline_data compare" in done.stderr
    done = run_probe("compare", str(DUMP), str(DUMP), "--input_data", "a.bin", cwd=tmp_path)
    assert "--input_data: this flag belongs to msprobe's offline_model compare" in done.stderr
    done = run_probe("acc_check", "-api", "x.json", cwd=tmp_path)  # not msprobe's -api_info abbreviated
    assert done.returncode == 2 and "unrecognized arguments: -api (" in done.stderr
    done = run_probe("config_check", "-vc", "a.log", "b.log", cwd=tmp_path)
    assert done.returncode == 2 and "verl/slime" in done.stderr


def test_graph_visualize_runs_probe_graph_with_msprobes_flags(tmp_path):
    done = run_probe("graph_visualize", "-tp", str(DUMP), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "out").glob("build_*.vis.db"))) == 1


def test_config_check_packs_and_compares_with_msprobes_flags(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("python train.py --lr 0.001 --seed 1\n")
    done = run_probe("config_check", "-d", str(script), "-o", "pack.zip", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run_probe("config_check", "-c", "pack.zip", "pack.zip", "-o", "result", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "result" / "summary.json").is_file() and "hyperparameters" in done.stdout
    done = run_probe("check", "--compare", "pack.zip", "pack.zip", cwd=tmp_path)  # msprobe's default output
    assert done.returncode == 0 and (tmp_path / "config_check_result" / "summary.json").is_file()


def test_data2db_runs_with_msprobes_flags(tmp_path):
    done = run_probe("data2db", "--db", "out", "--data", str(DUMP.parents[1]), "--format", "dump",
                     "--micro_step", "False", "--process_num", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "dump_data.trend.db").is_file() and "dump data: 320 rows" in done.stdout


def test_an_alias_of_a_disabled_plugin_names_its_distribution(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": {"disable": ["graph"]}}))
    done = run_probe("-c", str(config), "graph_visualize", "-tp", str(DUMP), "-o", "out", cwd=tmp_path)
    assert done.returncode == 2
    assert "probe graph_visualize (probe graph): probe-graph is installed but its plugin is not enabled" \
        in done.stderr


def test_an_alias_of_a_missing_distribution_names_it(monkeypatch):
    registry = registry_with()  # probe-core alone: no probe graph, no probe check
    monkeypatch.setitem(cli.COMMAND_DISTRIBUTIONS, "graph", "probe-graph-not-installed")
    with pytest.raises(ProbeError, match=r"probe graph_visualize \(probe graph\): this command comes with the "
                                         "distribution probe-graph-not-installed, which is not installed"):
        cli.check_command_installed(["graph_visualize", "-tp", "x"], registry)


def test_the_cores_table_of_msprobe_names_agrees_with_the_plugins_aliases():
    """The core names a missing distribution from ``MSPROBE_NAMES``; the plugins declare the aliases."""
    registry = current_registry()
    aliases = {alias: spec.name for spec in registry.commands.values() for alias in spec.aliases
               if spec.name in cli.COMMAND_DISTRIBUTIONS}
    assert {"graph_visualize", "config_check", "api_precision_compare", "merge_result",
            "overflow_check"} <= set(aliases)
    assert {alias: cli.MSPROBE_NAMES.get(alias, alias.replace("_", "-")) for alias in aliases} == aliases


class _Clash:
    @hookimpl
    def probe_commands(self):
        return [CommandSpec("mine", "mine", lambda p: None, lambda a: 0, aliases=("plugins",))]


def test_an_alias_another_command_has_is_an_error_naming_both():
    with pytest.raises(PluginError, match=r"command name 'plugins' is claimed by plugin '_Clash' \(command 'mine'\) "
                                          r"and by plugin 'core' \(command 'plugins'\)"):
        cli.build_parser(registry_with(_Clash()))


def test_prescan_leaves_msprobes_own_uses_of_config_flags_alone():
    assert cli._prescan(["config_check", "-c", "a.zip", "b.zip", "-o", "out"]) == (None, False, False)
    assert cli._prescan(["check", "--compare", "a.zip", "b.zip"]) == (None, False, False)
    assert cli._prescan(["check", "collect", "-c", "cfg.json"]) == ("cfg.json", False, False)
    assert cli._prescan(["acc_check", "-api_info", "d.json", "-config", "cfg.json"]) == ("cfg.json", False, False)
    assert cli._prescan(["merge_result", "-i", "d", "-config", "m.yaml"]) == (None, False, False)

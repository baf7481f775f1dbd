"""The probe CLI shell, and the plugin docs staying in step with the hookspecs."""

from __future__ import annotations

import csv
import inspect
import json
import re
from pathlib import Path

from tests.core.conftest import fake_plugin

from probe_core import __version__, hookspecs
from probe_core.cli import _prescan

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
DUMP = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe_pytorch_stat_mix"


def test_version_and_help(run_probe):
    done = run_probe("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"probe {__version__}"
    done = run_probe("--help")
    assert done.returncode == 0
    assert "plugins" in done.stdout and "--debug" in done.stdout
    done = run_probe()
    assert done.returncode == 0 and "usage: probe" in done.stdout


def test_unknown_command_is_a_usage_error(run_probe):
    done = run_probe("frobnicate")
    assert done.returncode == 2
    assert "invalid choice: 'frobnicate'" in done.stderr


def test_plugin_command_and_config_section_from_a_third_party(plugin_site, run_probe, tmp_path):
    done = run_probe("hello", "--help", site=plugin_site)
    assert done.returncode == 0 and "--who" in done.stdout
    config = tmp_path / "config.json"
    config.write_text('{"hello": {"greeting": 3}}')
    done = run_probe("plugins", "-c", str(config), site=plugin_site)
    assert done.returncode == 2
    assert 'key "hello.greeting": expected a string, got 3 (number)' in done.stderr


def test_prescan_finds_config_anywhere_but_in_a_training_scripts_arguments():
    assert _prescan(["compare", "A", "B", "-o", "out", "-c", "cfg.json"]) == ("cfg.json", False, False)
    assert _prescan(["check", "collect", "-d", "train.py", "--config=cfg.json"]) == ("cfg.json", False, False)
    assert _prescan(["--trace-plugins", "graph", "-tp", "A", "-c", "cfg.json", "--debug"]) == ("cfg.json", True, True)
    # msprobe's single-dash options that start with -c are not a config file
    assert _prescan(["acc-check", "-api_info", "d.json", "-csv_path", "r.csv"]) == (None, False, False)
    # everything after the script of `probe run` is the script's, its own -c included
    assert _prescan(["run", "-c", "probe.json", "--task", "tensor", "train.py", "-c", "mine.json"])[0] == "probe.json"
    assert _prescan(["run", "--level", "L1", "train", "-c", "mine.json", "--debug"]) == (None, False, False)
    assert _prescan(["run", "train.py", "--", "-c", "x"]) == (None, False, False)


def test_every_command_takes_a_config(plugin_site, run_probe):
    commands = re.findall(r"^    ([\w-]+)\s", run_probe("--help", site=plugin_site).stdout, flags=re.M)
    assert {"plugins", "compare", "graph", "run", "check", "hello", "merge-result"} <= set(commands)
    for command in [[c] for c in commands if c != "check"] + [["check", "collect"], ["check", "compare"]]:
        done = run_probe(*command, "--help", site=plugin_site)
        # compare's --config is msprobe's tensor post-process YAML: probe's config.json is -c there
        expected = "-c CONFIG" if command == ["compare"] else "-c CONFIG, --config CONFIG"
        assert done.returncode == 0 and expected in done.stdout, command


def test_compare_config_is_msprobes_and_c_is_probes():
    assert _prescan(["compare", "a", "b", "--config", "post.yaml", "-c", "probe.json"]) == ("probe.json", False, False)
    assert _prescan(["compare", "a", "b", "--config=post.yaml"]) == (None, False, False)
    assert _prescan(["merge-result", "-i", "d", "-config", "m.yaml", "--config-path", "m.yaml"]) == (None, False, False)
    assert _prescan(["graph", "a", "--config", "probe.json"]) == ("probe.json", False, False)


ABSMEAN = """
    from probe_core import hookimpl
    from probe_core.specs import ComparatorSpec

    class AbsMean:
        columns = ("AbsMeanDiff",)

        def compare(self, pair):
            return {"AbsMeanDiff": abs(pair.npu.mean - pair.bench.mean) if pair.npu.is_tensor else None}

    @hookimpl
    def probe_comparators():
        return [ComparatorSpec("absmean", "statistics", "|mean difference|", AbsMean)]
"""


def test_compare_honours_the_config_plugins_section(run_probe, tmp_path):
    site = fake_plugin(tmp_path / "site", "probe-test-absmean", "absmean", "probe_test_absmean", ABSMEAN)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": {"disable": ["absmean"]}}))

    def header(out: Path) -> list[str]:
        from tests.compare.helpers import result_csv

        with result_csv(out).open(newline="") as f:
            return next(csv.reader(f))

    args = ("compare", str(DUMP), str(DUMP / "step0" / "proc11440"), "--no-xlsx", "--quiet")
    done = run_probe(*args, "-o", str(tmp_path / "with"), site=site)
    assert done.returncode == 0, done.stderr
    assert header(tmp_path / "with")[-1] == "AbsMeanDiff"
    done = run_probe(*args, "-o", str(tmp_path / "without"), "-c", str(config), site=site)  # -c after positionals
    assert done.returncode == 0, done.stderr
    assert "AbsMeanDiff" not in header(tmp_path / "without")


def test_tracing_shows_every_hook_call_on_stderr(run_probe):
    for how in ({"env": {"PROBE_DEBUG": "1"}}, {"args": ("--trace-plugins",)}):
        done = run_probe(*how.get("args", ()), "plugins", "--json", env=how.get("env"))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)  # stdout stays clean
        assert "  probe_commands [hook]" in done.stderr and "  plugin 'core' [hook]" in done.stderr
        assert "finish probe_commands --> [[CommandSpec(name='plugins'" in done.stderr
    quiet = run_probe("plugins", "--json")
    assert "[hook]" not in quiet.stderr


def test_probe_plugins_table_shows_hooks(plugin_site, run_probe):
    done = run_probe("plugins", site=plugin_site)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if "distribution" in line)
    assert re.search(r"status\s*\W\s*hooks\s*\W\s*provides", header)
    hello = next(line for line in lines if line.strip("│ ").startswith("hello"))
    assert "commands, config_sections" in hello
    git_commit = next(line for line in lines if line.strip("│ ").startswith("git_commit"))
    assert re.search(r"enabled\s*│\s*checkers\s*│\s*checkers: git_commit", git_commit)


def _hook_names() -> list[str]:
    return [name for name, obj in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("probe_")]


def test_every_hookspec_is_documented_in_code_and_in_docs():
    text = DOCS.read_text()
    headings = set(re.findall(r"^## `(probe_\w+)`", text, flags=re.M))
    for name in _hook_names():
        assert inspect.getdoc(getattr(hookspecs, name)), f"{name} has no docstring"
        assert name in headings, f"docs/plugins.md has no section for hook {name}"
    assert headings <= set(_hook_names()), f"docs/plugins.md documents unknown hooks: {headings - set(_hook_names())}"

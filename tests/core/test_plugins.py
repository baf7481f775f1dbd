"""The plugin system: entry points, lazy loading, disable/enable, failures, duplicates, order."""

from __future__ import annotations

import json
import subprocess
import sys
import types
import warnings

import pytest
from tests.core.conftest import fake_plugin, pip_install_target, write_dist

from probe_core import hookimpl
from probe_core.errors import PluginError
from probe_core.plugins import PluginSelection, ProbeWarning, load_registry
from probe_core.specs import CheckerSpec, CheckRow, CommandSpec, ComparatorSpec


def _plugin(name: str, **hooks) -> types.ModuleType:
    module = types.ModuleType(name)
    for hook_name, function in hooks.items():
        setattr(module, hook_name, hookimpl(function))
    return module


def _checker(name: str, priority: int = 0) -> CheckerSpec:
    return CheckerSpec(name, f"checker {name}", collect=lambda ctx: {}, compare=lambda a, b: [CheckRow("x", a, b, a == b)],
                       priority=priority)


def test_import_probe_core_loads_no_plugin_and_no_framework(plugin_site, tmp_path):
    marker = tmp_path / "marker"
    code = ("import sys, probe_core, probe_core.plugins, probe_core.config, probe_core.cli;"
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'mindspore', 'probe_modes', 'probe_torch', 'probe_example_checker', 'probe_test_broken',"
            " 'probe_test_hello', 'probe_config_check', 'numpy')];"
            "print(bad)")
    env = {"PYTHONPATH": str(plugin_site), "PROBE_TEST_MARKER": str(marker), "PATH": ""}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]"
    assert not marker.exists(), "an entry point was imported by 'import probe_core'"


def test_probe_plugins_lists_builtins_and_third_party(plugin_site, plugins_json):
    rows = plugins_json(site=plugin_site)
    assert rows["core"]["distribution"] == "probe-core" and rows["core"]["builtin"] is True
    assert "plugins" in rows["core"]["provides"]["commands"]
    for mode in ("statistics", "md5", "tensor", "overflow_check"):  # each data mode is its own plugin
        assert rows[mode]["distribution"] == "probe-modes" and rows[mode]["provides"]["data_modes"] == [mode]
    # one built-in plugin at least for every family of the hookspecs
    families = {family for row in rows.values() if row["status"] == "enabled" for family in row["provides"]}
    assert families == {"collectors", "data_modes", "comparators", "checkers", "graph_mergers", "commands",
                        "monitor_writers", "acc_standards", "acc_backends", "run_tasks",
                        "name_maps"}  # (config sections: hooks)
    assert rows["torch"]["provides"] == {"collectors": ["torch"]}
    assert rows["mindspore"]["provides"] == {"collectors": ["mindspore"],
                                             "name_maps": ["mindspore->pytorch", "pytorch->mindspore"]}
    assert {name for mode in ("statistics", "md5", "tensor") for name in rows[mode]["provides"]["comparators"]} \
        == {"statistics", "md5", "tensor"}
    assert rows["parallel_merge"]["provides"] == {"graph_mergers": ["tp", "vpp", "pp"]}
    assert rows["run"]["builtin"] and rows["run"]["provides"] == {"commands": ["run"]}
    moved = (("compare", "probe-compare", ["compare"]),
             ("overflow-check", "probe-overflow-check", ["overflow-check"]),  # overflow_check: its alias
             ("merge_result", "probe-merge-result", ["merge-result"]), ("recover", "probe-recover", ["recover"]),
             ("graph", "probe-graph", ["graph"]))
    for name, distribution, commands in moved:  # commands that left probe-core (issue 39)
        row = rows[name]
        assert (row["distribution"], row["builtin"], row["provides"]) == (distribution, False, {"commands": commands})
    assert rows["config_check"]["provides"]["commands"] == ["check"] and not rows["config_check"]["builtin"]
    assert (rows["data2db"]["distribution"], rows["data2db"]["provides"]) == ("probe-data2db", {"commands": ["data2db"]})
    example = rows["git_commit"]
    assert example["distribution"] == "probe-example-checker"
    assert example["version"] == "0.1.0"
    assert example["status"] == "enabled"
    assert example["hooks"] == ["probe_checkers"]
    assert example["provides"] == {"checkers": ["git_commit"]}
    hello = rows["hello"]
    assert hello["hooks"] == ["probe_commands", "probe_config_sections"]
    assert hello["provides"] == {"commands": ["hello"]}


def test_broken_plugin_is_reported_and_cli_keeps_working(plugin_site, run_probe, tmp_path):
    marker = tmp_path / "marker"
    done = run_probe("plugins", "--json", site=plugin_site, env={"PROBE_TEST_MARKER": str(marker)})
    assert done.returncode == 0
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["broken"]["status"] == "failed"
    assert rows["broken"]["distribution"] == "probe-test-broken"
    assert "RuntimeError: this plugin is broken on purpose" in rows["broken"]["error"]
    assert "plugin 'broken' (distribution 'probe-test-broken') failed to load" in done.stderr
    assert rows["git_commit"]["status"] == "enabled"
    assert marker.read_text() == "imported"
    # the table form names the failure too, and other commands still work
    table = run_probe("plugins", site=plugin_site)
    assert table.returncode == 0 and "failed" in table.stdout and "broken on purpose" in table.stdout
    hello = run_probe("hello", "--who", "probe", site=plugin_site)
    assert hello.returncode == 0 and hello.stdout.strip() == "hello probe"


def test_disabled_plugin_is_never_imported(plugin_site, plugins_json, run_probe, tmp_path):
    marker = tmp_path / "marker"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "plugins": {"disable": ["broken", "git_commit"]}}))
    done = run_probe("plugins", "--json", "-c", str(config), site=plugin_site,
                     env={"PROBE_TEST_MARKER": str(marker)})
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["broken"]["status"] == "disabled"
    assert rows["git_commit"]["status"] == "disabled"
    assert rows["git_commit"]["provides"] == {}
    assert not marker.exists(), "a disabled plugin was imported"
    assert "failed to load" not in done.stderr


def test_disabling_an_unknown_plugin_is_a_warning(plugin_site, run_probe, tmp_path):
    # one config.json is shared between machines with different plugins installed
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": {"disable": ["git_comit", "broken"]}}))
    done = run_probe("plugins", "--json", "-c", str(config), site=plugin_site)
    assert done.returncode == 0, done.stderr
    assert "warning: config \"plugins.disable\": unknown plugin 'git_comit'" in done.stderr
    assert "installed plugins: " in done.stderr and "git_commit" in done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["broken"]["status"] == "disabled" and rows["git_commit"]["status"] == "enabled"
    with pytest.warns(ProbeWarning, match="\"plugins.disable\": unknown plugin 'nope'.*installed plugins: .*core"):
        registry = load_registry(PluginSelection(disable=("nope",)), autoload=False)
    assert registry.info("core").status == "enabled"


def test_enabling_an_unknown_plugin_is_an_error_listing_installed_ones(plugin_site, run_probe, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": {"enable": ["git_comit"]}}))
    done = run_probe("plugins", "-c", str(config), site=plugin_site)
    assert done.returncode == 2
    assert "config \"plugins.enable\": unknown plugin 'git_comit'; installed plugins: " in done.stderr
    assert "git_commit" in done.stderr and "core" in done.stderr
    assert "Traceback" not in done.stderr


def test_core_cannot_be_disabled(tmp_path):
    with pytest.raises(PluginError, match="part of probe-core"):
        load_registry(PluginSelection(disable=("core",)))


def test_autoload_switch_loads_only_builtins_and_enabled(plugin_site, plugins_json, tmp_path):
    env = {"PROBE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    rows = plugins_json(site=plugin_site, env=env)
    assert rows["core"]["status"] == "enabled"
    assert rows["git_commit"]["status"] == "not loaded"
    assert rows["statistics"]["status"] == rows["md5"]["status"] == "not loaded"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": {"enable": ["git_commit"]}}))
    rows = plugins_json("-c", str(config), site=plugin_site, env=env)
    assert rows["git_commit"]["status"] == "enabled"
    assert rows["broken"]["status"] == "not loaded"


def test_two_distributions_with_one_plugin_name_is_an_error(run_probe, tmp_path):
    code = "from probe_core import hookimpl\n"
    sources = [write_dist(tmp_path / "src", dist, "twin", module, code)
               for dist, module in (("probe-twin-one", "twin_one"), ("probe-twin-two", "twin_two"))]
    site = tmp_path / "site"
    pip_install_target(site, *sources)
    done = run_probe("plugins", site=site)
    assert done.returncode == 2
    assert "two plugins are named 'twin'" in done.stderr
    assert "'probe-twin-one'" in done.stderr and "'probe-twin-two'" in done.stderr
    assert "Traceback" not in done.stderr


def test_duplicate_spec_names_name_both_plugins():
    a = _plugin("a", probe_checkers=lambda: [_checker("same")])
    b = _plugin("b", probe_checkers=lambda: [_checker("same")])
    registry = load_registry(extra=[("plugin_a", a), ("plugin_b", b)], autoload=False)
    with pytest.raises(PluginError) as info:
        registry.checkers  # noqa: B018
    assert "checker 'same' is registered twice" in str(info.value)
    assert "'plugin_a'" in str(info.value) and "'plugin_b'" in str(info.value)


def test_families_are_ordered_by_priority_then_name_not_load_order():
    a = _plugin("a", probe_checkers=lambda: [_checker("zeta"), _checker("alpha", priority=5)])
    b = _plugin("b", probe_checkers=lambda: [_checker("beta"), _checker("early", priority=-1)])
    for extra in ([("pa", a), ("pb", b)], [("pb", b), ("pa", a)]):
        registry = load_registry(extra=extra, autoload=False)
        assert list(registry.checkers) == ["early", "beta", "zeta", "alpha"]
        assert registry.checkers["beta"].plugin == "pb"


def test_registration_must_return_specs():
    bad = _plugin("bad", probe_comparators=lambda: [{"name": "not a spec"}])
    registry = load_registry(extra=[("bad", bad)], autoload=False)
    with pytest.raises(PluginError, match="must return ComparatorSpec objects, got dict"):
        registry.comparators  # noqa: B018


def test_raising_registration_hook_warns_and_is_skipped():
    def explode():
        raise ValueError("boom")

    bad = _plugin("bad", probe_comparators=explode)
    good = _plugin("good", probe_comparators=lambda: [ComparatorSpec("c", "statistics", "d", load=lambda: None)])
    registry = load_registry(extra=[("bad", bad), ("good", good)], autoload=False)
    with pytest.warns(ProbeWarning, match="plugin 'bad' failed in probe_comparators: ValueError: boom"):
        assert list(registry.comparators) == ["c"]


def test_events_run_in_name_order_and_a_raising_plugin_is_muted():
    calls: list[str] = []

    def recorder(tag):
        def on_record(name, entry, step, rank):
            calls.append(f"{tag}:{name}:{step}:{rank}")
        return on_record

    def explode(name):
        raise RuntimeError("listener bug")

    plugins = [("zz", _plugin("zz", probe_on_record=recorder("zz"))),
               ("aa", _plugin("aa", probe_on_record=recorder("aa"))),
               ("mm", _plugin("mm", probe_on_record=explode))]
    registry = load_registry(extra=plugins, autoload=False)
    assert registry.listens("probe_on_record")
    assert not registry.listens("probe_on_step_end")
    with pytest.warns(ProbeWarning, match="plugin 'mm' raised in probe_on_record and is muted"):
        registry.emit("probe_on_record", name="Torch.add.0.forward", entry={}, step=1, rank=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        registry.emit("probe_on_record", name="Torch.add.1.forward", entry={}, step=1, rank=0)
    assert calls == ["aa:Torch.add.0.forward:1:0", "zz:Torch.add.0.forward:1:0",
                     "aa:Torch.add.1.forward:1:0", "zz:Torch.add.1.forward:1:0"]
    registry.unmute()  # a new collection run in this process (the registry is shared): the plugin is called again
    with pytest.warns(ProbeWarning, match="plugin 'mm' raised in probe_on_record"):
        registry.emit("probe_on_record", name="Torch.add.2.forward", entry={}, step=2, rank=0)


def test_event_callers_are_pluggy_hook_callers_built_once_and_traced(capsys, monkeypatch):
    calls: list[str] = []
    plugins = [("aa", _plugin("aa", probe_on_step_end=lambda step, rank, dump_dir: calls.append(f"aa:{step}"))),
               ("bb", _plugin("bb", probe_on_step_end=lambda step: calls.append(f"bb:{step}")))]
    registry = load_registry(extra=plugins, autoload=False)
    callers = registry.callers("probe_on_step_end")
    assert [name for name, _ in callers] == ["aa", "bb"]
    assert registry.callers("probe_on_step_end") is callers  # built once, not per event
    registry.enable_tracing()
    registry.emit("probe_on_step_end", step=3, rank=0, dump_dir="d")
    assert calls == ["aa:3", "bb:3"]
    err = capsys.readouterr().err
    assert "probe_on_step_end [hook]" in err and "plugin 'aa' [hook]" in err and "plugin 'bb' [hook]" in err
    assert "finish probe_on_step_end --> [] [hook]" in err
    monkeypatch.setenv("PROBE_DEBUG", "1")  # every registry traces, its registration hooks included
    registry = load_registry(extra=plugins, autoload=False)
    assert "plugins" in registry.commands
    assert "probe_commands [hook]" in capsys.readouterr().err


MISSPELLED = """
    from probe_core import hookimpl
    from probe_core.specs import ComparatorSpec

    @hookimpl
    def probe_comparator():  # missing "s": pluggy alone would accept it and never call it
        return [ComparatorSpec("typo", "statistics", "never registered", load=lambda: None)]

    @hookimpl
    def probe_checkers():
        return []
"""


def test_misspelled_hook_fails_its_plugin_and_names_plugin_and_hook():
    typo = _plugin("typo", probe_comparator=lambda: [], probe_checkers=lambda: [_checker("typo_check")])
    good = _plugin("good", probe_checkers=lambda: [_checker("fine")])
    expected = "unknown hook 'probe_comparator' (no such hook; did you mean 'probe_comparators'?)"
    with pytest.warns(ProbeWarning) as caught:
        registry = load_registry(extra=[("typo", typo), ("good", good)], autoload=False)
    assert [str(w.message) for w in caught] == [f"plugin 'typo' (distribution '(in-process)') failed to load: {expected}"]
    info = registry.info("typo")
    assert info.status == "failed" and info.error == expected and info.hooks == ()
    assert not registry.pm.has_plugin("typo")  # none of its hooks runs, the correct ones included
    assert list(registry.checkers) == ["fine"]  # the rest of probe keeps working
    far = _plugin("far", probe_frobnicate=lambda: [])
    with pytest.warns(ProbeWarning, match="unknown hook 'probe_frobnicate' \\(no such hook; the hooks are probe_acc_backends, probe_acc_standards, probe_checkers"):
        assert load_registry(extra=[("far", far)], autoload=False).info("far").status == "failed"


def test_misspelled_hook_in_an_installed_plugin_is_shown_by_probe_plugins(run_probe, tmp_path):
    site = fake_plugin(tmp_path / "site", "probe-test-typo", "typo", "probe_test_typo", MISSPELLED)
    done = run_probe("plugins", "--json", site=site)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    expected = "unknown hook 'probe_comparator' (no such hook; did you mean 'probe_comparators'?)"
    assert rows["typo"]["status"] == "failed" and rows["typo"]["error"] == expected
    assert rows["typo"]["distribution"] == "probe-test-typo" and rows["typo"]["version"] == "1.2.3"
    assert rows["typo"]["provides"] == {}
    assert f"warning: plugin 'typo' (distribution 'probe-test-typo') failed to load: {expected}" in done.stderr
    assert rows["core"]["status"] == "enabled"
    table = run_probe("plugins", site=site)
    assert table.returncode == 0 and "failed" in table.stdout and "did you mean 'probe_comparators'?" in table.stdout


def test_duplicate_command_names_are_an_error():
    spec = CommandSpec("plugins", "mine", lambda p: None, lambda a: 0)
    registry = load_registry(extra=[("mine", _plugin("mine", probe_commands=lambda: [spec]))], autoload=False)
    with pytest.raises(PluginError, match="command 'plugins' is registered twice: by plugin 'core'"):
        registry.commands  # noqa: B018


def test_name_maps_one_plugin_per_pair_of_frameworks():
    from probe_compare.mapping import NameMap, builtin_map
    from probe_core.specs import NameMapSpec

    def maps(name, *specs):
        return (name, _plugin(name, probe_name_maps=lambda: list(specs)))

    shared = NameMap(prefix={"Jx": "Torch"})
    forward = NameMapSpec("jaxish", "pytorch", "d", load=lambda: shared)
    registry = load_registry(extra=[maps("aa", forward)], autoload=False)
    assert list(registry.name_maps) == ["jaxish->pytorch"] and registry.name_maps["jaxish->pytorch"].plugin == "aa"
    found = builtin_map("jaxish", "pytorch", registry=registry)
    assert found == shared and found is not shared  # a copy: the caller adds the user's mapping files to it
    found.prefix["Other"] = "Torch"
    assert builtin_map("jaxish", "pytorch", registry=registry).prefix == {"Jx": "Torch"}
    for target, bench in (("pytorch", "jaxish"), ("jaxish", "jaxish"), ("", "pytorch"), ("jaxish", "")):
        assert builtin_map(target, bench, registry=registry) == NameMap()  # none registered, equal or unknown
    twin = NameMapSpec("jaxish", "pytorch", "d", load=NameMap)
    registry = load_registry(extra=[maps("aa", forward), maps("bb", twin)], autoload=False)
    with pytest.raises(PluginError, match="name map 'jaxish->pytorch' is registered twice: by plugin 'aa' .* "
                                          "and by plugin 'bb'"):
        registry.name_maps  # noqa: B018
    wrong = NameMapSpec("jaxish", "pytorch", "d", load=lambda: {"Jx": "Torch"})
    registry = load_registry(extra=[maps("cc", wrong)], autoload=False)
    with pytest.raises(PluginError, match="plugin 'cc': the name map 'jaxish->pytorch' must load a NameMap, got dict"):
        builtin_map("jaxish", "pytorch", registry=registry)


def test_collector_choice_is_explicit():
    from probe_core.specs import CollectorSpec

    def collectors(*specs):
        return _plugin("c", probe_collectors=lambda: list(specs))

    one = CollectorSpec("fake", "fakefw", "d", load=lambda: "impl")
    registry = load_registry(extra=[("c", collectors(one))], autoload=False)
    assert registry.collector_for("fakefw").load() == "impl"
    with pytest.raises(PluginError, match="no collector plugin for framework 'otherfw'"):
        registry.collector_for("otherfw")
    missing = CollectorSpec("gone", "gonefw", "d", load=lambda: None, is_available=lambda: False)
    registry = load_registry(extra=[("c", collectors(missing))], autoload=False)
    with pytest.raises(PluginError, match="gonefw cannot be imported"):
        registry.collector_for("gonefw")
    twin = CollectorSpec("fake2", "fakefw", "d", load=lambda: None)
    registry = load_registry(extra=[("c", collectors(one, twin))], autoload=False)
    with pytest.raises(PluginError, match="all claim 'fakefw'"):
        registry.collector_for("fakefw")


def test_deferred_imports_its_target_on_the_first_call_and_names_a_broken_one():
    from probe_core.api import Deferred

    assert Deferred("json:dumps")({"a": 1}) == '{"a": 1}'
    with pytest.raises(ValueError, match="package.module:name"):
        Deferred("json.dumps")
    with pytest.raises(PluginError, match="no_such_module_here:run: ModuleNotFoundError"):
        Deferred("no_such_module_here:run")()
    with pytest.raises(PluginError, match="json:no_such_name: AttributeError"):
        Deferred("json:no_such_name")()


def test_a_command_imports_only_its_own_plugin_code():
    """Every command loads every plugin; the plugins defer their commands' code, so ``probe compare`` imports
    neither the run engine nor acc-check's, config_check's or overflow-check's implementation."""
    code = ("import contextlib, io, sys; from probe_core.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): main(['compare', '--help'])\n"
            "print(sorted(m for m in sys.modules if m in {'probe_core.collect.session', 'probe_acc_check.command',"
            " 'probe_acc_check.standards', 'probe_config_check.dataset', 'probe_config_check.command',"
            " 'probe_overflow_check.analyze', 'probe_compare.engine'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout  # compare's own engine too: --help runs nothing
    code = code.replace("'compare', '--help'", "'check', '--help'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['probe_config_check.command']", done.stdout

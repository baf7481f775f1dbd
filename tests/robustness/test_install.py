"""Issue 11, item 7: the install story. ``pip install probe-torch`` brings every verb the README lists, or
the verb names the distribution that brings it; every third-party import is declared where it is used."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

import pytest

from tests.robustness.helpers import ROOT, assert_clean_error, run_probe

DISTRIBUTIONS = {p.parent: tomllib.loads(p.read_text())["project"]
                 for p in [*ROOT.glob("*/pyproject.toml"), *ROOT.glob("plugins/*/pyproject.toml")]
                 if "project" in tomllib.loads(p.read_text())}
#: import name -> the requirement that provides it
PROVIDERS = {"openpyxl": "openpyxl", "yaml": "pyyaml", "rich": "rich", "pluggy": "pluggy", "numpy": "numpy",
             "packaging": "packaging"}


def _requirement_names(project: dict) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0].strip().lower() for dep in project.get("dependencies", [])}


def _closure(name: str) -> set[str]:
    by_name = {project["name"]: project for project in DISTRIBUTIONS.values()}
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in by_name:
            continue
        seen.add(current)
        todo += sorted(_requirement_names(by_name[current]))
    return seen


def _optional(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``try: ... except ImportError`` (an optional dependency, used if present)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                or isinstance(h.type, ast.Tuple) and any(getattr(e, "id", "") in ("ImportError", "ModuleNotFoundError")
                                                         for e in h.type.elts) for h in node.handlers):
            ids |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    return ids


def _imports(source: Path, required_only: bool = True) -> set[str]:
    found = set()
    tree = ast.parse(source.read_text(encoding="utf-8"))
    optional = _optional(tree) if required_only else set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("folder", sorted(DISTRIBUTIONS, key=str), ids=lambda p: p.name)
def test_every_third_party_import_is_declared_by_its_distribution(folder):
    project = DISTRIBUTIONS[folder]
    declared = _requirement_names(project)
    missing = {}
    for source in (folder / "src").rglob("*.py"):
        for module in _imports(source) & PROVIDERS.keys():
            if PROVIDERS[module] not in declared:
                missing.setdefault(PROVIDERS[module], []).append(str(source.relative_to(ROOT)))
    assert not missing, f"{project['name']} imports these without declaring them: {missing}"


def test_openpyxl_is_declared_where_it_is_used():
    users = [folder for folder in DISTRIBUTIONS
             if any("openpyxl" in _imports(p, required_only=False) for p in (folder / "src").rglob("*.py"))]
    assert users, "nothing imports openpyxl any more: drop this test"
    for folder in users:
        assert "openpyxl" in _requirement_names(DISTRIBUTIONS[folder]), DISTRIBUTIONS[folder]["name"]


def test_probe_torch_brings_every_verb_the_readme_lists_or_the_verb_names_its_distribution():
    from probe_core.cli import COMMAND_DISTRIBUTIONS
    from probe_core.plugins import current_registry

    readme = (ROOT / "README.md").read_text()
    verbs = set(re.findall(r"^\| `probe ([a-z0-9-]+)", readme, re.M))
    assert {"run", "compare", "graph", "check", "plugins", "recover"} <= verbs
    registry = current_registry()
    closure = _closure("probe-torch")
    for verb in sorted(verbs):
        spec = registry.commands.get(verb)
        assert spec is not None, f"README lists probe {verb}, which no installed plugin provides"
        distribution = registry.info(spec.plugin).distribution
        if distribution not in closure:
            assert COMMAND_DISTRIBUTIONS.get(verb) == distribution, \
                f"probe {verb} needs {distribution}, which pip install probe-torch does not bring and the CLI does " \
                "not name"


def test_a_command_of_a_distribution_that_is_not_installed_names_it(monkeypatch):
    from probe_core import cli
    from probe_core.errors import ProbeError
    from probe_core.plugins import current_registry

    monkeypatch.setitem(cli.COMMAND_DISTRIBUTIONS, "frobnicate", "probe-frobnicate")
    with pytest.raises(ProbeError, match="comes with the distribution probe-frobnicate, which is not installed; "
                                         "pip install probe-frobnicate"):
        cli.check_command_installed(["--debug", "frobnicate", "x"], current_registry())


def test_a_command_whose_plugin_is_disabled_says_so(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": {"disable": ["config_check"]}}))
    result = run_probe("-c", config, "check", "collect", "-o", tmp_path / "p.zip")
    assert_clean_error(result, "probe check", "probe-config-check is installed but its plugin is not enabled")

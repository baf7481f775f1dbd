"""``probe_core.api`` is the one module plugins import (issue 39): every distribution of this repository, the
examples and the test packages import nothing else of probe_core (``probe_core.testing`` in tests), every
public name resolves, docs/plugins.md lists them, and importing the API imports no framework."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import probe_core.api as api
from tests.core.conftest import REPO

#: where plugin code lives: every distribution but probe-core, the examples and the test packages
PLUGIN_SOURCES = [*REPO.glob("plugins/*/src"), REPO / "probe_torch" / "src", REPO / "probe_mindspore" / "src",
                  *REPO.glob("examples/plugins/*/src"), *REPO.glob("tests/plugins/packages/*/src")]
ALLOWED = {"probe_core.api", "probe_core.testing"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of each absolute import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def _probe_core_imports(path: Path) -> list[str]:
    return [f"{path.relative_to(REPO)}:{line}: {m}" for line, m in _imports(path)
            if m.split(".")[0] == "probe_core" and m not in ALLOWED]


def test_plugins_import_only_the_public_api():
    sources = [path for root in PLUGIN_SOURCES for path in root.rglob("*.py")]
    assert len(sources) > 80  # the scan sees the distributions
    private = [line for path in sources for line in _probe_core_imports(path)]
    assert private == [], "import these from probe_core.api:\n" + "\n".join(private)


@pytest.mark.parametrize("surface", ["probe_core.api", "probe_compare.api", "probe_graph.api"])
def test_every_public_name_resolves_and_is_documented(surface):
    docs = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    module = importlib.import_module(surface)
    assert module.__all__
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert f"`{name}`" in docs, f"docs/plugins.md does not document {surface}.{name}"


def test_a_name_that_moved_says_where_it_went():
    with pytest.raises(AttributeError, match=r"probe_core\.api\.RowResult moved to probe_compare\.api.*probe-compare"):
        api.RowResult  # noqa: B018
    with pytest.raises(AttributeError, match=r"probe_core\.api\.Graph moved to probe_graph\.api"):
        api.Graph  # noqa: B018
    with pytest.raises(AttributeError, match="has no 'Nothing'"):
        api.Nothing  # noqa: B018


def test_importing_the_api_imports_no_framework():
    code = ("import sys, probe_core.api as api; from probe_core.api import DataModeSpec, CollectorSpec, hookimpl; "
            "print(sorted(m for m in ('torch', 'mindspore', 'numpy', 'probe_core.collect.driver') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_one_in_place_rule_for_collection_compare_and_pre_check():
    from probe_acc_check.cases import ApiCase
    from probe_core.api import is_inplace, writes_in_place
    from probe_compare.judge import _in_place

    expected = {"add_": True, "__iadd__": True, "__imatmul__": True, "__setitem__": True, "__invert__": False,
                "__getitem__": False, "__index__": False, "add": False, "__add__": False, "relu_": True}
    for op, changes in expected.items():
        assert writes_in_place(op) is changes, op
        assert is_inplace(f"Tensor.{op}", None) is changes, op                   # collection
        assert _in_place(f"Tensor.{op}.0.forward") is changes, op                # the compare's judge
        assert ApiCase(f"Tensor.{op}.0", f"Tensor.{op}", "pytorch").inplace is changes, op  # the pre-check
    assert is_inplace("Distributed.all_reduce", None) and is_inplace("Functional.relu", {"inplace": True})


def _requires(folder: Path) -> set[str]:
    """The distributions ``folder``'s pyproject.toml declares as dependencies (names only)."""
    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {re.split(r"[\s\[<>=!;~]", requirement, maxsplit=1)[0] for requirement in project["dependencies"]}


def test_plugins_do_not_reach_into_each_other():
    """A plugin distribution imports probe_core.api, its own package and libraries, and of another plugin
    distribution only the public ``.api`` of one it declares as a dependency (``probe_compare.api`` of
    probe-compare, ``probe_graph.api`` of probe-graph), never its private modules (the collectors' ``TrainerMon``
    re-export of probe-monitor, a declared dependency, aside)."""
    folders = [*REPO.glob("plugins/*"), REPO / "probe_torch", REPO / "probe_mindspore", *REPO.glob("examples/plugins/*")]
    packages = {folder: {p.name for p in (folder / "src").iterdir() if (p / "__init__.py").is_file()}
                for folder in folders if (folder / "src").is_dir()}
    ours = {name for names in packages.values() for name in names}
    found = []
    for folder, own in packages.items():
        allowed = {f"{dist.replace('-', '_')}.api" for dist in _requires(folder)}
        for path in (folder / "src").rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                module = node.module if isinstance(node, ast.ImportFrom) and not node.level else None
                top = (module or "").split(".")[0]
                if top in ours - own and module not in allowed and not module.startswith(
                        ("probe_monitor.torch_monitor", "probe_monitor.mindspore_monitor")):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {module}")
    assert found == [], "\n".join(found)
    assert "probe_compare.api" in {f"{d.replace('-', '_')}.api" for d in _requires(REPO / "plugins" / "graph")}


def test_the_core_imports_no_plugin():
    """probe-core stands alone: no module of it imports a package of another distribution (its testing kit
    runs probe graph through the registry's command, not by importing probe-graph)."""
    roots = [*REPO.glob("plugins/*/src"), REPO / "probe_torch" / "src", REPO / "probe_mindspore" / "src"]
    theirs = {p.name for root in roots for p in root.iterdir() if (p / "__init__.py").is_file()}
    assert {"probe_graph", "probe_monitor", "probe_torch"} <= theirs
    found = [f"{path.relative_to(REPO)}:{line}: {m}"
             for path in (REPO / "probe_core" / "src" / "probe_core").rglob("*.py")
             for line, m in _imports(path) if m.split(".")[0] in theirs]
    assert found == [], "\n".join(found)


def _module_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``root``'s package it imports, at any depth of its code (imports inside functions
    included, ``if TYPE_CHECKING:`` blocks left out); ``from package import name`` counts as importing
    ``package.name`` where that is a module (compiled ones included)."""
    modules = {}
    for path in root.rglob("*"):
        if path.suffix in (".py", ".so"):
            parts = path.relative_to(root.parent).parts
            name = ".".join((*parts[:-1], path.name.split(".")[0]))
            modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        if path.suffix != ".py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for part in node.body for n in ast.walk(part)}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [f"{base}.{alias.name}" for alias in node.names]
                targets = [n for n in names if n in modules]
                if len(targets) < len(names):  # some names are the package's own attributes
                    targets.append(base)
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_core_and_the_pipelines_have_no_import_cycle_lazy_imports_included():
    """No two modules of probe_core (nor of probe_compare, nor of probe_graph) import each other, directly or
    around a loop, even inside functions (a lazy import that hides a cycle is still one): each module sits above
    what it imports."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = _module_graph(REPO / "probe_core" / "src" / "probe_core")
    assert "probe_core.dump._scan" in graph["probe_core.dump.jsonstream"]  # a lazy import of a compiled module
    assert _cycles(graph) == []
    compare = _module_graph(REPO / "plugins" / "compare" / "src" / "probe_compare")
    assert {"probe_compare.pairs", "probe_compare.output"} <= compare["probe_compare.engine"]
    assert "probe_compare._facts" in compare["probe_compare.judge"]  # a lazy import of a compiled module
    assert _cycles(compare) == []
    assert _cycles(_module_graph(REPO / "plugins" / "graph" / "src" / "probe_graph")) == []

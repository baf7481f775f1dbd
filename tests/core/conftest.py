"""Fixtures for the core tests: real distributions built on the fly and pip-installed into a folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PROBE = str(VENV_BIN / "probe")

# Small third-party plugins as users would ship them. Each becomes a real distribution.
TEST_PLUGINS = {
    # imports fine, adds a command and a config section
    "probe-test-hello": ("hello", "probe_test_hello", """
        import argparse
        from probe_core import hookimpl
        from probe_core.specs import CommandSpec, ConfigKey, ConfigSectionSpec

        def _configure(parser):
            parser.add_argument("--who", default="world")

        def _run(args):
            print(f"hello {args.who}")
            return 0

        @hookimpl
        def probe_commands():
            return [CommandSpec("hello", "say hello", _configure, _run)]

        @hookimpl
        def probe_config_sections():
            return [ConfigSectionSpec("hello", (ConfigKey("greeting", str, "hi"),))]
    """),
    # raises on import, and leaves a marker file behind to prove whether it was imported
    "probe-test-broken": ("broken", "probe_test_broken", """
        import os, pathlib
        marker = os.environ.get("PROBE_TEST_MARKER")
        if marker:
            pathlib.Path(marker).write_text("imported")
        raise RuntimeError("this plugin is broken on purpose")
    """),
}


def write_dist(root: Path, dist: str, ep_name: str, module: str, code: str) -> Path:
    folder = root / dist
    (folder / module).mkdir(parents=True)
    (folder / module / "__init__.py").write_text(textwrap.dedent(code))
    (folder / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{dist}"
        version = "1.2.3"

        [project.entry-points.probe]
        {ep_name} = "{module}"

        [tool.setuptools]
        packages = ["{module}"]
    """))
    return folder


def fake_plugin(site: Path, dist: str, ep_name: str, module: str, code: str) -> Path:
    """An installed plugin without pip: ``module`` plus a ``*.dist-info`` (METADATA, entry_points.txt
    declaring ``ep_name`` in group ``probe``) in ``site``; put ``site`` on PYTHONPATH to install it."""
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(textwrap.dedent(code))
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[probe]\n{ep_name} = {module}\n")
    return site


def pip_install_target(target: Path, *sources: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "--target", str(target), *map(str, sources)],
        check=True, capture_output=True, text=True,
    )


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    """A folder holding the example checker and the test plugins, installed by pip."""
    src = tmp_path_factory.mktemp("plugin_src")
    target = tmp_path_factory.mktemp("plugin_site")
    sources = [REPO / "examples" / "plugins" / "probe-example-checker"]
    sources += [write_dist(src, dist, ep, module, code) for dist, (ep, module, code) in TEST_PLUGINS.items()]
    pip_install_target(target, *sources)
    return target


def run_probe(*args: str, site: Path | None = None, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real ``probe`` console script; ``site`` is put on PYTHONPATH."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PROBE_")}
    full_env["COLUMNS"] = "200"
    if site is not None:
        full_env["PYTHONPATH"] = str(site)
    full_env.update(env or {})
    return subprocess.run([PROBE, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=120)


def plugins_json(*args: str, **kwargs) -> dict[str, dict]:
    done = run_probe("plugins", "--json", *args, **kwargs)
    assert done.returncode == 0, done.stderr
    return {row["name"]: row for row in json.loads(done.stdout)}


@pytest.fixture(name="run_probe")
def _run_probe_fixture():
    return run_probe


@pytest.fixture(name="plugins_json")
def _plugins_json_fixture():
    return plugins_json

"""Helpers for the config_check tests: run the real CLI and scripts, fake installed distributions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PROBE = str(VENV_BIN / "probe")
EXAMPLE_CHECKER = REPO / "examples" / "plugins" / "probe-example-checker"


def clean_env(extra: dict[str, str] | None = None, pythonpath: list[Path] = ()) -> dict[str, str]:
    """The test process' environment without probe switches, with ``extra`` added."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROBE_")}
    env["COLUMNS"] = "200"
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(map(str, pythonpath))
    env.update(extra or {})
    return env


def run_probe(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              pythonpath: list[Path] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=clean_env(env, pythonpath), timeout=120)


def run_python(script: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
               pythonpath: list[Path] = ()) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=clean_env(env, pythonpath), timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def fake_distribution(site: Path, name: str, version: str) -> Path:
    """A ``NAME-VERSION.dist-info`` folder: importlib.metadata sees it as installed."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return site


@pytest.fixture(scope="session")
def example_site(tmp_path_factory) -> Path:
    """The example third-party checker (git_commit), pip-installed into its own folder."""
    target = tmp_path_factory.mktemp("example_site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(EXAMPLE_CHECKER)],
                   check=True, capture_output=True, text=True)
    return target

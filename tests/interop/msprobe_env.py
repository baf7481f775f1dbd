"""The real msprobe 26.2.0, in a virtual environment of its own beside the project's (never a dependency).

``msprobe_python()`` builds ``.venv-msprobe/`` at the repository root the first time a test asks for it
(mindstudio-probe==26.2.0 with the same CPU torch 2.13.0 and mindspore 2.10.0 as the project's, read from the
project's venv), then reuses it. Where it cannot be installed
(no package index), the tests that need it are skipped with pip's own words.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("PROBE_TEST_MSPROBE_VENV", ROOT / ".venv-msprobe"))
PINS = ("mindstudio-probe==26.2.0", "torch==2.13.0", "mindspore==2.10.0", "numpy<2")  # msprobe's two sides


def _stamp() -> Path:
    return VENV / (".installed-" + "_".join(p.replace("<", "lt").replace("=", "") for p in PINS))


@lru_cache(maxsize=1)
def msprobe_python() -> tuple[str | None, str]:
    """``(python, "")`` of the msprobe venv, or ``(None, why)`` when it cannot be installed here."""
    python = VENV / "bin" / "python"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(str(VENV) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp().exists():
            return str(python), ""
        steps = [[sys.executable, "-m", "venv", "--clear", str(VENV)], _share_packages,
                 [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PINS]]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=1500) if isinstance(step, list) \
                else step(python)
            if done.returncode != 0:
                return None, f"cannot install msprobe for the interop tests: {(done.stderr or done.stdout)[-800:]}"
        _stamp().touch()
    return str(python), ""


def _share_packages(python: Path) -> subprocess.CompletedProcess:
    """Let the new venv read the project's packages after its own (a ``.pth`` file naming the project venv's
    site-packages): pip then finds the same torch and mindspore there and installs msprobe and what else it
    needs beside them, not a second copy of both frameworks (minutes of a fresh machine's test run). The venv's
    own packages come first on its path, so a version msprobe pins wins over the project's."""
    import sysconfig

    ask = [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    found = subprocess.run(ask, capture_output=True, text=True, timeout=120)
    if found.returncode == 0:
        Path(found.stdout.strip(), "project-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return found


def run_msprobe_python(python: str, *args: object, cwd: Path | None = None,
                       timeout: int = 600) -> subprocess.CompletedProcess:
    """``python ARGS`` in the msprobe venv, with none of probe's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROBE_", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(OMP_NUM_THREADS="1", COLUMNS="300")
    return subprocess.run([python, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def msprobe_cli(python: str, *args: object, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``msprobe ARGS`` of the msprobe venv."""
    return run_msprobe_python(python, "-c", "import sys; from msprobe.msprobe import main; sys.exit(main())",
                              *args, cwd=cwd, timeout=timeout)

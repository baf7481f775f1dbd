"""``probe graph --serve OUT``: start TensorBoard with the tb-graph-ascend plugin on loopback."""

from __future__ import annotations

import importlib.metadata as md
import os
import sys
from pathlib import Path

from probe_core.api import GraphError

VIEWER = "tb-graph-ascend"


def viewer_installed() -> bool:
    try:
        md.distribution(VIEWER)
        md.distribution("tensorboard")
    except md.PackageNotFoundError:
        return False
    return True


def tensorboard_command(logdir: str | Path, port: int) -> list[str]:
    """The command line that serves ``logdir`` on ``127.0.0.1:port``."""
    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(Path(logdir).resolve()),
            "--host", "127.0.0.1", "--port", str(port)]


def serve(logdir: str | Path, port: int = 6006) -> int:
    """Run TensorBoard on ``logdir`` until interrupted; return its exit code."""
    folder = Path(logdir)
    if not folder.is_dir():
        raise GraphError(f"{folder}: no such folder; give the -o folder of a 'probe graph' run to --serve")
    if not any(folder.glob("*.vis.db")) and not any(folder.glob("*/*.vis.db")):
        raise GraphError(f"{folder}: holds no *.vis.db (nor */*.vis.db); run 'probe graph -tp DUMP -o {folder}' first")
    if not viewer_installed():
        raise GraphError(f"the graph viewer is not installed: pip install {VIEWER} (it brings tensorboard), "
                         f"then run 'probe graph --serve {folder}' again")
    print(f"serving {folder} on http://127.0.0.1:{port}/#graph_ascend  (Ctrl-C stops it)", flush=True)
    command = tensorboard_command(folder, port)
    # become TensorBoard: Ctrl-C and SIGTERM then reach the server itself, and no child is left behind
    os.execv(command[0], command)
    return 0  # not reached

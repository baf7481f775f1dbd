"""config.json's ``load`` (msprobe 26.2): module inputs replaced by the tensors of an earlier tensor dump.

``{"path": DUMP, "modules": ["Module.fc1.Linear.forward.0"], "step": [], "rank": [], "dump_after_load": false}``:
each listed module call gets, for each tensor positional input ``i``, the tensor saved in
``DUMP/step{S}/{rank folder}/dump_tensor_data/{call}.input.{i}.pt`` of the current step ``S`` (msprobe's
``proc{pid}`` folders and probe's ``rank{R}`` alike), so that an error that built up upstream stops there.
``step``/``rank`` (empty: every one) say when it applies; ``dump_after_load`` false (the default) only
replaces, nothing is dumped; true dumps the run with the replaced inputs. A missing or unreadable file keeps
the run's own input, with one warning per file. The framework reads a file (:attr:`read_tensor`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from probe_core.plugins import ProbeWarning


class InputLoader:
    """Which module calls get which saved inputs."""

    def __init__(self, section: Mapping[str, Any], read_tensor: Callable[[str, Any], Any],
                 is_tensor: Callable[[Any], bool]) -> None:
        self.root = Path(section["path"])
        self.modules = frozenset(section["modules"])
        self.steps = frozenset(section.get("step") or ())
        self.ranks = frozenset(section.get("rank") or ())
        self.dump_after_load = bool(section.get("dump_after_load", False))
        self._read, self._is_tensor = read_tensor, is_tensor
        self._missing: set[str] = set()

    def applies(self, step: int, rank: int) -> bool:
        return (not self.steps or step in self.steps) and (not self.ranks or rank in self.ranks)

    def replace(self, call: str, args: tuple, step: int, rank: int) -> tuple:
        """``args`` with each tensor replaced by its saved counterpart (``args`` itself when none is)."""
        if call not in self.modules or not self.applies(step, rank):
            return args
        folder = self._tensor_folder(step, rank)
        replaced = list(args)
        for i, arg in enumerate(args):
            if not self._is_tensor(arg):
                continue
            path = folder / f"{call}.input.{i}.pt" if folder is not None else None
            if path is None or not path.is_file():
                self._warn_once(str(path or self.root / f"step{step}"), "no such tensor file")
                continue
            try:
                replaced[i] = self._read(str(path), arg)
            except Exception as exc:  # a damaged file keeps the run going on its own input
                self._warn_once(str(path), f"cannot be read ({exc})")
        return tuple(replaced)

    def _tensor_folder(self, step: int, rank: int) -> Path | None:
        step_dir = self.root / f"step{step}"
        own = step_dir / f"rank{rank}" / "dump_tensor_data"
        if own.is_dir():
            return own
        procs = sorted(step_dir.glob("proc*/dump_tensor_data"))  # msprobe's single-card dumps
        return procs[0] if procs else None

    def _warn_once(self, path: str, why: str) -> None:
        if path not in self._missing:
            self._missing.add(path)
            warnings.warn(f"load: {path}: {why}; the module keeps the run's own input (load.path must be a "
                          "tensor dump of the same model and steps)", ProbeWarning, stacklevel=2)

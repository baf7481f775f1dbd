"""``ConfigChecker``: config_check from inside a training script (dynamic collection).

    from probe_config_check import ConfigChecker
    ConfigChecker.apply_patches(fmk="pytorch")      # first lines of the script: watch RNG calls
    ...
    ConfigChecker(model, shell_path=["train.sh"], output_zip_path="./config_check_pack.zip")

Every registered checker runs (static and dynamic ones); live collections
(dataset batches, RNG calls) keep growing and the pack is rewritten when they
report news and when the process exits. In a multi-rank job each rank stages
its files in ``.<zip name>.parts/`` next to the zip and the zip is rebuilt
from every rank's files under a lock.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Sequence
from typing import Any

from probe_core.api import CheckContext, CheckError, process_rank

from probe_config_check.collect import describe, is_live, run_collect, snapshot
from probe_config_check.pack import write_pack, write_rank

DEFAULT_ZIP = "./config_check_pack.zip"
FRAMEWORKS = ("pytorch", "mindspore")
#: config.json section whose keys are handed to checkers as ``CheckContext.options``
OPTIONS_SECTION = "config_check"


def load_checker_registry(config_path: str | os.PathLike[str] | None = None):
    """(registry, checker options) with config.json's ``"plugins"`` section applied."""
    from probe_core.api import plugin_selection, read_config
    from probe_core.api import current_registry

    if config_path is None:
        return current_registry(), {}
    raw = read_config(config_path)
    options = raw.get(OPTIONS_SECTION, {})
    if not isinstance(options, dict):
        raise CheckError(f'{config_path}: key "{OPTIONS_SECTION}" must be an object of checker options')
    return current_registry(plugin_selection(raw, str(config_path))), options


def _check_fmk(fmk: str | None) -> str:
    fmk = fmk or "pytorch"
    if fmk not in FRAMEWORKS:
        raise CheckError(f"fmk={fmk!r} is not supported; use one of {', '.join(FRAMEWORKS)}")
    return fmk


def rank_and_world(fmk: str | None) -> tuple[int, int]:
    """This process' rank and the world size (:func:`probe_core.api.process_rank`)."""
    return process_rank(fmk)


class ConfigChecker:
    """Collect every checker's data for this process and write it into the pack."""

    @classmethod
    def apply_patches(cls, fmk: str = "pytorch", config_path: str | os.PathLike[str] | None = None) -> None:
        """Let checkers that watch from the start (e.g. RNG call counting) install their patches."""
        fmk = _check_fmk(fmk)
        registry, _ = load_checker_registry(config_path)
        for spec in registry.checkers.values():
            if spec.prepare is not None:
                spec.prepare(fmk)

    def __init__(self, model: Any = None, shell_path: Sequence[str] | str | None = None,
                 output_zip_path: str | os.PathLike[str] = DEFAULT_ZIP, fmk: str = "pytorch",
                 config_path: str | os.PathLike[str] | None = None) -> None:
        fmk = _check_fmk(fmk)
        if isinstance(shell_path, (str, os.PathLike)):
            shell_path = [shell_path]
        self.registry, options = load_checker_registry(config_path)
        self.output_zip_path = os.fspath(output_zip_path)
        self.rank, self.world_size = rank_and_world(fmk)
        ctx = CheckContext(shell_paths=tuple(map(os.fspath, shell_path or ())), model=model,
                           framework=fmk, rank=self.rank, options=options)
        self.collected = run_collect(self.registry, ctx, static_only=False)
        self._described = describe(self.registry, self.collected)
        for value in self.collected.values():
            if is_live(value) and callable(getattr(value, "bind", None)):
                value.bind(self.flush)
        self._write(fresh=True)
        atexit.register(self.flush)

    def flush(self) -> None:
        """Rewrite this rank's part of the pack with what every checker has now."""
        self._write(fresh=False)

    def _write(self, fresh: bool) -> None:
        if self.world_size == 1:  # one process: no other rank to merge with, no staging folder
            write_pack(self.output_zip_path, {self.rank: snapshot(self.collected)}, self._described)
            return
        write_rank(self.output_zip_path, self.rank, snapshot(self.collected), self._described,
                   world_size=self.world_size, fresh=fresh)

"""Running what the stages need: the user's training commands under ``probe run``, and probe's own commands.

A training command is written as the user runs it: ``python train.py --flag``, ``torchrun --nproc_per_node=2
train.py``, ``NAME=value python train.py`` (leading assignments are environment variables). Its script is the first
``*.py`` token; what comes before it is the launcher, which runs the ``probe`` executable (a Python script) in the
script's place: ``torchrun ... probe run --dump-path P train.py ARGS``, so every rank runs under probe.
probe's commands (``compare``, ``monitor compare``, ``acc-check``) run in this process through the registry's
commands, their printed output going to the stage's log.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_core.api import ConfigError, PluginError, ProbeError, run_command

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class TrainingCommand:
    """One side's command: environment assignments, launcher tokens, the script and its arguments."""

    text: str
    env: dict[str, str]
    launcher: tuple[str, ...]
    script: str
    args: tuple[str, ...]

    @classmethod
    def parse(cls, text: str, flag: str) -> TrainingCommand:
        try:
            tokens = shlex.split(text)
        except ValueError as exc:
            raise ConfigError(f"probe locate: {flag} {text!r}: cannot split the command ({exc}); quote it as a shell "
                              "would") from None
        env = {}
        while tokens and _ASSIGNMENT.match(tokens[0]):
            name, value = tokens.pop(0).split("=", 1)
            env[name] = value
        script = next((i for i, token in enumerate(tokens) if token.endswith(".py")), None)
        if script is None:
            raise ConfigError(f"probe locate: {flag} {text!r}: no training script (*.py) in the command; write it as "
                              "you run it: 'python train.py ARGS' or 'torchrun --nproc_per_node=2 train.py ARGS'")
        launcher = tuple(tokens[:script]) or (sys.executable,)
        return cls(text, env, launcher, tokens[script], tuple(tokens[script + 1:]))

    def under_probe(self, probe_args: list[str]) -> list[str]:
        """The command with ``probe run PROBE_ARGS`` in front of the script."""
        return [*self.launcher, probe_executable(), "run", *probe_args, self.script, *self.args]


def probe_executable() -> str:
    """The ``probe`` console script of this installation (a Python file a launcher can run as a script)."""
    beside = Path(sys.executable).with_name("probe")
    found = str(beside) if beside.is_file() else shutil.which("probe")
    if not found:
        raise PluginError("probe locate: the 'probe' executable is neither beside this Python nor on PATH; install "
                          "probe-core into this environment (pip install probe-core)")
    return found


@dataclass
class Cost:
    """What a stage cost: wall seconds, CPU seconds (this process and its children), bytes written."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0
    bytes: int = 0
    ran: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def measuring(self):
        wall, cpu = time.perf_counter(), _cpu()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - wall
            self.cpu_seconds += _cpu() - cpu


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder``, a file hard-linked under several names counted once, and not at all when
    one of its names is elsewhere (the replay's links to stage 3's tensor files: written by stage 3)."""
    seen: dict[tuple[int, int], list[int]] = {}
    for root, _, files in os.walk(folder):
        for name in files:
            info = os.lstat(os.path.join(root, name))
            seen.setdefault((info.st_dev, info.st_ino), [info.st_size, info.st_nlink, 0])[2] += 1
    return sum(size for size, links, names in seen.values() if names >= links)


def _tail(log: Path, lines: int = 6) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def run_training(jobs: list[tuple[str, TrainingCommand, list[str], Path]], cost: Cost, parallel: bool,
                 watch: Callable[[set[str]], None] | None = None) -> None:
    """Run each ``(side, command, probe run arguments, log file)``; all at once when ``parallel``. While they run,
    ``watch(ended)`` is called every few hundredths of a second with the sides whose command has ended. A command
    that fails is one error naming the side, its exit code, its log and the log's last lines (once the commands
    running beside it have ended too)."""
    started: dict[str, tuple[TrainingCommand, Path, subprocess.Popen]] = {}
    ended: set[str] = set()
    for number, (side, command, probe_args, log) in enumerate(jobs):
        argv = command.under_probe(probe_args)
        cost.ran.append(f"{side}: {shlex.join(argv)}")
        with open(log, "w") as handle:
            started[side] = (command, log, subprocess.Popen(argv, env=os.environ | command.env, stdout=handle,
                                                            stderr=subprocess.STDOUT))
        if not parallel or number == len(jobs) - 1:
            _wait(started, ended, watch)
            _raise_failed(started)


def _raise_failed(started: dict[str, tuple[TrainingCommand, Path, subprocess.Popen]]) -> None:
    for side, (command, log, process) in started.items():
        if process.returncode != 0:
            raise ProbeError(f"probe locate: the {side} command ({command.text}) exited with code "
                             f"{process.returncode} under probe run; its output: {log} ({_tail(log)})")


def _wait(started: dict[str, tuple[TrainingCommand, Path, subprocess.Popen]], ended: set[str],
          watch: Callable[[set[str]], None] | None) -> None:
    """Until every command started has ended, ``watch`` being called in between."""
    while True:
        ended |= {side for side, (_, _, process) in started.items() if process.poll() is not None}
        if watch is not None:
            watch(set(ended))
        if len(ended) == len(started):
            return
        time.sleep(0.02)


def probe_command(registry: Any, argv: list[str], log: Path, cost: Cost) -> int:
    """``probe ARGV`` in this process through the registry's commands; what it prints goes to ``log``."""
    if argv[0] not in registry.commands:
        raise PluginError(f"probe locate needs the command 'probe {argv[0]}', which no enabled plugin provides; "
                          "install and enable it (probe plugins lists what is installed)")
    cost.ran.append(shlex.join(["probe", *map(str, argv)]))
    with open(log, "a") as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
        return run_command(argv, registry)

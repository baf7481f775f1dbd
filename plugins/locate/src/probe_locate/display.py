"""What ``probe locate`` prints: per stage what it ran, its cost and its finding; then the answer."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from probe_core.api import human_size

_TITLES = {"monitor": "1 monitor: where the runs part", "l0": "2 L0 of that step: which module",
           "mix": "3 mix/tensor in that module: which API", "replay": "4 replay on the bench's inputs: why"}


class Display:
    def __init__(self) -> None:
        self.console = Console(highlight=False)

    @contextlib.contextmanager
    def running(self, stage: str, folder: Path):
        with self.console.status(f"stage {escape(_TITLES[stage])} ... ({escape(str(folder))})"):
            yield

    def line(self, text: str) -> None:
        self.console.print(text, soft_wrap=True)

    def stage(self, stage: str, folder: Path, state: dict[str, Any], reused: bool) -> None:
        how = "[dim](finished before: reused)[/]" if reused else ""
        self.line(f"[bold]stage {escape(_TITLES[stage])}[/] {how}")
        for line in state["ran"]:
            self.line(f"  [dim]ran[/] {escape(line)}")
        self.line(f"  [dim]cost[/] {state['seconds']:.1f} s wall, {state['cpu_seconds']:.1f} s CPU, "
                           f"{human_size(state['bytes'])} written in {escape(str(folder))}")
        finding = state["finding"]
        style = "bold red" if finding.get("answer") else "cyan"
        self.line(f"  [dim]found[/] [{style}]{escape(finding['found'])}[/]")

    def answer(self, summary: dict[str, Any], out: Path) -> None:
        cost = (f"{summary['seconds']:.1f} s wall, {summary['cpu_seconds']:.1f} s CPU, {human_size(summary['bytes'])} "
                f"written, all stages")
        answer = summary["answer"]
        if answer is None:
            text = (f"stopped after stage {summary['stopped_after']}: rerun the same command without --stop-after "
                    "to go on from there")
            self.console.print(Panel(escape(text), title="probe locate", subtitle=escape(cost), border_style="yellow"))
        else:
            self.console.print(Panel(f"[bold]{escape(answer['text'])}[/]", title=f"probe locate: {answer['kind']}",
                                     subtitle=escape(cost), border_style="red" if answer["kind"] != "agree" else "green"))
        self.line(f"Results in {escape(str(out))}: locate_summary.json, stage*/ (open each with probe's "
                           "commands)")

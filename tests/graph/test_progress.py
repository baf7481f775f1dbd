"""``probe graph``'s progress bar: drawn on a terminal, and no bar (no rich refresh thread) anywhere else."""

from __future__ import annotations

import io
import os
import sys
import threading
from pathlib import Path

import pytest

from probe_graph.service import _progress_bar
from tests.graph.helpers import run_probe, TORCH_DUMP


def test_no_bar_and_no_thread_when_stdout_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    before = threading.active_count()
    with _progress_bar(3, shown=True) as advance:
        assert threading.active_count() == before
        for _ in range(3):
            advance()
    assert out.getvalue() == ""


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_the_bar_shows_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    leader, follower = os.openpty()
    os.set_blocking(leader, False)
    with open(follower, "w", encoding="utf-8", closefd=True) as terminal:
        monkeypatch.setattr(sys, "stdout", terminal)
        monkeypatch.delenv("TERM", raising=False)
        before = threading.active_count()
        with _progress_bar(2, shown=True) as advance:
            assert threading.active_count() == before + 1  # rich's refresh thread
            advance()
            advance()
        terminal.flush()
    drawn = b""
    try:
        while chunk := os.read(leader, 65536):
            drawn += chunk
    except (BlockingIOError, OSError):
        pass
    finally:
        os.close(leader)
    assert b"building graphs" in drawn


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_the_bar_shows_beside_a_display_left_running_on_richs_shared_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """A display another command left running in this process (rich's shared console) would take the bar in as
    a nested display, drawn on its own file: the bar has a console of its own."""
    from rich.progress import Progress

    left_running = Progress(transient=True)
    left_running.start()
    leader, follower = os.openpty()
    os.set_blocking(leader, False)
    with open(follower, "w", encoding="utf-8", closefd=True) as terminal:
        monkeypatch.setattr(sys, "stdout", terminal)
        monkeypatch.delenv("TERM", raising=False)
        with _progress_bar(2, shown=True) as advance:
            advance()
        left_running.stop()
        terminal.flush()
    drawn = b""
    try:
        while chunk := os.read(leader, 65536):
            drawn += chunk
    except (BlockingIOError, OSError):
        pass
    finally:
        os.close(leader)
    assert b"building graphs" in drawn


def test_no_bar_when_not_asked_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    before = threading.active_count()
    with _progress_bar(1, shown=False) as advance:
        assert threading.active_count() == before
        advance()
    assert out.getvalue() == ""


def test_piped_output_is_the_summary_alone(tmp_path: Path) -> None:
    """Through a pipe (no terminal) stdout holds the summary only: no line left behind by a progress display."""
    done = run_probe("-tp", TORCH_DUMP, "-gp", TORCH_DUMP, "-o", tmp_path / "out")
    assert done.stdout.splitlines()[0].strip() == "probe graph"  # the summary table's title comes first
    assert "graph file:" in done.stdout

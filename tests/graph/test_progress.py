"""``probe graph``'s progress bar: drawn on a terminal, and no bar (no rich refresh thread) anywhere else."""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Callable
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


def _on_a_terminal(monkeypatch: pytest.MonkeyPatch, body: Callable[[], None]) -> bytes:
    """What ``body`` draws with stdout a pseudo-terminal."""
    leader, follower = os.openpty()
    os.set_blocking(leader, False)
    with open(follower, "w", encoding="utf-8", closefd=True) as terminal:
        monkeypatch.setattr(sys, "stdout", terminal)
        monkeypatch.delenv("TERM", raising=False)
        body()
        terminal.flush()
    drawn = b""
    try:
        while chunk := os.read(leader, 65536):
            drawn += chunk
    except (BlockingIOError, OSError):
        pass
    finally:
        os.close(leader)
    return drawn


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_the_bar_shows_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    def body() -> None:
        before = threading.active_count()
        with _progress_bar(2, shown=True) as advance:
            assert threading.active_count() == before + 1  # rich's refresh thread
            advance()
            advance()

    assert b"building graphs" in _on_a_terminal(monkeypatch, body)


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

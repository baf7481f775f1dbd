"""The examples of docs/plugins.md run: every ```python block right after ``<!-- runnable -->`` is executed.

Each block runs in-process in a fresh namespace and an empty working folder; the examples register
their plugins in fresh registries (probe_core.testing.registry_with), so they cannot lean on each
other or on what is installed. Every hook section must hold at least one runnable example.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from probe_core import hookspecs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
RUNNABLE = re.compile(r"^<!-- runnable -->\n```python\n(.*?)^```$", re.M | re.S)


def _blocks() -> list[tuple[str, int, str]]:
    """(section heading, line number, code) of every runnable block."""
    text = DOCS.read_text(encoding="utf-8")
    found = []
    for match in RUNNABLE.finditer(text):
        before = text[:match.start()]
        headings = re.findall(r"^## (.+)$", before, flags=re.M)
        found.append((headings[-1] if headings else "", before.count("\n") + 3, match.group(1)))
    return found


BLOCKS = _blocks()


def test_every_hook_section_has_a_runnable_example():
    hooks = [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("probe_")]
    sections = {heading for heading, _, _ in BLOCKS}
    missing = [hook for hook in hooks if f"`{hook}`" not in sections]
    assert not missing, f"docs/plugins.md: no runnable example in the sections of {missing}"


@pytest.mark.parametrize("heading, line, code", BLOCKS, ids=[f"line{line}" for _, line, _ in BLOCKS])
def test_example_runs(heading, line, code, tmp_path, monkeypatch):
    if "torch" in code:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{DOCS}:{line} ({heading})", "exec"), {"__name__": "__docs_example__"})

"""Cheap call-stack capture for stack.json.

A stack is identified by its chain of ``(code object, line)`` pairs, found by
walking frames (no ``traceback`` objects, no source reads on the hot path);
the text lines (``"File f, line n, in fn, \\n source"``) are rendered once per
distinct stack and cached for the whole run.
"""

from __future__ import annotations

import linecache
import os
import sys
from typing import Any


#: Frames of Python's script launcher, never part of a user's stack.
LAUNCHER_FILES = ("<frozen runpy>", os.sep + "runpy.py")


class StackRegistry:
    """Assigns stable ids to distinct call stacks; frames from ``skip_dirs`` are left out.

    A probe-core frame met *after* the user's frames is ``probe run`` launching the
    script: the walk stops there, so stacks end at the script's ``<module>`` line
    as they do when the script runs on its own.
    """

    def __init__(self, skip_dirs: tuple[str, ...] = (), skip_files: tuple[str, ...] = ()) -> None:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.core_dir = here + os.sep
        self.skip_dirs = (self.core_dir,) + tuple(d.rstrip(os.sep) + os.sep for d in skip_dirs)
        self.skip_files = tuple(skip_files) + LAUNCHER_FILES
        self._ids: dict[tuple[Any, ...], int] = {}
        self._lines: dict[int, list[str]] = {}
        self._skip_cache: dict[str, bool] = {}

    def _skipped(self, filename: str) -> bool:
        hit = self._skip_cache.get(filename)
        if hit is None:
            hit = filename.startswith(self.skip_dirs) or filename.endswith(self.skip_files)
            self._skip_cache[filename] = hit
        return hit

    def capture(self, depth: int = 1) -> int:
        """The id of the caller's stack (innermost first), skipping probe's own frames."""
        frame = sys._getframe(depth)
        key = []
        while frame is not None:
            code = frame.f_code
            if not self._skipped(code.co_filename):
                key.append((code, frame.f_lineno))
            elif key and code.co_filename.startswith(self.core_dir):
                break  # probe run's launcher below the script
            frame = frame.f_back
        key_t = tuple(key)
        sid = self._ids.get(key_t)
        if sid is None:
            sid = len(self._ids)
            self._ids[key_t] = sid
            self._lines[sid] = [_render(code, line) for code, line in key_t]
        return sid

    def lines(self, sid: int) -> list[str]:
        return self._lines[sid]


def _render(code: Any, line: int) -> str:
    source = linecache.getline(code.co_filename, line).strip()
    return f"File {code.co_filename}, line {line}, in {code.co_name}, \n {source}"

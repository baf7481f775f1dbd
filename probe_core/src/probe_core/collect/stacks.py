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
        self._by_lines: dict[tuple[Any, ...], int] = {}
        self._alive: dict[int, Any] = {}  # id -> code object of every key: no other code object takes the id
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
        kept = []
        known = self._skip_cache
        while frame is not None:
            filename = frame.f_code.co_filename
            skipped = known.get(filename)  # _skipped() inline for the frames already seen: every call walks here
            if skipped is None:
                skipped = self._skipped(filename)
            if not skipped:
                kept.append(frame)
            elif kept and filename.startswith(self.core_dir):
                break  # probe run's launcher below the script
            frame = frame.f_back
        # keyed by each frame's code object id and instruction offset: hashing a code object hashes its
        # bytecode and constants, and a frame's line number is looked up in a table (both far slower)
        key = tuple([(id(f.f_code), f.f_lasti) for f in kept])
        sid = self._ids.get(key)
        if sid is None:  # a new instruction chain: its lines may still be a known stack
            found = [(f.f_code, f.f_lineno) for f in kept]
            line_key = tuple([(id(code), line) for code, line in found])
            sid = self._by_lines.get(line_key)
            if sid is None:
                sid = len(self._by_lines)
                self._by_lines[line_key] = sid
                self._lines[sid] = [_render(code, line) for code, line in found]
            self._ids[key] = sid
            self._alive.update((id(code), code) for code, _ in found)
        return sid

    def lines(self, sid: int) -> list[str]:
        return self._lines[sid]


def _render(code: Any, line: int) -> str:
    source = linecache.getline(code.co_filename, line).strip()
    return f"File {code.co_filename}, line {line}, in {code.co_name}, \n {source}"

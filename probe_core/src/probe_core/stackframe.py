"""A recorded stack frame read back: stack.json writes each frame as ``File PATH, line N, in FUNC, \\n CODE``
(msprobe's text, :mod:`probe_core.collect.stacks`); people read it as one line, ``PATH:N in FUNC — CODE``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

FRAME = re.compile(r"File (?P<file>.*?), line (?P<line>\d+), in (?P<func>[^,]*),?\s*\n?\s*(?P<code>.*)", re.S)
#: frames of these folders are the framework's or the interpreter's, not the user's
LIBRARY = ("site-packages", "dist-packages", "/lib/python", "\\lib\\python")


@dataclass(frozen=True)
class Frame:
    """One frame of a recorded stack; ``line`` 0 (and ``file`` the whole text) for a frame that does not parse."""

    file: str
    line: int
    func: str
    code: str
    user: bool

    def one_line(self) -> str:
        """``PATH:N in FUNC — CODE``, never over two lines (a frame that did not parse: its text, folded)."""
        if not self.line:
            return " ".join(self.file.split())
        return f"{self.file}:{self.line} in {self.func}" + (f" \u2014 {self.code}" if self.code else "")


def parse_stack(stack: Iterable[str] | None) -> list[Frame]:
    """The frames of a recorded stack (innermost first, as recorded); a frame that does not parse is kept as text."""
    frames = []
    for text in stack or []:
        match = FRAME.match(str(text).strip())
        if match:
            path = match["file"]
            code = re.sub(r"\s*\n\s*", " ", match["code"].strip())  # a frame is one line
            frames.append(Frame(path, int(match["line"]), match["func"].strip(), code,
                                not any(part in path for part in LIBRARY)))
        else:
            frames.append(Frame(str(text), 0, "", "", False))
    return frames

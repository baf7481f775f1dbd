"""Tables for a terminal of any width, a pipe or a CI log, that never cut or break a number or a name.

A rich table shrinks its columns to the console and then cuts (``Functio…``) or folds (``3.88e-1`` / ``0``)
the words that no longer fit. :func:`print_table` gives every column at least its longest word, so cells wrap
only between words; when even that is wider than the console, each row is printed as one line of
``column value`` pairs instead, wrapped between words, a word longer than the line left whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def _text(cell: Any) -> Text:
    return cell if isinstance(cell, Text) else Text(str(cell))


def _longest_word(text: Text) -> int:
    return max((len(word) for word in text.plain.split()), default=0)


def print_table(console: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                styles: dict[str, str] | None = None, justify: dict[str, str] | None = None,
                row_styles: Sequence[str] | None = None) -> None:
    """``rows`` (cells: plain strings, never read as markup, or :class:`~rich.text.Text`) under ``title``.
    ``styles`` and ``justify`` are per column name; ``row_styles`` per row (``""``: none)."""
    styles, justify = styles or {}, justify or {}
    cells = [[_text(cell) for cell in row] for row in rows]
    row_styles = list(row_styles or [""] * len(cells))
    widths = [max([_longest_word(Text(name))] + [_longest_word(row[i]) for row in cells]) for i, name in
              enumerate(columns)]
    if sum(widths) + 3 * len(columns) + 1 <= console.width:  # each column's padding and rule, and the last rule
        table = Table(title=title)
        for name, width in zip(columns, widths):
            table.add_column(name, min_width=width, style=styles.get(name), justify=justify.get(name, "left"),
                             overflow="fold")
        for row, style in zip(cells, row_styles):
            table.add_row(*row, style=style or None)
        console.print(table)
        return
    console.print(Text(title, style="italic"))
    for row, style in zip(cells, row_styles):
        line = Text(style=style)
        for i, (name, cell) in enumerate(zip(columns, row)):
            if i == 0:
                line.append(cell.plain, style="bold")
                continue
            line.append(": " if i == 1 else ", ")
            line.append(f"{name} ", style="dim")
            line.append(cell.plain, style=cell.style or styles.get(name) or "")
        for part in wrapped(line, console.width):
            console.print(part, soft_wrap=True)


def wrapped(text: Text, width: int, indent: int = 2) -> list[Text]:
    """``text`` wrapped between words to ``width`` (the lines after the first indented), a word longer than a line
    left whole on its own."""
    offsets, start, used = [], 0, 0
    for word in re.finditer(r"\S+\s*", text.plain):
        size = len(word.group().rstrip())
        limit = width - (indent if offsets else 0)
        if used and word.start() - start + size > limit:
            offsets.append(word.start())
            start = word.start()
        used = word.end() - start
    lines = text.divide(offsets)
    for line in lines:
        line.rstrip()
    return [line if i == 0 else Text(" " * indent) + line for i, line in enumerate(lines)]

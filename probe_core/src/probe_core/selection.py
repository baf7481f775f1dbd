"""Which ranks and steps a command reads (the ``--rank``/``--step`` options), and how its output lists them: as
runs (``0-1023``), and a summary of many rank/step rows abridged to the ones that matter.

A light module (no dump reader): every command's options are built when ``probe`` starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

#: Rank/step rows a summary prints in full. A larger job prints the first half of these, the rows holding its
#: answer, and counts the rest (a 1,024-rank job: a screen, not a thousand rows; summary.json has them all).
SHOWN_ROWS = 24
#: The longest run ``--rank``/``--step`` take (a typo such as 0-1000000000 is an error, not a billion numbers).
LONGEST_RUN = 1 << 20


def spans(numbers: Iterable[int]) -> str:
    """Numbers as sorted runs: ``0-1023``, ``0-3, 5, 7-8`` (a job's ranks and steps, readable in a message)."""
    runs: list[list[int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)


def abridged(count: int, keep: Iterable[int] = ()) -> list[int]:
    """The indices of the rows a summary prints out of ``count``: all of them up to :data:`SHOWN_ROWS`, else the
    first ``SHOWN_ROWS // 2`` and those in ``keep``, in order."""
    if count <= SHOWN_ROWS:
        return list(range(count))
    return sorted(set(range(SHOWN_ROWS // 2)) | {i for i in keep if 0 <= i < count})


def gaps(shown: list[int], count: int) -> list[tuple[int, int]]:
    """``(before, skipped)`` for each run of rows :func:`abridged` left out: the index of the next shown row (or
    ``count`` at the end), and how many rows the run holds."""
    out, last = [], -1
    for index in [*shown, count]:
        if index > last + 1:
            out.append((index, index - last - 1))
        last = index
    return out


def add_selection_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--rank`` and ``--step``: which rank dumps a command reads (repeatable, or msprobe's ``0,1``)."""
    parser.add_argument("--rank", type=_ints, action="append",
                        help=f"{verb} only this rank (repeatable, or 0,1, or a run 0-7)")
    parser.add_argument("--step", type=_ints, action="append",
                        help=f"{verb} only this step (repeatable, or 0,1, or a run 0-7)")


def selection(values: list[list[int]] | None) -> list[int] | None:
    """What :func:`add_selection_arguments` parsed, as one list (``None``: every rank or step)."""
    return [v for group in values for v in group] if values else None


def _ints(text: str) -> list[int]:
    """``--rank 3``, msprobe's ``--rank 0,1``, or runs as :func:`spans` writes them: ``0-511``, ``0-3,8``."""
    numbers: list[int] = []
    for part in filter(None, (part.strip() for part in text.split(","))):
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high if dash else low)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: give integers or runs, e.g. 0, 0,1 or 0-7") from None
        if first < 0 or last < first or last - first >= LONGEST_RUN:
            raise argparse.ArgumentTypeError(f"{text!r}: {part!r} is no run of ranks or steps; give e.g. 0-7")
        numbers.extend(range(first, last + 1))
    return numbers

"""Which ranks and steps a command reads: the ``--rank``/``--step`` options, and how a message lists them.

A light module (no dump reader): every command's options are built when ``probe`` starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable


def spans(numbers: Iterable[int]) -> str:
    """Numbers as sorted runs: ``0-1023``, ``0-3, 5, 7-8`` (a job's ranks and steps, readable in a message)."""
    runs: list[list[int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in runs)


def add_selection_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--rank`` and ``--step``: which rank dumps a command reads (repeatable, or msprobe's ``0,1``)."""
    parser.add_argument("--rank", type=_ints, action="append", help=f"{verb} only this rank (repeatable, or 0,1)")
    parser.add_argument("--step", type=_ints, action="append", help=f"{verb} only this step (repeatable, or 0,1)")


def selection(values: list[list[int]] | None) -> list[int] | None:
    """What :func:`add_selection_arguments` parsed, as one list (``None``: every rank or step)."""
    return [v for group in values for v in group] if values else None


def _ints(text: str) -> list[int]:
    """``--rank 3`` or msprobe's ``--rank 0,1``."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give integers, e.g. 0 or 0,1") from None

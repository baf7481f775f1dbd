"""The cause a compare result records beside the effect: the culprit's non-tensor arguments that differ between the
runs (``approximate 'tanh' vs 'none'``, ``eps 0.01 vs 1e-05``), read from its rows, and every other call of the
same API whose argument changes the same way (both blocks' GELU). ``probe compare`` prints it first; ``probe
report`` leads its answer with it."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: the message of a non-tensor argument whose values differ (the rules of every mode write it)
_SCALAR = re.compile(r"Scalar values differ \((?P<values>.*)\)\.")
_ROW = re.compile(r"^(?P<entry>.+?\.(?:forward|backward))\.(?P<io>input|kwargs)\.(?P<arg>.+)$")
_COUNT = re.compile(r"\.\d+\.(forward|backward)$")
SHOWN = 5  # calls named where several change the same way


@dataclass(frozen=True)
class ArgumentChange:
    """One argument of the culprit that differs: its name (``approximate``; ``input.4`` when passed by
    position), the values (``'tanh' vs 'none'``, target first), and every call of the same API in the step whose
    argument differs the same way, the culprit first."""

    argument: str
    values: str
    entries: tuple[str, ...]

    def text(self) -> str:
        same = ""
        if len(self.entries) > 1:
            api = _COUNT.sub("", self.entries[0])
            listed = ", ".join(self.entries[:SHOWN]) + (", ..." if len(self.entries) > SHOWN else "")
            same = f"; the same change in {len(self.entries)} calls of {api}: {listed}"
        return f"{self.argument} {self.values} (target vs bench){same}"


def argument_changes(rows: Iterable[tuple[str, str]], entry: str) -> list[ArgumentChange]:
    """The arguments of ``entry`` that differ, from the ``(row name, Err_message)`` pairs of its rank and step's
    compare result (one pass, in file order)."""
    changes: dict[tuple[str, str], list[str]] = {}  # (leaf, values) -> entries of the same API
    wanted: list[tuple[str, str]] = []
    api = _COUNT.sub("", entry)
    for name, message in rows:
        found = _SCALAR.search(message or "")
        row = _ROW.match(name) if found else None
        if row is None or _COUNT.sub("", row["entry"]) != api:
            continue
        key = (f"{row['io']}.{row['arg']}", found["values"])
        changes.setdefault(key, []).append(row["entry"])
        if row["entry"] == entry:
            wanted.append(key)
    out = []
    for leaf, values in wanted:
        io, arg = leaf.split(".", 1)
        others = [e for e in dict.fromkeys(changes[leaf, values]) if e != entry]
        out.append(ArgumentChange(leaf if arg.isdigit() else arg, values, (entry, *others)))
    return out


def csv_argument_changes(path: str | Path, entry: str) -> list[ArgumentChange]:
    """:func:`argument_changes` of a compare result CSV (``NPU Name`` and ``Err_message`` read, nothing kept);
    none when the file cannot be read."""
    csv.field_size_limit(1 << 30)  # a row's NPU_Stack_Info is long
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            if "NPU Name" not in header or "Err_message" not in header:
                return []
            name, message = header.index("NPU Name"), header.index("Err_message")
            return argument_changes(((r[name], r[message]) for r in reader if len(r) > max(name, message)), entry)
    except (OSError, UnicodeDecodeError, csv.Error):
        return []

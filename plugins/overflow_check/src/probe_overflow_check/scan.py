"""Where NaN/Inf first shows in one rank's dump, and where that is relative to its communication calls.

A tensor holds NaN/±Inf when its recorded ``Max`` or ``Min`` is NaN or ±Inf (NaN propagates into both,
an Inf shows in one). ``Mean`` and ``Norm`` are not used: on a large finite tensor they overflow on their
own (a float32 sum of values near 3e38), which is no NaN/Inf in the data. This holds for statistics,
md5, tensor and overflow_check dumps alike: all of them record the statistics.

The rank's first NaN/Inf is the first entry, in execution order, that

* **produced** it: its tensor inputs (and parameters) are clean, one of its outputs is not (msprobe's rule);
  a communication entry of that shape **received** it (it came through the collective, or the
  collective made it, e.g. a sum that overflows);
* or **inherited** it: it is the very first entry of the rank to show any NaN/Inf, and shows it in its
  inputs: it came from outside the recorded calls (the data, an unrecorded op, an earlier step's update).

Not counted: entries creating uninitialised memory (``empty``, ``empty_like``, ``new_empty``,
``empty_strided``: their garbage may hold NaN), and entries given a NaN/±Inf as a plain argument, made on
purpose (``masked_fill(mask, -inf)``): after such an entry the rank's tensors may hold that value by
design, so only *produced* ones count from there on. A ``recv``/``irecv`` entry's inputs are the buffer it
overwrites and are not looked at.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from probe_core.api import DumpEntry, is_communication, RankAnomaly, RankDump, TensorMeta

PRODUCED, RECEIVED, INHERITED = "produced", "received", "inherited"
BEFORE, DURING, AFTER, NO_COMMUNICATION = "before", "during", "after", "none"
INPUT_ROLES = ("input", "parameters")
OUTPUT_ROLES = ("output", "parameters_grad")
UNINITIALISED = ("empty", "empty_like", "new_empty", "empty_strided")
RECEIVE_BUFFER = ("Distributed.recv", "Distributed.irecv")
_NON_FINITE_TEXT = {"nan", "inf", "-inf", "infinity", "-infinity"}


def non_finite(value: Any) -> str | None:
    """``"nan"``, ``"inf"`` or ``"-inf"`` for such a number (or msprobe's text for it), else ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str) and value.strip().lower() in _NON_FINITE_TEXT:
        text = value.strip().lower()
        return text.replace("infinity", "inf")
    return None


def leaf_anomaly(leaf: TensorMeta) -> str | None:
    """What a leaf holds that is not finite (``"nan"``, ``"inf"``, ``"-inf"``, ``"inf/-inf"``), else ``None``.

    Tensors: their Max and Min; plain values: the value itself.
    """
    found = [kind for kind in (non_finite(leaf.max), non_finite(leaf.min)) if kind] if leaf.is_tensor \
        else [kind for kind in (non_finite(leaf.value),) if kind]
    if not found:
        return None
    return "nan" if "nan" in found else "/".join(dict.fromkeys(found))


@dataclass(frozen=True)
class Finding:
    """The first NaN/Inf of one rank at one step."""

    step: int | None
    rank: int
    entry: DumpEntry
    kind: str  # PRODUCED, RECEIVED or INHERITED
    tensors: tuple[str, ...]  # "output.0: inf", ...
    phase: str  # BEFORE, DURING or AFTER communication; NO_COMMUNICATION on a rank that makes none
    communication: str = ""  # the communication entry it is before / in / after

    @property
    def where(self) -> str:
        """``before Distributed.all_reduce.0.forward``, ``during communication``, ``after ...`` or
        ``no communication``."""
        if self.phase in (BEFORE, AFTER):
            return f"{self.phase} {self.communication}"
        return "during communication" if self.phase == DURING else "no communication"

    def anomaly(self) -> RankAnomaly:
        return RankAnomaly(self.rank, self.entry.index, self.entry.name, self.kind == RECEIVED, self)


@dataclass
class RankScan:
    """One rank dump read through: its communication entries and its first NaN/Inf (if any)."""

    dump: RankDump
    rank: int
    entries: int = 0
    communications: list[int] = field(default_factory=list)
    communication_names: list[str] = field(default_factory=list)
    first: Finding | None = None


def _uninitialised(entry: DumpEntry) -> bool:
    parsed = entry.parsed
    return parsed.kind == "api" and parsed.base.rsplit(".", 1)[-1] in UNINITIALISED


def _short_name(leaf: TensorMeta, entry: str) -> str:
    return leaf.name[len(entry) + 1:] if leaf.name.startswith(entry + ".") else leaf.name


def _classify(entry: DumpEntry) -> tuple[list[str], list[str], bool]:
    """(anomalous inputs, anomalous outputs, NaN/Inf given as a plain argument) of one entry."""
    bad_in, bad_out, deliberate = [], [], False
    skip_inputs = entry.parsed.base in RECEIVE_BUFFER
    for leaf in entry.leaves():
        kind = leaf_anomaly(leaf)
        if kind is None:
            continue
        text = f"{_short_name(leaf, entry.name)}: {kind}"
        if leaf.role in OUTPUT_ROLES:
            bad_out.append(text)
        elif leaf.role in INPUT_ROLES and not skip_inputs:
            if leaf.is_tensor:
                bad_in.append(text)
            else:
                deliberate = True
    return bad_in, bad_out, deliberate


def _where(scan: RankScan, index: int, received: bool) -> tuple[str, str]:
    """(phase, communication entry) of the entry at ``index``."""
    names = scan.communication_names
    if received:
        return DURING, names[scan.communications.index(index)]
    if not names:
        return NO_COMMUNICATION, ""
    before = bisect_left(scan.communications, index)
    return (BEFORE, names[before]) if before < len(names) else (AFTER, names[-1])


def scan_rank(dump: RankDump, rank: int) -> RankScan:
    """Read ``dump`` once (streamed) and find its first NaN/Inf."""
    scan = RankScan(dump, rank)
    seen_any = False  # some entry already showed NaN/Inf (even one not counted)
    pending: tuple[DumpEntry, str, list[str]] | None = None
    for entry in dump.entries():
        scan.entries += 1
        communication = is_communication(entry.name)
        if communication:
            scan.communications.append(entry.index)
            scan.communication_names.append(entry.name)
        if pending is not None:
            continue  # found: read on only for the communication entries
        bad_in, bad_out, deliberate = _classify(entry)
        if deliberate or _uninitialised(entry):
            seen_any = seen_any or bool(bad_in or bad_out)
            continue
        if bad_out and not bad_in:
            pending = (entry, RECEIVED if communication else PRODUCED, bad_out)
        elif bad_in and not seen_any:
            pending = (entry, INHERITED, bad_in)
        seen_any = seen_any or bool(bad_in or bad_out)
    if pending is not None:
        entry, kind, tensors = pending
        scan.first = Finding(dump.step, rank, entry, kind, tuple(tensors),
                             *_where(scan, entry.index, kind == RECEIVED))
    return scan

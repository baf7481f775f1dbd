"""``probe monitor compare A B -o OUT --summary-only --incremental``: a check after every step of two runs that costs
the new steps' rows only.

``OUT/incremental_state.json`` keeps what the compare has judged: the last step judged, each quantity's noise (the
largest difference it showed at the steps judged, while no row parted), the first divergence once found, the counts
summary.json gives, and for each CSV still written to how far it was read (its byte offsets, lines, record order, the
decimals its values are written with, a digest of the bytes before the offset); the files judged whole that a newer
file of their quantity follows (the writer has moved on) are kept as one digest a quantity (names, sizes, times), so
the state does not grow with the steps. The next call reads each file on from there and
judges the steps up to the last one **both** outputs hold (the newest step in their files' names, ``{tag}_{first}-
{last}.csv``): rows of later steps (a run ahead, or one that has ended) are left for the calls after. So the verdict
is the one a full compare gives of the steps judged, the steps before being final.

The state is a cache, never trusted blindly: another A, B, rank folder, ``--rank``, ``--rtol`` or ``--noise-factor``;
a CSV gone, shorter or changed in what was read (a file left behind: its name, size or time); new rows of a step already judged; or new values written with more
decimals (which changes the rounding the compare allows every row of their file) make the call start over from step
0, reading everything as a full compare does, and summary.json's ``incremental.started_over`` says why.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_core.api import CompareError, writing
from probe_monitor.compare.diff import Comparison, compare_runs, unmatched_json
from probe_monitor.compare.reader import FILE, FIXED, add_grad_norm, check_fields, check_header, decimals, row_of
from probe_monitor.compare.report import (NON_FINITE_LISTED, SUMMARY_NAME, at_first_step, finding, first_json,
                                          nothing_in_common)
from probe_monitor.compare.tail import records, tail_digest
from probe_monitor.records import Row

STATE_NAME = "incremental_state.json"
VERSION = 1
SIDES = ("a", "b")


class StartOver(Exception):
    """The state does not hold for the outputs as they are now (the message says why)."""


@dataclass
class Cursor:
    """How far one CSV was read: ``scanned`` (for its decimals) and ``consumed`` (rows judged) are byte offsets."""

    size: int = 0
    mtime_ns: int = 0
    header: list[str] | None = None
    places: int = 0
    data_rows: int = 0
    scanned: int = 0
    scanned_line: int = 0
    consumed: int = 0
    consumed_line: int = 0
    order: int = 0
    digest: str = ""


@dataclass
class Closed:
    """The files of one quantity that its writer has left for a later one (each judged whole): those of first step
    below ``before``, known by a digest of their names, sizes and times."""

    before: int = 0
    digest: str = ""
    rows: int = 0


@dataclass
class Folder:
    """One rank folder of one output: a cursor for each file still written to, and the files left behind."""

    open: dict[str, Cursor] = field(default_factory=dict)  # file name -> its cursor
    closed: dict[str, Closed] = field(default_factory=dict)  # quantity -> its files left behind

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Folder:
        return cls({name: Cursor(**c) for name, c in data["open"].items()},
                   {tag: Closed(**c) for tag, c in data["closed"].items()})

    def as_json(self) -> dict[str, Any]:
        return {"open": {name: vars(c) for name, c in self.open.items()},
                "closed": {tag: vars(c) for tag, c in self.closed.items()}}


@dataclass
class Unmatched:
    rows: int = 0
    steps: list[int] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    quantities: list[str] = field(default_factory=list)
    statistics: list[str] = field(default_factory=list)

    def add(self, found: Any) -> None:
        self.rows += len(found.rows)
        for mine, new in ((self.steps, {row.step for _, row in found.rows}), (self.ranks, {r for r, _ in found.rows}),
                          (self.quantities, {row.tag for _, row in found.rows}), (self.statistics, found.statistics)):
            mine += sorted(set(new) - set(mine))

    def as_json(self) -> dict[str, Any]:
        return unmatched_json(self.rows, set(self.steps), set(self.ranks), set(self.quantities), set(self.statistics))


@dataclass
class State:
    identity: dict[str, Any]
    judged: int = -1
    noise: dict[str, float] = field(default_factory=dict)
    first: dict[str, Any] | None = None
    at_first_step: list[dict[str, Any]] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    rows: int = 0
    steps: list[int] = field(default_factory=list)  # the first and last step compared
    only: dict[str, Unmatched] = field(default_factory=lambda: {side: Unmatched() for side in SIDES})
    no_common_statistic: int = 0
    nan_inf_rows: int = 0
    nan_inf_first: list[dict[str, Any]] = field(default_factory=list)
    folders: dict[str, dict[str, Folder]] = field(default_factory=dict)  # side -> rank -> what was read there

    @classmethod
    def load(cls, path: Path, identity: dict[str, Any]) -> tuple[State, str | None]:
        """The state in ``path`` if it was made for ``identity``; else a fresh one and why the old one is not used."""
        if not path.exists():
            return cls(identity), None
        try:
            data = json.loads(path.read_text())
            if data.pop("version", None) != VERSION:
                raise ValueError("another version of probe wrote it")
            state = cls(**data)
            state.only = {side: Unmatched(**state.only[side]) for side in SIDES}
            state.folders = {side: {rank: Folder.from_json(folder) for rank, folder in ranks.items()}
                             for side, ranks in state.folders.items()}
        except (OSError, ValueError, TypeError, KeyError) as exc:
            return cls(identity), f"{path}: unreadable ({exc})"
        if state.identity != identity:
            changed = ", ".join(key for key in identity if identity[key] != state.identity.get(key))
            return cls(identity), f"{path} was made for other inputs ({changed} differ)"
        return state, None

    def save(self, path: Path) -> None:
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        data = vars(self) | {"only": {side: vars(found) for side, found in self.only.items()},
                             "folders": {side: {rank: folder.as_json() for rank, folder in ranks.items()}
                                         for side, ranks in self.folders.items()}}
        partial.write_text(json.dumps({"version": VERSION, **data}))  # (dataclasses.asdict deep-copies: slow)
        os.replace(partial, path)


def identity_of(args: Any, chosen: list[dict[int, Path]]) -> dict[str, Any]:
    """What a state is valid for: the two outputs, their rank folders and the options that change a verdict."""
    return {"a": str(Path(args.a).absolute()), "b": str(Path(args.b).absolute()),
            "folders": [{str(rank): str(folder.absolute()) for rank, folder in sorted(side.items())}
                        for side in chosen],
            "rank": args.rank, "rtol": args.rtol, "noise_factor": args.noise_factor}


def compare_incremental(args: Any, out: Path, chosen: list[dict[int, Path]]) -> dict[str, Any]:
    """Judge the steps not judged yet, write summary.json and the state; the summary."""
    path = out / STATE_NAME
    identity = identity_of(args, chosen)
    state, started_over = State.load(path, identity)
    first_new = state.judged + 1
    try:
        last = _advance(state, chosen, args)
    except StartOver as why:
        state, started_over, first_new = State(identity), str(why), 0
        last = _advance(state, chosen, args)
    if not state.rows:
        raise CompareError(nothing_in_common(_unmatched(state), (args.a, args.b)))
    summary = _summary(state, (args.a, args.b), args) | {
        "incremental": {"state": str(path), "judged": [first_new, last] if last >= first_new else [],
                        "started_over": started_over}}
    with writing(f"the monitor compare results in {out}"):
        (out / SUMMARY_NAME).write_text(json.dumps(summary, indent=1, allow_nan=False))
        state.save(path)
    return summary


def _advance(state: State, chosen: list[dict[int, Path]], args: Any) -> int:
    """Read what is new, judge the steps up to the last one both outputs hold; that step."""
    files = [{rank: _open_files(state, side, rank, folder) for rank, folder in sorted(folders.items())}
             for side, folders in zip(SIDES, chosen)]
    last = min(max((int(FILE.match(entry.name)["last"]) for found in side.values() for entry, _ in found),
                   default=-1) for side in files)
    sides = [{rank: [row for entry, cursor in found for row in _read(state, entry, cursor, last)]
              for rank, found in side.items()} for side in files]
    with_norm = [any(FILE.match(entry.name)["tag"] == "grad_norm" and cursor.data_rows for found in side.values()
                     for entry, cursor in found)
                 or any(folder.closed.get("grad_norm", Closed()).rows for folder in state.folders[name].values())
                 for name, side in zip(SIDES, files)]
    for side, has in zip(sides, with_norm):
        if any(with_norm) and not has:
            add_grad_norm(side)
    comparison = compare_runs(*sides, rtol=args.rtol, noise_factor=args.noise_factor, noise_before=state.noise)
    _take(state, comparison)
    state.judged = max(state.judged, last)
    for name, side in zip(SIDES, files):
        for rank, found in side.items():
            _leave_behind(state.folders[name][str(rank)], found)
    return last


def _first(entry: os.DirEntry) -> int:
    return int(FILE.match(entry.name)["first"])


def _stamp(entries: list[os.DirEntry], start: str = "0") -> str:
    """What tells files left behind from others: their names, sizes and modification times, each hashed, the hashes
    combined whatever their order (``start``: the combination of files left behind before)."""
    combined = int(start, 16)
    for entry in entries:
        info = entry.stat()
        combined ^= int(hashlib.sha1(f"{entry.name}\0{info.st_size}\0{info.st_mtime_ns}".encode()).hexdigest(), 16)
    return f"{combined:x}"


def _open_files(state: State, side: str, rank: int, folder: Path) -> list[tuple[os.DirEntry, Cursor]]:
    """The CSVs of a rank folder still written to, in name order (as a full compare reads them), each with its cursor
    and scanned to its end; the files left behind checked unchanged."""
    known = state.folders.setdefault(side, {}).setdefault(str(rank), Folder())
    try:
        entries = sorted((entry for entry in os.scandir(folder) if FILE.match(entry.name)), key=lambda e: e.name)
    except OSError as exc:
        raise CompareError(f"{folder}: cannot be listed ({exc.strerror or exc}); pass a folder you can "
                           "read") from None
    for tag, closed in known.closed.items():
        behind = [e for e in entries if FILE.match(e.name)["tag"] == tag and _first(e) < closed.before]
        if _stamp(behind) != closed.digest:
            raise StartOver(f"{folder}: the {tag} files of steps before {closed.before} changed since they were "
                            "judged (one gone, new or rewritten)")
    entries = [e for e in entries if _first(e) >= known.closed.get(FILE.match(e.name)["tag"], Closed()).before]
    gone = [name for name in known.open if name not in {entry.name for entry in entries}]
    for entry in entries:
        if entry.name not in known.open:  # new, or the writer renamed it as it grew (tag_0-3.csv: tag_0-4.csv)
            window = entry.name.rsplit("-", 1)[0]
            renamed = next((name for name in gone if name.rsplit("-", 1)[0] == window), None)
            if renamed is None and _first(entry) <= state.judged:
                raise StartOver(f"{folder / entry.name}: a new file of steps already judged")
            known.open[entry.name] = known.open.pop(renamed) if renamed else Cursor()
            gone = [name for name in gone if name != renamed]
    if gone:
        raise StartOver(f"{folder / gone[0]}: gone since it was read")
    return [(entry, _scan(known.open[entry.name], entry)) for entry in entries]


def _leave_behind(folder: Folder, found: list[tuple[os.DirEntry, Cursor]]) -> None:
    """The files of a quantity judged whole that a newer file of it follows (its writer has moved on) leave their
    cursors for the quantity's digest, so the state stays small however many steps the runs go."""
    by_tag: dict[str, list[tuple[os.DirEntry, Cursor]]] = {}
    for entry, cursor in sorted(found, key=lambda item: _first(item[0])):
        by_tag.setdefault(FILE.match(entry.name)["tag"], []).append((entry, cursor))
    for tag, files in by_tag.items():
        whole = 0
        while whole < len(files) - 1 and files[whole][1].consumed == files[whole][1].scanned == files[whole][1].size:
            whole += 1
        if whole:
            left = [entry for entry, _ in files[:whole]]
            closed = folder.closed.setdefault(tag, Closed())
            closed.before, closed.digest = _first(files[whole][0]), _stamp(left, closed.digest or "0")
            closed.rows += sum(cursor.data_rows for _, cursor in files[:whole])
            for entry in left:
                del folder.open[entry.name]


def _scan(cursor: Cursor, entry: os.DirEntry) -> Cursor:
    """Read the bytes of a CSV not seen yet for the decimals its values are written with (a full compare's rounding
    allowance takes the whole file's) and check each line's fields."""
    info = entry.stat()
    if (info.st_size, info.st_mtime_ns) == (cursor.size, cursor.mtime_ns):
        return cursor
    path = Path(entry.path)
    rewritten = info.st_size <= cursor.size if cursor.scanned else False  # a writer only appends
    if rewritten or cursor.scanned and tail_digest(path, cursor.scanned) != cursor.digest:
        raise StartOver(f"{path}: changed in what was read before")
    places = cursor.places
    for line, fields, end in records(path, cursor.scanned, cursor.scanned_line):
        if cursor.header is None:
            check_header(path, fields)
            cursor.header, cursor.consumed, cursor.consumed_line = fields, end, line
        else:
            check_fields(path, line, fields, cursor.header)
            places = max([places, *(decimals(value) for op, value in zip(cursor.header, fields) if op not in FIXED)])
            cursor.data_rows += 1
        cursor.scanned, cursor.scanned_line = end, line
    if cursor.header is None:
        check_header(path, None)
    if places > cursor.places and cursor.order:
        raise StartOver(f"{path}: its new rows are written with more decimals, which changes the rounding allowed "
                        "to the rows judged before")
    cursor.places, cursor.size, cursor.mtime_ns = places, info.st_size, info.st_mtime_ns
    cursor.digest = tail_digest(path, cursor.scanned)
    return cursor


def _read(state: State, entry: os.DirEntry, cursor: Cursor, last: int) -> list[tuple[int, Row]]:
    """The rows of a CSV not judged yet, up to step ``last``, with their record order in the file."""
    if cursor.consumed >= cursor.scanned:
        return []
    path = Path(entry.path)
    ops = check_header(path, cursor.header)
    resolution = 0.5 * 10.0 ** -cursor.places if cursor.places else 0.0
    tag, rows = FILE.match(path.name)["tag"], []
    for line, fields, end in records(path, cursor.consumed, cursor.consumed_line):
        if end > cursor.scanned:
            break  # written since the scan: the next call's
        row = row_of(path, line, tag, dict(zip(cursor.header, fields)), ops, resolution)
        if row.step > last:
            break
        if 0 <= row.step <= state.judged:
            raise StartOver(f"{path}: line {line}: a new row of step {row.step}, already judged")
        rows.append((cursor.order, row))
        cursor.order, cursor.consumed, cursor.consumed_line = cursor.order + 1, end, line
    return rows


def _take(state: State, comparison: Comparison) -> None:
    """Add the new steps' comparison to what was judged."""
    state.ranks = comparison.ranks
    if comparison.pairs:  # sorted by step
        state.steps = [(state.steps or [comparison.pairs[0].a.step])[0], comparison.pairs[-1].a.step]
    state.rows += len(comparison.pairs)
    state.only["a"].add(comparison.only_a)
    state.only["b"].add(comparison.only_b)
    state.no_common_statistic += comparison.no_common_statistic
    non_finite = comparison.non_finite
    state.nan_inf_rows += len(non_finite)
    state.nan_inf_first += [finding(p) for p in non_finite[:NON_FINITE_LISTED - len(state.nan_inf_first)]]
    if state.first is None:
        state.noise = comparison.noise
        if comparison.first is not None:
            state.first, state.at_first_step = first_json(comparison), at_first_step(comparison)


def _unmatched(state: State) -> dict[str, Any]:
    return {"only_in_a": state.only["a"].as_json(), "only_in_b": state.only["b"].as_json(),
            "rows_without_a_common_statistic": state.no_common_statistic}


def _summary(state: State, labels: tuple[str, str], args: Any) -> dict[str, Any]:
    """summary.json as ``--summary-only`` writes it (report.write_report's keys), of the steps judged so far."""
    a, b = state.only["a"], state.only["b"]
    complete = not (a.rows or b.rows or a.statistics or b.statistics or state.no_common_statistic)
    return {"a": labels[0], "b": labels[1], "ranks": state.ranks, "steps": state.steps, "rows": state.rows,
            "only_in_a": a.rows, "only_in_b": b.rows, "complete": complete, "unmatched": _unmatched(state),
            "rtol": args.rtol, "noise_factor": args.noise_factor, "first_divergence": state.first,
            "nan_inf": {"rows": state.nan_inf_rows, "first": state.nan_inf_first},
            "quantities_at_first_step": state.at_first_step, "csv": None, "xlsx": None, "plot": None}


def incremental_headline(summary: dict[str, Any]) -> str:
    """One line: the steps judged by this call and the verdict so far."""
    judged, first = summary["incremental"]["judged"], summary["first_divergence"]
    new = f"judged steps {judged[0]}-{judged[1]}" if judged else "no new step to judge"
    again = f" (started over: {summary['incremental']['started_over']})" if summary["incremental"]["started_over"] \
        else ""
    verdict = (f"the runs part at step {first['step']}, rank {first['rank']}: {first['quantity']} of {first['name']}"
               if first else f"no divergence in {summary['rows']} rows")
    return f"probe monitor compare --incremental: {new}{again}; {verdict}"

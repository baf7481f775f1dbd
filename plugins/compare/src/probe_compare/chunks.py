"""The entries of one rank pair compared a chunk at a time, in this process or in ``--workers`` processes.

A :class:`ChunkJob` holds what every chunk needs (both dumps, the data mode, the comparators, the name map,
the columnar path, the result columns). Each chunk's plain entries take the columnar path and are rendered
together; the others are compared on the row path (:func:`~probe_compare.entries.compare_entry`) and
rendered one by one. With ``--workers`` the job is handed to forked processes: :data:`_FORKED` is set just
before the pool starts and read by :func:`_compare_forked` in the children.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from probe_compare import output
from probe_compare.columnar import ColumnarCompare, Plain
from probe_compare.comparator import LoadedComparator
from probe_compare.entries import EntryOutcome, compare_entry
from probe_compare.judge import EntryFacts, plain_facts
from probe_compare.mapping import NameMap
from probe_compare.match import Match, Matcher
from probe_compare.render import render_plains, render_rows
from probe_compare.rules import PASS
from probe_core.api import DataMode, DumpEntry, EntryRef, RankDump

CHUNK_ENTRIES = 1024  # entries compared at once: numpy's per-call cost spread over more rows (256: 3% slower)


@dataclass(slots=True)
class PlainRun:
    """Plain entries next to each other in a chunk, when the CSV alone is written: every row passes. Per entry:
    its facts, its rows' CSV text and their number. The spool keeps a run as one item, and
    :func:`~probe_compare.rank.write_rank` writes it at once unless the job's verdicts name one of its
    entries."""

    facts: list[EntryFacts]
    texts: list[str]
    rows: list[int]


Outcome = EntryOutcome | PlainRun


@dataclass
class ChunkJob:
    """One rank pair's compare, as each chunk of entries needs it."""

    target: RankDump
    bench: RankDump
    mode: DataMode
    comparators: list[LoadedComparator]
    columnar: ColumnarCompare
    columns: list[str]
    percent: frozenset[str]
    name_map: NameMap | None
    rules: str
    lenient: bool
    xlsx: bool

    @property
    def result_at(self) -> int:
        return self.columns.index("Result")

    def finish(self, npu: DumpEntry | None, bench: DumpEntry | EntryRef | None,
               plain: Plain | None = None) -> EntryOutcome:
        """Compare one entry pair; on the row path, render its rows too (the outcome keeps rows, not objects).
        ``plain``: the columnar path's rows of the pair (``bench`` then its ref), which :meth:`finish_chunk`
        renders with the chunk's other plain entries."""
        if plain is not None:  # a plain entry: npu and bench are both there
            facts = plain_facts(npu.index, npu.parent, plain, self.mode)  # type: ignore[union-attr]
            return EntryOutcome(npu.name, npu.index, PASS, [], None, None, facts)  # type: ignore[union-attr]
        outcome = compare_entry(npu, bench, self.mode, self.comparators, self.lenient,  # type: ignore[arg-type]
                                self.name_map, self.columnar.postprocess, self.rules)
        outcome.rendered = list(render_rows(outcome, self.columns, self.percent))
        outcome.rows = []
        outcome.npu_entry = _light(outcome.npu_entry)
        outcome.bench_entry = _light(outcome.bench_entry)
        return outcome

    def finish_chunk(self, pairs: Sequence[tuple[DumpEntry | None, EntryRef | None]]) -> list[Outcome]:
        """Compare a chunk of (target entry, bench ref) pairs: the plain ones as columns (their rows rendered
        together; when the CSV alone is written, each run of them is one :class:`PlainRun`), the others row by
        row (their bench entry loaded by its span)."""
        found = self.columnar.compare(pairs)
        shown = [(npu, plain) for (npu, _), plain in zip(pairs, found) if plain is not None]
        text = not self.xlsx
        rendered = iter(render_plains(shown, self.columns, self.percent, text))  # type: ignore[arg-type]
        outcomes: list[Outcome] = []
        run: PlainRun | None = None
        for (npu, ref), plain in zip(pairs, found):
            if plain is None:
                run = None
                outcomes.append(self.finish(self.target.loaded(npu) if npu is not None else None,
                                            self.bench.load(ref) if ref is not None else None))
                continue
            if not text:
                outcome = self.finish(npu, ref, plain)
                outcome.rendered = next(rendered)
                outcomes.append(outcome)
                continue
            if run is None:
                run = PlainRun([], [], [])
                outcomes.append(run)
            run.facts.append(plain_facts(npu.index, npu.parent, plain, self.mode))  # type: ignore[union-attr]
            run.texts.append(next(rendered))
            run.rows.append(plain.count)
        return self.spoolable(outcomes)

    def spoolable(self, outcomes: list[Outcome]) -> list[Outcome]:
        """Note each row's result; when the CSV alone is written, format the rows here (in the worker process,
        with ``--workers``): the spool keeps the text."""
        at = self.result_at
        rendered = [outcome for outcome in outcomes if type(outcome) is EntryOutcome and outcome.text is None]
        for outcome in rendered:
            outcome.results = tuple(row[at] for row in outcome.rendered)
        if not self.xlsx:
            for outcome, text in zip(rendered, output.csv_texts([o.rendered for o in rendered])):
                outcome.text, outcome.rendered = text, []
        return outcomes

    def compare_matches(self, chunk: Sequence[Match]) -> list[Outcome]:
        return self.finish_chunk([(self.target.load(m.target) if m.target is not None else None, m.bench)
                                  for m in chunk])

    def stream(self, matcher: Matcher) -> Iterator[Outcome]:
        """One process: stream the target once, a chunk at a time, with each entry's bench partner's ref."""
        chunk: list[tuple[DumpEntry | None, EntryRef | None]] = []
        for entry in self.columnar.entries(self.target):
            chunk.append((entry, matcher.match(entry.name)))
            if len(chunk) >= CHUNK_ENTRIES:
                yield from self.finish_chunk(chunk)
                chunk = []
        yield from self.finish_chunk(chunk)
        yield from self.spoolable([self.finish(None, self.bench.load(ref)) for ref in matcher.unmatched_bench()])

    def in_processes(self, matches: Sequence[Match], workers: int) -> Iterator[Outcome]:
        """The matched pairs' outcomes in order, computed by ``workers`` forked processes (here with one)."""
        chunks = _chunks(matches, CHUNK_ENTRIES)
        if workers <= 1 or len(matches) <= CHUNK_ENTRIES:
            for chunk in chunks:
                yield from self.compare_matches(chunk)
            return
        global _FORKED
        self.target.close()  # children open their own handles
        self.bench.close()
        _FORKED = self
        try:
            import multiprocessing  # only here: a command's start does not pay for it
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
                pending: deque = deque()
                for chunk in chunks:  # a bounded window of chunks in flight keeps memory bounded
                    pending.append(pool.submit(_compare_forked, chunk))
                    if len(pending) >= 4 * workers:
                        yield from pending.popleft().result()
                while pending:
                    yield from pending.popleft().result()
        finally:
            _FORKED = None


#: the job the forked ``--workers`` processes inherit (set only while their pool runs)
_FORKED: ChunkJob | None = None


def _compare_forked(chunk: Sequence[Match]) -> list[Outcome]:
    assert _FORKED is not None, "a compare worker started without its job"
    return _FORKED.compare_matches(chunk)


def _light(entry: DumpEntry | None) -> DumpEntry | None:
    """Drop the raw data and dump handle before an entry crosses a process boundary."""
    if entry is None:
        return None
    return DumpEntry(entry.name, entry.index, None, entry.parent, entry.stack, None)


def _chunks(items: Sequence[Match], size: int) -> Iterator[Sequence[Match]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


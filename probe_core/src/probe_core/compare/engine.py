"""Run a compare: pair rank dumps, match entries, compare leaves, judge, write.

:func:`run_compare` is what ``probe compare`` calls; :func:`compare_entry`
compares one matched entry (usable on its own, e.g. by ``probe graph``).
Memory stays bounded: both dumps are indexed (names and byte spans), then
entries are loaded one at a time in the target's execution order and rows
stream to the CSV/XLSX writers.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Any

from probe_core.compare import output
from probe_core.compare.columnar import ColumnarCompare, Plain, Rows
from probe_core.compare.comparator import LeafPair, LoadedComparator, known_modes, load_comparators
from probe_core.compare.mapping import (NameMap, builtin_map, consistent_check_map, load_api_mapping,
                                       load_cell_mapping, load_data_mapping, load_mapping)
from probe_core.compare.postprocess import load_postprocess
from probe_core.compare.judge import EntryFacts, Finding, NoiseReference, entry_facts, plain_facts
from probe_core.compare.match import Match, Matcher, match_entries
from probe_core.compare.rules import ERROR, PASS, UNMATCHED, WARNING, RowResult, judge_entry, worst
from probe_core.compare.verdicts import JobAnswer, StepFacts, first_of_job, judge_job
from probe_core.dump import DumpEntry, EntryRef, RankDump, TensorMeta, discover
from probe_core.dump.order import is_communication
from probe_core.errors import CompareError, DumpError, ProbeError
from probe_core.fastjson import float_texts
from probe_core.executor import ExecutorChoice, RegistryRef, job_executor, registry_of, registry_ref, run_jobs
from probe_core.gcpause import collector_paused
from probe_core.modes import DataMode, common_mode
from probe_core.outputs import output_folder, writing

CHUNK_ENTRIES = 1024  # entries compared at once: numpy's per-call cost spread over more rows (256: 3% slower)


@dataclass
class CompareOptions:
    """Everything ``probe compare`` was asked to do."""

    target: Path
    bench: Path
    output: Path
    fuzzy: bool = False
    mapping: Path | bool | None = None  # -lm/--mapping YAML, or True: the built-in tables only
    ranks: Sequence[int] | None = None
    steps: Sequence[int] | None = None
    workers: int = 1
    lenient: bool = False
    xlsx: bool = False
    progress: bool = True
    stamp: str = ""  # the 14-digit time in the result file names (set by run_compare)
    step_folders: bool = False  # results of several steps go to OUT/step{N}/ (set by run_compare)
    data_mapping: Path | None = None
    cell_mapping: Path | bool | None = None
    api_mapping: Path | bool | None = None
    tensor_log: bool = False  # -tensor_log: one line per compared entry
    diff_analyze: bool = False  # -da: diff_analyze_{ns}.json with each rank's first divergent entry
    postprocess: Path | None = None  # --config: tensor post-process YAML
    consistent_backend: str | None = None  # --consistent_check [--backend]: "fsdp", "megatron" or "any"
    rules: str = "noise"  # --rules: the noise-aware judge, or "msprobe" (its legend's Result column)
    noise_reference: tuple[Path, Path] | None = None  # --noise-reference: a benign (target, bench) pair
    executor: str = "local"  # --executor: where the rank jobs run (probe_core.executor)
    scheduler: str | None = None  # --scheduler: the Dask scheduler's address


@dataclass
class EntryOutcome:
    """The compared rows of one entry (or of one unmatched entry)."""

    name: str
    index: int
    result: str
    rows: list[RowResult]
    npu_entry: DumpEntry | None = None  # the row path's (a plain entry's rows need none)
    bench_entry: DumpEntry | None = None
    facts: EntryFacts | None = None
    rendered: list[list[Any]] = field(default_factory=list)
    results: tuple[str, ...] = ()  # each rendered row's result
    text: str | None = None  # the rendered rows as CSV text (when the CSV alone is written), ``rendered`` then empty


@dataclass(slots=True)
class PlainRun:
    """Plain entries next to each other in a chunk, when the CSV alone is written: every row passes. Per entry:
    its facts, its rows' CSV text and their number. The spool keeps a run as one item, and :func:`write_rank`
    writes it at once unless the job's verdicts name one of its entries."""

    facts: list[EntryFacts]
    texts: list[str]
    rows: list[int]


@dataclass
class RankResult:
    label: str
    counts: dict[str, int]
    row_counts: dict[str, int]
    unmatched: dict[str, list[str]]
    first_divergence: dict[str, Any] | None
    csv: str
    xlsx: str | None
    target: str
    bench: str
    errors: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)  # dumps of an interrupted step (header "partial": true)
    step: int = 0  # the (step, rank) and data mode the job's summary needs; not written per rank
    rank_id: int = 0
    mode: str = ""


# -- one entry ---------------------------------------------------------------------


def _pair_leaves(npu: DumpEntry | None, bench: DumpEntry | None,
                 name_map: NameMap | None = None) -> list[tuple[TensorMeta | None, TensorMeta | None]]:
    npu_leaves = npu.leaves() if npu else []
    bench_leaves = bench.leaves() if bench else []
    if npu is None or bench is None:
        return [(leaf, None) for leaf in npu_leaves] + [(None, leaf) for leaf in bench_leaves]
    cut_n, cut_b = len(npu.name), len(bench.name)
    by_suffix = {leaf.name[cut_b:]: leaf for leaf in bench_leaves}
    pairs, used = [], set()
    for leaf in npu_leaves:
        suffix = leaf.name[cut_n:]
        if name_map is not None:  # parameter names (gamma -> weight), -am argument maps, -dm tensor names
            suffix = name_map.tensor_suffix(npu.name, bench.name, suffix)
        other = by_suffix.get(suffix) if suffix is not None and suffix not in used else None
        if other is not None:
            used.add(suffix)
        pairs.append((leaf, other))
    pairs.extend((None, leaf) for leaf in bench_leaves if leaf.name[cut_b:] not in used)
    return pairs


def compare_entry(npu: DumpEntry | None, bench: DumpEntry | None, mode: DataMode,
                  comparators: Sequence[LoadedComparator], lenient: bool = False,
                  name_map: NameMap | None = None, postprocess: Any = None, rules: str = "noise") -> EntryOutcome:
    """Compare one matched entry (either side ``None`` for an unmatched one): metrics, the rules' verdicts
    and the facts the step's judge needs (:mod:`probe_core.compare.judge`).

    ``probe compare`` and ``probe graph`` both call it. ``name_map`` pairs tensors whose names differ
    (MindSpore ``gamma`` with PyTorch ``weight``, -am/-dm maps); ``postprocess`` is ``--config``'s tensor
    post-processing; ``rules`` is ``--rules``.
    """
    name = (npu or bench).name  # type: ignore[union-attr]
    index = npu.index if npu is not None else bench.index  # type: ignore[union-attr]
    rows = [RowResult(a, b) for a, b in _pair_leaves(npu, bench, name_map)]
    _check_leaves(rows, npu, bench, lenient)
    if npu is None or bench is None:
        side = "target" if bench is None else "bench"
        for row in rows:
            row.result = UNMATCHED
            row.messages = [f"Only in the {side} dump: no matching entry on the other side."]
        present = npu or bench
        key = index if npu is not None else -1 - index  # bench-only entries: their own key space
        facts = entry_facts(name, key, present.parent, UNMATCHED, rows, mode, side)  # type: ignore[union-attr]
        return EntryOutcome(name, index, UNMATCHED, rows, npu, bench, facts)
    for row in rows:
        if row.npu is None or row.bench is None:
            continue
        pair = LeafPair(name, row.npu, row.bench, mode.name, npu.tensor_path(row.npu), bench.tensor_path(row.bench),
                        postprocess=postprocess)
        for comp in comparators:
            try:
                values = comp.run(pair)
            except ProbeError as exc:
                if not lenient:
                    raise
                row.flag(ERROR, exc.messages[0])
                continue
            row.metrics.update(values or {})
    result = judge_entry(name, rows, mode, comparators, rules)
    facts = entry_facts(name, index, npu.parent, result, rows, mode, bench_name=bench.name)
    return EntryOutcome(name, index, result, rows, npu, bench, facts)


def _check_leaves(rows: list[RowResult], npu: DumpEntry | None, bench: DumpEntry | None, lenient: bool) -> None:
    """A leaf whose record is malformed (a statistic that is no number, a bad data_name) stops the compare
    with the file and key, or with ``lenient`` makes its row an error."""
    for row in rows:
        for leaf, entry in ((row.npu, npu), (row.bench, bench)):
            if leaf is None or leaf.problem is None:
                continue
            where = entry.dump.dump_file if entry is not None and entry.dump is not None else "dump.json"
            message = f"{where}: {leaf.name}: {leaf.problem}"
            if not lenient:
                raise DumpError(f"{message}; the dump is damaged or was edited: re-run the dump, or pass --lenient "
                                "to mark such rows as errors and go on")
            row.flag(ERROR, f"{message}.")


# -- rows -------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _layout(columns: tuple[str, ...]) -> tuple[tuple[str, ...], bool, bool, tuple[str, ...]]:
    """Split :func:`output.header`'s columns into (metric columns, has statistics, has Data_name, extras)."""
    metrics_end = columns.index("NPU max") if "NPU max" in columns else columns.index("Requires_grad Consistent")
    tail = columns.index(output.STACK) + 1
    has_data_name = tail < len(columns) and columns[tail] == output.DATA_NAME
    return (columns[len(output.BASIC_INFO):metrics_end], "NPU max" in columns, has_data_name,
            columns[tail + has_data_name:])


@lru_cache(maxsize=8)
def _metric_plan(metric_cols: tuple[str, ...], percent: frozenset[str]) -> tuple[tuple[str, bool], ...]:
    return tuple((col, col in percent) for col in metric_cols)


@lru_cache(maxsize=4096)
def _shape_text(shape: tuple[int, ...]) -> str:
    return str(list(shape))


def render_rows(outcome: EntryOutcome, columns: Sequence[str], percent: frozenset[str]) -> Iterator[list[Any]]:
    """The CSV/XLSX rows of one entry, values in ``columns`` order (``N/A`` for missing values)."""
    metric_cols, has_stats, has_data_name, extra_cols = _layout(tuple(columns))
    plan = _metric_plan(metric_cols, percent)
    stack_entry = outcome.npu_entry or outcome.bench_entry
    stack = str(list(stack_entry.stack)) if stack_entry is not None and stack_entry.stack else None
    na = output.NA
    no_stats = (None,) * 4
    for i, row in enumerate(outcome.rows):
        npu, bench, metrics = row.npu, row.bench, row.metrics
        if npu is not None:
            values = [npu.name, None, npu.dtype, None, None if npu.shape is None else _shape_text(npu.shape), None,
                      npu.requires_grad, None]
        else:
            values = [None] * 8
        if bench is not None:
            values[1], values[3], values[7] = bench.name, bench.dtype, bench.requires_grad
            values[5] = None if bench.shape is None else _shape_text(bench.shape)
        get = metrics.get
        for col, is_percent in plan:
            value = get(col)
            if is_percent and value.__class__ is float:
                value = "0%" if value == 0.0 else output.format_value(value, True)
            values.append(value)
        if has_stats:
            values += npu.stats if npu is not None else no_stats
            values += bench.stats if bench is not None else no_stats
        n_grad, b_grad = values[6], values[7]
        values += (None if n_grad is None or b_grad is None else n_grad == b_grad, row.result,
                   row.err_message or None, stack if i == 0 else None)
        if has_data_name:
            names = [leaf.data_name if leaf is not None else None for leaf in (npu, bench)]
            values.append(str([n or "-1" for n in names]))
        for col in extra_cols:
            value = get(col)
            values.append(output.format_value(value, True) if col in percent and type(value) is float else value)
        yield [na if v is None else v for v in values]


def render_plains(entries: Sequence[tuple[DumpEntry, Plain]], columns: Sequence[str], percent: frozenset[str],
                  text: bool) -> list[Any]:
    """:func:`render_rows` of entries the columnar path compared (every row passes; both sides of a row have
    the same dtype, shape and requires_grad; every statistic is a number), built a column at a time over all
    their rows. Per entry: its rows as the CSV holds them (``text``: what :func:`output.csv_texts` makes of
    them; the numbers' columns as :class:`output.Numbers`, written as the rows are joined, the cells from dtype
    to requires_grad kept per signature), or as value lists (for the XLSX)."""
    if not entries:
        return []
    metric_cols, has_stats, has_data_name, extra_cols = _layout(tuple(columns))
    na = output.NA
    plains = [plain for _, plain in entries]
    count = sum(plain.count for plain in plains)
    names = ([plain.name + suffix for plain in plains for suffix in plain.rows.suffixes],
             [plain.bench_name + suffix for plain in plains for suffix in plain.rows.suffixes])
    if text:
        cells: list[Any] = [*map(_csv_fields, names), [cell for plain in plains for cell in _kept_cells(plain.rows)]]
    else:
        dtypes = [dtype for plain in plains for dtype in plain.rows.dtypes]
        shapes = [_shape_text(shape) for plain in plains for shape in plain.rows.shapes]
        grads = [na if grad is None else grad for plain in plains for grad in plain.rows.grads]
        cells = [*names, dtypes, dtypes, shapes, shapes, grads, grads]
    metrics = _plain_columns(plains, count)
    for col in metric_cols:
        cells.append(_metric_cells(metrics.get(col), col in percent, True, text, count))
    if has_stats:
        for side in (0, 1):
            stats = list(chain.from_iterable(plain.stats[side] for plain in plains))
            if text:
                cells.append(output.Numbers(stats, 4))
            else:
                cells += [stats[k::4] for k in range(4)]
    stacks: list[Any] = []
    for npu, plain in entries:
        stacks.append(_stack_cell(npu.stack, text) if npu.stack else na)
        stacks += [na] * (plain.count - 1)
    if text:
        cells += [[cell for plain in plains for cell in _kept_cells(plain.rows, True)], stacks]
    else:
        cells += [[na if grad is na else True for grad in grads], [PASS] * count, [na] * count, stacks]
    if has_data_name:
        data_name = str(["-1", "-1"])
        cells.append([output.csv_field(data_name) if text else data_name] * count)
    for col in extra_cols:
        cells.append(_metric_cells(metrics.get(col), col in percent, False, text, count))
    if text:
        return output.join_rows(cells, [plain.count for plain in plains])
    out, end = [], 0
    rows = list(map(list, zip(*cells)))
    for plain in plains:
        start, end = end, end + plain.count
        out.append(rows[start:end])
    return out


def _kept_cells(rows: Rows, tail: bool = False) -> tuple[str, ...]:
    """CSV text of each row of a signature: the cells from NPU Dtype to Bench Requires_grad, or (``tail``)
    those from Requires_grad Consistent to Err_message (a plain row passes), kept with the rows."""
    if rows.text is None:
        na = output.NA
        middle, end = [], []
        for dtype, shape, grad in zip(rows.dtypes, rows.shapes, rows.grads):
            dtype_cell, shape_cell = _text_field(dtype), _shape_field(shape)
            grad_cell = na if grad is None else str(grad)
            middle.append(",".join((dtype_cell, dtype_cell, shape_cell, shape_cell, grad_cell, grad_cell)))
            end.append(",".join((na if grad is None else "True", PASS, na)))
        rows.text = (tuple(middle), tuple(end))
    return rows.text[tail]


def _plain_columns(plains: Sequence[Plain], count: int) -> Mapping[str, Sequence[Any]]:
    """The metric columns of the rows of ``plains`` by name (one compare: every Plain has the same names):
    their chunk's own when they are all of its rows, in order."""
    chunk = plains[0].chunk
    if len(chunk.errs) == count and all(plain.chunk is chunk for plain in plains):
        return chunk.columns
    return {col: [value for plain in plains
                  for value in plain.chunk.columns[col][plain.start:plain.start + plain.count]]
            for col in chunk.names}


def _metric_cells(values: Sequence[Any] | None, is_percent: bool, zero_percent: bool, text: bool,
                  count: int) -> list[Any] | output.Numbers:
    """One metric column's cells (``None``: no comparator gives it); a percent column shows a float as
    ``12.5%`` (``0%`` for zero when ``zero_percent``). A column of floats is :class:`output.Numbers` for the
    CSV, formatted as the rows are joined."""
    na = output.NA
    if values is None:
        return [na] * count
    if set(map(type, values)) == {float}:  # the common case: a column of floats
        if is_percent:  # f"{x}" is repr(x) for a float
            numbers = output.Numbers([value * 100 for value in values], 1, "%", "0%" if zero_percent else None)
            return numbers if text else numbers.columns()[0]
        return output.Numbers(list(values)) if text else list(values)
    fmt, cells = output.format_value, []
    for value in values:
        if value is None:
            value = na
        elif is_percent and value.__class__ is float:
            value = "0%" if zero_percent and value == 0.0 else fmt(value, True)
        elif text:
            value = float_texts([value])[0] if value.__class__ is float else _cell_text(value)
        cells.append(value)
    return cells


def _csv_fields(texts: list[str]) -> list[str]:
    """Each text as a CSV cell (:func:`output.csv_field`); one search when none needs quoting."""
    if output.needs_quoting("\x00".join(texts)):
        return [output.csv_field(text) for text in texts]
    return texts


@lru_cache(maxsize=4096)  # the entries of a call site share one stack
def _stack_cell(stack: tuple[str, ...], text: bool) -> str:
    shown = str(list(stack))
    return output.csv_field(shown) if text else shown


@lru_cache(maxsize=4096)
def _shape_field(shape: tuple[int, ...]) -> str:
    return output.csv_field(_shape_text(shape))


_text_field = lru_cache(maxsize=1024)(output.csv_field)  # for the few texts many rows share (dtypes)


def _cell_text(value: Any) -> str:
    """Any other cell as csv.writer writes it: ``repr`` of a float (a numpy float too), ``str`` of the rest."""
    return output.csv_field(repr(value) if isinstance(value, float) else str(value))


# -- one rank pair ------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _finish(npu: DumpEntry | None, bench: DumpEntry | EntryRef | None, plain: Plain | None = None) -> EntryOutcome:
    """Compare one entry pair; on the row path, render its rows too (the outcome keeps rows, not objects).
    ``plain``: the columnar path's rows of the pair (``bench`` then its ref), which :func:`_finish_chunk`
    renders with the chunk's other plain entries."""
    if plain is not None:  # a plain entry: npu and bench are both there
        facts = plain_facts(npu.index, npu.parent, plain, _WORKER["mode"])  # type: ignore[union-attr]
        return EntryOutcome(npu.name, npu.index, PASS, [], None, None, facts)  # type: ignore[union-attr]
    outcome = compare_entry(npu, bench, _WORKER["mode"], _WORKER["comparators"], _WORKER["lenient"],  # type: ignore[arg-type]
                            _WORKER["name_map"], _WORKER["postprocess"], _WORKER["rules"])
    outcome.rendered = list(render_rows(outcome, _WORKER["columns"], _WORKER["percent"]))
    outcome.rows = []
    outcome.npu_entry = _light(outcome.npu_entry)
    outcome.bench_entry = _light(outcome.bench_entry)
    return outcome


def _finish_chunk(pairs: Sequence[tuple[DumpEntry | None, EntryRef | None]]) -> list[EntryOutcome | PlainRun]:
    """Compare a chunk of (target entry, bench ref) pairs: the plain ones as columns (their rows rendered
    together; when the CSV alone is written, each run of them is one :class:`PlainRun`), the others row by
    row (their bench entry loaded by its span)."""
    target: RankDump = _WORKER["target"]
    bench: RankDump = _WORKER["bench"]
    found = _WORKER["columnar"].compare(pairs)
    shown = [(npu, plain) for (npu, _), plain in zip(pairs, found) if plain is not None]
    text = not _WORKER["xlsx"]
    rendered = iter(render_plains(shown, _WORKER["columns"], _WORKER["percent"], text))  # type: ignore[arg-type]
    outcomes: list[EntryOutcome | PlainRun] = []
    run: PlainRun | None = None
    for (npu, ref), plain in zip(pairs, found):
        if plain is None:
            run = None
            outcomes.append(_finish(target.loaded(npu) if npu is not None else None,
                                    bench.load(ref) if ref is not None else None))
            continue
        if not text:
            outcome = _finish(npu, ref, plain)
            outcome.rendered = next(rendered)
            outcomes.append(outcome)
            continue
        if run is None:
            run = PlainRun([], [], [])
            outcomes.append(run)
        run.facts.append(plain_facts(npu.index, npu.parent, plain, _WORKER["mode"]))  # type: ignore[union-attr]
        run.texts.append(next(rendered))
        run.rows.append(plain.count)
    return _spoolable(outcomes)


def _spoolable(outcomes: list[EntryOutcome | PlainRun]) -> list[EntryOutcome | PlainRun]:
    """Note each row's result; when the CSV alone is written, format the rows here (in the worker process,
    with ``--workers``): the spool keeps the text."""
    at = _WORKER["result_at"]
    rendered = [outcome for outcome in outcomes if type(outcome) is EntryOutcome and outcome.text is None]
    for outcome in rendered:
        outcome.results = tuple(row[at] for row in outcome.rendered)
    if not _WORKER["xlsx"]:
        for outcome, text in zip(rendered, output.csv_texts([o.rendered for o in rendered])):
            outcome.text, outcome.rendered = text, []
    return outcomes


def _compare_chunk(chunk: Sequence[Match]) -> list[EntryOutcome | PlainRun]:
    target: RankDump = _WORKER["target"]
    return _finish_chunk([(target.load(m.target) if m.target is not None else None, m.bench) for m in chunk])


def _stream_outcomes(matcher: Matcher) -> Iterator[EntryOutcome | PlainRun]:
    """One process: stream the target once, a chunk at a time, with each entry's bench partner's ref."""
    target: RankDump = _WORKER["target"]
    bench: RankDump = _WORKER["bench"]
    chunk: list[tuple[DumpEntry | None, EntryRef | None]] = []
    for entry in _WORKER["columnar"].entries(target):
        chunk.append((entry, matcher.match(entry.name)))
        if len(chunk) >= CHUNK_ENTRIES:
            yield from _finish_chunk(chunk)
            chunk = []
    yield from _finish_chunk(chunk)
    yield from _spoolable([_finish(None, bench.load(ref)) for ref in matcher.unmatched_bench()])


def _light(entry: DumpEntry | None) -> DumpEntry | None:
    """Drop the raw data and dump handle before an entry crosses a process boundary."""
    if entry is None:
        return None
    return DumpEntry(entry.name, entry.index, None, entry.parent, entry.stack, None)


def _chunks(items: Sequence[Match], size: int) -> Iterator[Sequence[Match]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _iter_outcomes(matches: Sequence[Match], workers: int) -> Iterator[EntryOutcome | PlainRun]:
    chunks = _chunks(matches, CHUNK_ENTRIES)
    if workers <= 1 or len(matches) <= CHUNK_ENTRIES:
        for chunk in chunks:
            yield from _compare_chunk(chunk)
        return
    _WORKER["target"].close()  # children open their own handles
    _WORKER["bench"].close()
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: deque = deque()
        for chunk in chunks:  # a bounded window of chunks in flight keeps memory bounded
            pending.append(pool.submit(_compare_chunk, chunk))
            if len(pending) >= 4 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


def detect_mode(target: RankDump, bench: RankDump, registry: Any) -> DataMode:
    """The data mode both dumps can be compared in; :class:`CompareError` when they cannot."""
    a, b = target.mode(registry), bench.mode(registry)
    common = common_mode(a, b, registry)
    if common is None:
        raise CompareError(f"cannot compare a {a.name} dump ({target.dump_file}) with a {b.name} dump "
                           f"({bench.dump_file}): dump both sides with the same task/summary_mode")
    mode, fallback = common
    if fallback:
        warnings.warn(f"{target.dump_file} is a {a.name} dump and {bench.dump_file} a {b.name} dump: "
                      f"comparing them in {mode.name} mode", _probe_warning(), stacklevel=2)
    _warn_on_backward_layouts(target, bench)
    return mode


def _warn_on_backward_layouts(target: RankDump, bench: RankDump) -> None:
    """API backward entries hold other tensors under ``api_backward: "inputs"`` (probe's per-input gradients)
    than in msprobe's layout (the inputs of the first output's grad_fn): their rows cannot agree."""
    layouts = [str(d.header.get("api_backward") or "grad_fn") for d in (target, bench)]
    if layouts[0] != layouts[1]:
        warnings.warn(f'{target.dump_file} records API backward as "{layouts[0]}" and {bench.dump_file} as '
                      f'"{layouts[1]}": the API backward rows compare different tensors; dump both sides with '
                      'the same "api_backward" (msprobe\'s layout is "grad_fn", the default)',
                      _probe_warning(), stacklevel=3)


def _probe_warning():
    from probe_core.plugins import ProbeWarning

    return ProbeWarning


def name_map_for(target: RankDump, bench: RankDump, options: CompareOptions) -> NameMap | None:
    """The name map for this pair: the built-in cross-framework tables plus -lm/-cm/-am/-dm/--consistent_check."""
    tf, bf = target.framework, bench.framework
    asked = (options.mapping, options.cell_mapping, options.api_mapping, options.data_mapping,
             options.consistent_backend)
    if tf and bf and tf != bf and not any(asked):
        raise CompareError(
            f"the target dump is {tf} ({target.dump_file}) and the bench dump is {bf} ({bench.dump_file}): "
            f"a cross-framework compare needs a mapping: -lm (built-in MindSpore<->PyTorch tables), -cm/-am "
            f"(cell/API maps, optionally with a YAML), or --mapping MAP.yaml (module/layer name map)")
    name_map = builtin_map(tf, bf)
    loaders = ((options.mapping, load_mapping), (options.cell_mapping, load_cell_mapping),
               (options.api_mapping, load_api_mapping), (options.data_mapping, load_data_mapping))
    for value, loader in loaders:
        if isinstance(value, (str, Path)):
            name_map = loader(Path(value), name_map)
    if options.consistent_backend:
        name_map = consistent_check_map(options.consistent_backend, name_map)
    return name_map if name_map.active else None


def _label(target: RankDump) -> str:
    rank = target.rank if target.rank is not None else 0
    step = target.step if target.step is not None else 0
    return f"rank{rank}_step{step}"


def result_folder(options: CompareOptions, target: RankDump) -> Path:
    """Where a rank pair's results go: OUT itself, or OUT/step{N} when the run compares several steps
    (msprobe's ``merge_result`` reads one folder per step holding one file per rank)."""
    if not options.step_folders:
        return options.output
    folder = options.output / f"step{target.step if target.step is not None else 0}"
    folder.mkdir(exist_ok=True)
    return folder


@dataclass
class PendingRank:
    """A compared rank pair whose rows wait in a spool file for the job's verdicts."""

    label: str
    step: int
    rank: int
    stem: Path
    columns: list[str]
    spool: Path
    facts: list[EntryFacts]
    unmatched: dict[str, list[str]]
    target: tuple[Path, int | None, int | None]  # (dump.json, step, rank): picklable, for the stack lookup
    bench: tuple[Path, int | None, int | None]
    partial: list[str]
    mode: str
    errors: dict[int, Finding] = field(default_factory=dict)  # the job's verdicts: entry key -> why an error
    first: Finding | None = None
    accepted: frozenset[int] = frozenset()  # entries whose rule errors the noise reference has too


def compare_ranks(target: RankDump, bench: RankDump, registry, options: CompareOptions,
                  advance: Callable[[int], None] | None = None,
                  on_total: Callable[[int], None] | None = None) -> PendingRank:
    """Compare one target rank dump with one bench rank dump; spool its rows for :func:`write_rank`.

    The cyclic garbage collector is paused meanwhile: the indexes and compact forms live to the end."""
    with collector_paused():
        return _compare_ranks(target, bench, registry, options, advance, on_total)


def _check_has_entries(dump: RankDump, side: str) -> None:
    """A dump without one readable entry leaves nothing to compare: no answer, an error that says why."""
    if dump.has_entries:
        return
    if dump.problem:
        raise CompareError(f"the {side} dump {dump.dump_file}: nothing could be read, not even with --lenient "
                           f"({dump.problem}); no entry comes before the damage: repair the file or dump again")
    raise CompareError(f"the {side} dump {dump.dump_file} has no entries (\"data\" is empty): "
                       f"nothing was collected; check the dump's scope/list/level and step filters")


def _compare_ranks(target: RankDump, bench: RankDump, registry, options: CompareOptions,
                   advance: Callable[[int], None] | None, on_total: Callable[[int], None] | None) -> PendingRank:
    for dump, side in ((target, "target"), (bench, "bench")):
        _check_has_entries(dump, side)
    mode = detect_mode(target, bench, registry)
    name_map = name_map_for(target, bench, options)
    comparators = load_comparators(registry, mode.name)
    if not comparators:
        raise CompareError(f"no comparator for {mode.name} dumps is installed (comparators for: "
                           f"{', '.join(known_modes(registry)) or 'none'}); install or enable the plugin of the {mode.name} mode")
    columnar = ColumnarCompare(mode, comparators, options.rules, name_map,
                               load_postprocess(options.postprocess) if options.postprocess else None)
    bench_refs = columnar.index(bench)
    if options.workers > 1:
        matches = match_entries(target.index(), bench_refs, target_parents=target.construct,
                                bench_parents=bench.construct, fuzzy=options.fuzzy, name_map=name_map)
        outcomes = _iter_outcomes(matches, options.workers)
        total = len(matches)
    else:
        matcher = Matcher(bench_refs, bench_parents=bench.construct, target_parents=target.construct,
                          target_names=target.construct if name_map is not None else (), fuzzy=options.fuzzy,
                          name_map=name_map)
        outcomes = _stream_outcomes(matcher)
        total = len(bench_refs)  # an estimate: the target is streamed
    if on_total:
        on_total(total)
    columns = output.header(mode, comparators)
    percent = frozenset(c for comp in comparators for c in comp.percent_columns)
    stem = output.result_stem(result_folder(options, target), target.rank, options.stamp or output.timestamp())
    unmatched: dict[str, list[str]] = {"target": [], "bench": []}
    facts: list[EntryFacts] = []
    done = 0
    _WORKER.update(target=target, bench=bench, mode=mode, comparators=comparators, lenient=options.lenient,
                   columns=columns, percent=percent, name_map=name_map, rules=options.rules,
                   postprocess=columnar.postprocess, columnar=columnar, xlsx=options.xlsx,
                   result_at=columns.index("Result"))
    spool = output.RowSpool(stem, _completed)
    shown = 0
    try:
        for outcome in outcomes:
            if type(outcome) is PlainRun:
                facts += outcome.facts
                spool.add(tuple(f.index for f in outcome.facts), tuple(outcome.rows), outcome.texts)
                done += len(outcome.facts)
            else:
                if outcome.result == UNMATCHED:
                    unmatched["target" if outcome.npu_entry is not None else "bench"].append(outcome.name)
                if outcome.facts is not None:
                    facts.append(outcome.facts)
                spool.add(outcome.facts.index if outcome.facts is not None else outcome.index, outcome.results,
                          outcome.text if outcome.text is not None else outcome.rendered)
                done += 1
            if advance and done - shown >= 64:
                advance(done - shown)
                shown = done
        if advance:
            advance(done - shown)
    except BaseException:
        spool.discard()
        raise
    finally:
        spool.close()
        _WORKER.clear()
        target.close()
        bench.close()
    partial = [str(d.dump_file) for d in (target, bench) if d.header.get("partial") is True]
    sides = [(Path(d.dump_file), d.step, d.rank) for d in (target, bench)]
    return PendingRank(_label(target), target.step or 0, target.rank or 0, stem, columns, spool.path, facts,
                       unmatched, sides[0], sides[1], partial, mode.name)


#: the result files this process wrote completely in the current :func:`run_compare` (what a full disk keeps)
_COMPLETED: list[str] = []


def _completed() -> list[str]:
    return list(_COMPLETED)


def write_rank(pending: PendingRank, options: CompareOptions) -> RankResult:
    """Write a rank pair's CSV/XLSX with the job's verdicts (rows the judge flags become errors); a write that
    fails (a full disk) is one :class:`~probe_core.outputs.OutputError` line saying what was written."""
    files = f"{pending.stem.name}.csv" + (" and .xlsx" if options.xlsx else "")
    with writing(f"the results of {pending.label} ({files} in {pending.stem.parent})", _completed):
        result = _write_rank(pending, options)
    _COMPLETED.extend(path for path in (result.csv, result.xlsx) if path)
    return result


def _write_rank(pending: PendingRank, options: CompareOptions) -> RankResult:
    writer = output.RowWriter(pending.stem, pending.columns, options.xlsx)
    result_at, message_at = writer.result_at, pending.columns.index("Err_message")
    counts = {PASS: 0, WARNING: 0, ERROR: 0, UNMATCHED: 0}
    row_counts = dict(counts)
    names = {f.index: f.name for f in pending.facts} if options.tensor_log else {}

    def write_entry(index: int, results: Sequence[str], rows: str | list[list[Any]]) -> None:
        finding = pending.errors.get(index)
        judged = finding is not None and finding.kind != "rules"  # the rules marked their rows themselves
        if type(rows) is str:
            if not (judged or index in pending.accepted or options.tensor_log):
                writer.write_text(rows)
                _count(results, counts, row_counts)
                return
            rows = output.csv_rows(rows)
        if judged:
            _mark(rows, finding, result_at, message_at)  # type: ignore[arg-type]
        elif index in pending.accepted:
            _accept(rows, result_at, message_at)  # type: ignore[arg-type]
        entry_result = _count([row[result_at] for row in rows], counts, row_counts)
        if options.tensor_log:  # after the job's verdicts, so the log says what the CSV says
            output.log_outcome(names.get(index, f"entry {index}"), entry_result, rows, pending.columns)
        writer.write_rows(rows)  # type: ignore[arg-type]

    try:
        for key, results, rows in output.RowSpool.read(pending.spool):
            if type(key) is int:
                write_entry(key, results, rows)
            elif options.tensor_log or not (pending.errors.keys().isdisjoint(key) and pending.accepted.isdisjoint(key)):
                for index, count, text in zip(key, results, rows):  # a PlainRun the verdicts name: entry by entry
                    write_entry(index, (PASS,) * count, text)
            else:  # a PlainRun as it is: every row passes
                writer.write_text("".join(rows))
                counts[PASS] += len(key)
                row_counts[PASS] += sum(results)
    finally:
        writer.close()
        pending.spool.unlink(missing_ok=True)
    first = pending.first
    return RankResult(pending.label, counts, row_counts, pending.unmatched,
                      _describe(first, pending) if first is not None else None, str(writer.csv_path),
                      str(writer.xlsx_path) if writer.xlsx_path else None, str(pending.target[0]),
                      str(pending.bench[0]), partial=pending.partial, step=pending.step, rank_id=pending.rank,
                      mode=pending.mode)


def _count(results: Sequence[str], counts: dict[str, int], row_counts: dict[str, int]) -> str:
    """Count an entry's rows and the entry by its worst row; return the entry's result."""
    if results.count(PASS) == len(results):  # the common case: every row passes
        row_counts[PASS] += len(results)
        counts[PASS] += 1
        return PASS
    for result in results:
        row_counts[result] += 1
    entry_result = UNMATCHED if UNMATCHED in results else worst(r for r in results if r != UNMATCHED)
    counts[entry_result] += 1
    return entry_result


def _mark(rows: list[list[Any]], finding: Finding, result_at: int, message_at: int) -> None:
    """Make the rows ``finding`` names (all rows when it names none) errors that say why."""
    chosen = finding.rows or range(len(rows))
    for position in chosen:
        if position >= len(rows):
            continue
        row = rows[position]
        row[result_at] = ERROR
        text = f"{finding.reason}."
        row[message_at] = text if row[message_at] in (output.NA, None, "") else f"{row[message_at]} {text}"


def _accept(rows: list[list[Any]], result_at: int, message_at: int) -> None:
    """Rule errors the noise reference shows too: warnings that say so."""
    for row in rows:
        if row[result_at] == ERROR:
            row[result_at] = WARNING
            row[message_at] = f"{row[message_at]} The noise reference differs here too: a known difference."


def _describe(finding: Finding, pending: PendingRank) -> dict[str, Any]:
    """A finding as summary.json and -da write it: the entry, its bench partner, module, stack and why."""
    facts = next((f for f in pending.facts if f.index == finding.index and f.name == finding.name), None)
    dump = pending.bench if facts is not None and facts.side == "bench" else pending.target
    stack: list[str] = []
    module = facts.parent if facts is not None else None
    try:
        with RankDump(*dump) as fresh:
            stack = list(fresh.stacks.get(finding.name, ()))
    except ProbeError:
        pass
    return {"name": finding.name, "bench_name": facts.bench_name if facts is not None else None, "module": module,
            "stack": stack, "reason": finding.reason, "kind": finding.kind, "result": ERROR,
            "rank": pending.label, "step": pending.step, "rank_id": pending.rank}


# -- whole run ------------------------------------------------------------------------------


def pair_dumps(targets: list[RankDump], benches: list[RankDump]) -> list[tuple[RankDump, RankDump]]:
    """Pair rank dumps by (step, rank); a single dump on each side pairs whatever its names."""
    if len(targets) == 1 and len(benches) == 1:
        return [(targets[0], benches[0])]
    key = lambda d: (d.step if d.step is not None else 0, d.rank if d.rank is not None else 0)  # noqa: E731
    by_key = {key(b): b for b in benches}
    pairs = [(t, by_key[key(t)]) for t in targets if key(t) in by_key]
    if not pairs:
        have_t = sorted(key(t) for t in targets)
        have_b = sorted(key(b) for b in benches)
        raise CompareError(f"no (step, rank) in common: target has {have_t}, bench has {have_b}; "
                           f"pick one pair with --step/--rank or point at rank folders")
    missing = [key(t) for t in targets if key(t) not in by_key]
    if missing:
        warnings.warn(f"no bench dump for target (step, rank) {missing}; they are skipped", _probe_warning(),
                      stacklevel=2)
    return pairs


def run_compare(options: CompareOptions, registry) -> dict[str, Any]:
    """Compare two dumps as ``options`` say; write results and summary.json; return the summary. The output
    folder is checked before any work (:func:`probe_core.outputs.output_folder`)."""
    with output_folder(options.output, flag="-o") as out:
        return _run_compare(options, registry, out)


def _run_compare(options: CompareOptions, registry, out: Path) -> dict[str, Any]:
    _COMPLETED.clear()
    targets = discover(options.target, ranks=options.ranks, steps=options.steps, lenient=options.lenient)
    benches = discover(options.bench, ranks=options.ranks, steps=options.steps, lenient=options.lenient)
    pairs = pair_dumps(targets, benches)
    steps = {t.step for t, _ in pairs}
    options = dataclasses.replace(options, stamp=options.stamp or output.timestamp(), step_folders=len(steps) > 1)
    references: Mapping[int, NoiseReference] = {}
    if options.noise_reference is not None and options.rules == "noise":
        from probe_core.compare.reference import noise_references

        references = noise_references(options.noise_reference, registry, ranks=options.ranks, steps=options.steps,
                                      lenient=options.lenient, progress=options.progress)
    chains = compare_chains(pairs, registry, options, references)
    by_key = {(r.step, r.rank_id): (r, s) for chain in chains for r, s in zip(chain.results, chain.steps)}
    results = [by_key[(_step(t), _rank(t))][0] for t, _ in pairs]
    answer = first_of_job([s for chain in chains for s in chain.steps])
    modes = sorted({r.mode for r in results})
    totals = {k: sum(r.counts[k] for r in results) for k in (PASS, WARNING, ERROR, UNMATCHED)}
    summary = {
        "counts": totals,
        "row_counts": {k: sum(r.row_counts[k] for r in results) for k in totals},
        "first_divergence": _job_first(answer, by_key),
        "rules": options.rules,
        "noise_reference": [str(p) for p in options.noise_reference] if options.noise_reference else None,
        "mode": modes[0] if len(modes) == 1 else ",".join(modes),
        "target": str(options.target),
        "bench": str(options.bench),
        "output": str(out),
        "ranks": [_public(r) for r in results],
        "partial": [path for r in results for path in r.partial],
    }
    with writing(f"the compare summary in {out}", _completed):
        written = output.write_summary(out, summary)
        _COMPLETED.append(str(written))
        if options.diff_analyze:
            summary["diff_analyze"] = str(output.write_diff_analyze(out, results))
    summary["summary_file"] = written.name  # in the output folder: summary.json, or summary_1.json beside another's
    return summary


def _step(dump: RankDump) -> int:
    return dump.step if dump.step is not None else 0


def _rank(dump: RankDump) -> int:
    return dump.rank if dump.rank is not None else 0


def _public(result: RankResult) -> dict[str, Any]:
    """A rank's part of summary.json (what the job needs of it internally stays out)."""
    return {k: v for k, v in result.__dict__.items() if k not in ("step", "rank_id", "mode")}


@dataclass
class ChainResult:
    """One rank's steps compared, judged and written: what the job's answer needs of them, nothing more."""

    results: list[RankResult]
    steps: list[StepFacts]  # judged; their facts cut to the communication calls and the step's first finding


def compare_chains(pairs: Sequence[tuple[RankDump, RankDump]], registry, options: CompareOptions,
                   references: Mapping[int, NoiseReference]) -> list[ChainResult]:
    """Compare, judge and write every rank's chain of steps: the ranks are the jobs of ``--executor``.

    A rank's steps stay together (the judge chains them), so only small results cross between processes or
    machines, whatever the number of ranks. A single rank, or one process, runs here with a progress bar
    per step and ``--workers`` processes over its entries.
    """
    chains: dict[int, list[tuple[RankDump, RankDump]]] = {}
    for target, bench in sorted(pairs, key=lambda p: (_rank(p[0]), _step(p[0]))):
        chains.setdefault(_rank(target), []).append((target, bench))
    choice = ExecutorChoice(options.executor, options.workers, options.scheduler)
    if not choice.parallel or (len(chains) == 1 and choice.kind == "local"):
        return [compare_chain(chain, registry, options, references.get(rank)) for rank, chain in chains.items()]
    from rich.progress import Progress

    specs = [[(_spec(t), _spec(b)) for t, b in chain] for chain in chains.values()]
    alone = dataclasses.replace(options, workers=1, progress=False)
    results = []
    with Progress(transient=True, disable=not options.progress) as bar, \
            job_executor(choice, len(specs)) as executor:
        task = bar.add_task(f"compare {len(pairs)} rank dumps ({len(specs)} ranks)", total=len(specs))
        n = len(specs)
        for result in run_jobs(executor, _chain_job, specs, [registry_ref(registry)] * n, [alone] * n,
                               [references.get(rank) for rank in chains]):
            results.append(result)
            _COMPLETED.extend(path for rank in result.results for path in (rank.csv, rank.xlsx) if path)
            bar.advance(task)
    return results


def _spec(dump: RankDump) -> tuple[Path, int | None, int | None, bool]:
    return (dump.dump_file, dump.step, dump.rank, dump.lenient)


def _chain_job(specs: Sequence[tuple[tuple, tuple]], ref: RegistryRef, options: CompareOptions,
               reference: NoiseReference | None) -> ChainResult:
    """One rank's chain in a worker (a local process or a cluster's)."""
    pairs = [(RankDump(*target), RankDump(*bench)) for target, bench in specs]
    return compare_chain(pairs, registry_of(ref), options, reference)


def compare_chain(pairs: Sequence[tuple[RankDump, RankDump]], registry, options: CompareOptions,
                  reference: NoiseReference | None = None) -> ChainResult:
    """One rank's steps (in step order): compare each, judge them as a chain, write each step's results.

    The cyclic garbage collector stays paused until the steps' facts and indexes are gone: it would otherwise
    scan them all once more as soon as the compare of a step let it run again."""
    with collector_paused():
        return _compare_chain(pairs, registry, options, reference)


def _compare_chain(pairs: Sequence[tuple[RankDump, RankDump]], registry, options: CompareOptions,
                   reference: NoiseReference | None) -> ChainResult:
    pending = compare_pairs(pairs, registry, options)
    steps = [StepFacts(item.step, item.rank, item.facts) for item in pending]
    judge_job(steps, options.rules, {pending[0].rank: reference} if reference is not None and pending else None)
    for item, judged in zip(pending, steps):
        if judged.judgement is not None:
            item.errors = judged.judgement.errors
            item.first = judged.judgement.first
            item.accepted = judged.judgement.accepted
        judged.facts = _answer_facts(judged)
    return ChainResult([write_rank(item, options) for item in pending], steps)


def _answer_facts(step: StepFacts) -> list[EntryFacts]:
    """The facts the job's answer reads (:func:`~probe_core.compare.verdicts.first_of_job`): the target's
    communication calls, which order the ranks, and the step's first finding."""
    first = step.judgement.first if step.judgement is not None else None
    return [f for f in step.facts if (f.side != "bench" and is_communication(f.name))
            or (first is not None and f.index == first.index)]


def _job_first(answer: JobAnswer | None,
               by_key: Mapping[tuple[int, int], tuple[RankResult, StepFacts]]) -> dict[str, Any] | None:
    if answer is None:
        return None
    described = dict(by_key[(answer.step, answer.rank)][0].first_divergence or {})
    if answer.concurrent:
        described["concurrent"] = [{"rank": rank, "name": name} for rank, name in answer.concurrent]
    return described


def _pair_job(target: tuple, bench: tuple, ref: RegistryRef, options: CompareOptions) -> PendingRank:
    """One step of a rank in a worker process (``--workers`` with a single rank's several steps)."""
    return compare_ranks(RankDump(*target), RankDump(*bench), registry_of(ref), options)


def compare_pairs(pairs, registry, options: CompareOptions) -> list[PendingRank]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), transient=True, disable=not options.progress)
    results = []
    with progress:
        if options.workers > 1 and len(pairs) > 1:  # one process per rank pair
            n = len(pairs)
            task = progress.add_task(f"compare {n} rank dumps", total=n)
            alone = dataclasses.replace(options, workers=1, progress=False)
            with job_executor(ExecutorChoice("local", options.workers), n) as executor:
                for result in run_jobs(executor, _pair_job, [_spec(t) for t, _ in pairs],
                                       [_spec(b) for _, b in pairs], [registry_ref(registry)] * n, [alone] * n):
                    results.append(result)
                    progress.advance(task, 1)
            return results
        for target, bench in pairs:
            task = progress.add_task(f"compare {_label(target)}", total=None)
            results.append(compare_ranks(
                target, bench, registry, options,
                advance=lambda n, task=task: progress.advance(task, n),
                on_total=lambda total, task=task: progress.update(task, total=total)))
    return results

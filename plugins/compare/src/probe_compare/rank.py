"""One rank pair: its data mode and name map, its entries compared into a spool of rows (:func:`compare_ranks`),
then, once the job's judge has spoken, its CSV/XLSX written with the verdicts (:func:`write_rank`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from probe_compare import output
from probe_compare.chunks import ChunkJob, PlainRun
from probe_compare.columnar import ColumnarCompare
from probe_compare.comparator import known_modes, load_comparators
from probe_compare.judge import EntryFacts, Finding
from probe_compare.mapping import (NameMap, builtin_map, consistent_check_map, load_api_mapping,
                                       load_cell_mapping, load_data_mapping, load_mapping)
from probe_compare.match import Matcher, match_entries
from probe_compare.options import CompareOptions, RankResult
from probe_compare.postprocess import load_postprocess
from probe_compare.rules import ERROR, PASS, UNMATCHED, WARNING, worst
from probe_core.api import (CompareError, DataMode, ProbeError, RankDump, collector_paused, left_to_exit, pair_mode,
                            record, writing)


def detect_mode(target: RankDump, bench: RankDump, registry: Any) -> DataMode:
    """The data mode both dumps can be compared in (:func:`~probe_core.modes.pair_mode`); :class:`CompareError`
    when they cannot."""
    mode = pair_mode(target.mode(registry), bench.mode(registry), registry, target.dump_file, bench.dump_file)
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
    from probe_core.api import ProbeWarning

    return ProbeWarning


def name_map_for(target: RankDump, bench: RankDump, options: CompareOptions, registry: Any = None) -> NameMap | None:
    """The name map for this pair: the built-in cross-framework tables plus -lm/-cm/-am/-dm/--consistent_check."""
    tf, bf = target.framework, bench.framework
    asked = (options.mapping, options.cell_mapping, options.api_mapping, options.data_mapping,
             options.consistent_backend)
    if tf and bf and tf != bf and not any(asked):
        raise CompareError(
            f"the target dump is {tf} ({target.dump_file}) and the bench dump is {bf} ({bench.dump_file}): "
            f"a cross-framework compare needs a mapping: -lm (the installed collectors' built-in name tables), -cm/-am "
            f"(cell/API maps, optionally with a YAML), or --mapping MAP.yaml (module/layer name map)")
    name_map = builtin_map(tf, bf, registry)
    loaders = ((options.mapping, load_mapping), (options.cell_mapping, load_cell_mapping),
               (options.api_mapping, load_api_mapping), (options.data_mapping, load_data_mapping))
    for value, loader in loaders:
        if isinstance(value, (str, Path)):
            name_map = loader(Path(value), name_map)
    if options.consistent_backend:
        name_map = consistent_check_map(options.consistent_backend, name_map)
    return name_map if name_map.active else None


def rank_label(target: RankDump) -> str:
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


@record(frozen=False)
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
    name_map = name_map_for(target, bench, options, registry)
    comparators = load_comparators(registry, mode.name)
    if not comparators:
        raise CompareError(f"no comparator for {mode.name} dumps is installed (comparators for: "
                           f"{', '.join(known_modes(registry)) or 'none'}); install or enable the plugin of the {mode.name} mode")
    columnar = ColumnarCompare(mode, comparators, options.rules, name_map,
                               load_postprocess(options.postprocess) if options.postprocess else None)
    bench_refs = columnar.index(bench)
    columns = output.header(mode, comparators)
    job = ChunkJob(target, bench, mode, comparators, columnar, columns,
                   frozenset(c for comp in comparators for c in comp.percent_columns), name_map, options.rules,
                   options.lenient, options.xlsx)
    by_tree = options.fuzzy or options.rules == "noise"  # msprobe's rules: msprobe's matching, by name
    if options.workers > 1:
        matches = match_entries(target.index(), bench_refs, target_parents=target.construct,
                                bench_parents=bench.construct, fuzzy=by_tree, name_map=name_map)
        outcomes = job.in_processes(matches, options.workers)
        total = len(matches)
    else:
        matcher = Matcher(bench_refs, bench_parents=bench.construct, target_parents=target.construct,
                          target_names=target.construct if name_map is not None else (), fuzzy=by_tree,
                          name_map=name_map)
        outcomes = job.stream(matcher)
        total = len(bench_refs)  # an estimate: the target is streamed
    if on_total:
        on_total(total)
    stem = output.result_stem(result_folder(options, target), target.rank, options.stamp or output.timestamp())
    unmatched: dict[str, list[str]] = {"target": [], "bench": []}
    facts: list[EntryFacts] = []
    done = 0
    spool = output.RowSpool(stem, options.written.copy)
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
        target.close()
        bench.close()
    if options.process_ends:  # the bench's index and compact forms, the matcher's tables: they die with the process
        left_to_exit((bench_refs, columnar, job, outcomes))
    partial = [str(d.dump_file) for d in (target, bench) if d.header.get("partial") is True]
    sides = [(Path(d.dump_file), d.step, d.rank) for d in (target, bench)]
    return PendingRank(rank_label(target), target.step or 0, target.rank or 0, stem, columns, spool.path, facts,
                       unmatched, sides[0], sides[1], partial, mode.name)


def write_rank(pending: PendingRank, options: CompareOptions) -> RankResult:
    """Write a rank pair's CSV/XLSX with the job's verdicts (rows the judge flags become errors); a write that
    fails (a full disk) is one :class:`~probe_core.outputs.OutputError` line saying what was written."""
    files = f"{pending.stem.name}.csv" + (" and .xlsx" if options.xlsx else "")
    with writing(f"the results of {pending.label} ({files} in {pending.stem.parent})", options.written.copy):
        result = _write_rank(pending, options)
    options.written.extend(path for path in (result.csv, result.xlsx) if path)
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


#: what a communication call that adds error says (:attr:`~probe_compare.judge.Finding.received`)
RECEIVED = (" The divergence arrives through this call: from another rank whose own entries diverge first (see the"
            " job's first divergence in summary.json), or, when every rank shows it here, made by the call itself.")


def _mark(rows: list[list[Any]], finding: Finding, result_at: int, message_at: int) -> None:
    """Make the rows ``finding`` names (all rows when it names none) errors that say why; warnings where the
    divergence arrives through a communication call, as the first error of the job is the rank it comes from."""
    chosen = finding.rows or range(len(rows))
    result, text = (WARNING, f"{finding.reason}.{RECEIVED}") if finding.received else (ERROR, f"{finding.reason}.")
    for position in chosen:
        if position >= len(rows):
            continue
        row = rows[position]
        row[result_at] = result
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
            "stack": stack, "reason": finding.reason, "kind": finding.kind,
            "result": WARNING if finding.received else ERROR,
            "rank": pending.label, "step": pending.step, "rank_id": pending.rank}

"""Run a compare: pair rank dumps, compare each pair's entries, judge the job, write.

The compare pipeline, stage by stage: :mod:`~probe_compare.match` pairs entries,
:mod:`~probe_compare.columnar` (plain entries, as columns) and :mod:`~probe_compare.entries` (the
others, row by row) compare them with the comparators, :mod:`~probe_compare.judge` and
:mod:`~probe_compare.verdicts` decide what is wrong, :mod:`~probe_compare.render` makes the rows
and :mod:`~probe_compare.rank` writes them; :mod:`~probe_compare.chunks` runs a rank pair's
entries a chunk at a time, in one or ``--workers`` processes. :func:`run_compare` is what ``probe
compare`` calls. Memory stays bounded: both dumps are indexed (names and byte spans), then entries are loaded
a chunk at a time in the target's execution order and rows stream to a spool, then to the CSV/XLSX writers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe_compare import output
from probe_compare.judge import EntryFacts, NoiseReference
from probe_compare.options import CompareOptions, RankResult
from probe_compare.pairs import compare_pairs, dump_spec, pair_dumps
from probe_compare.rank import write_rank
from probe_compare.rules import ERROR, PASS, UNMATCHED, WARNING
from probe_compare.verdicts import JobAnswer, StepFacts, first_of_job, judge_job
from probe_core.api import (ExecutorChoice, RankDump, RegistryRef, collector_paused, discover, is_communication,
                            job_executor, left_to_exit, output_folder, registry_of, registry_ref, run_jobs, writing)

__all__ = ["CompareOptions", "RankResult", "compare_chain", "compare_chains", "compare_pairs", "pair_dumps",
           "run_compare"]


def run_compare(options: CompareOptions, registry) -> dict[str, Any]:
    """Compare two dumps as ``options`` say; write results and summary.json; return the summary. The output
    folder is checked before any work (:func:`probe_core.outputs.output_folder`)."""
    with output_folder(options.output, flag="-o") as out:
        return _run_compare(options, registry, out)


def _run_compare(options: CompareOptions, registry, out: Path) -> dict[str, Any]:
    options = dataclasses.replace(options, written=[])
    targets = discover(options.target, ranks=options.ranks, steps=options.steps, lenient=options.lenient)
    benches = discover(options.bench, ranks=options.ranks, steps=options.steps, lenient=options.lenient)
    pairs = pair_dumps(targets, benches)
    steps = {t.step for t, _ in pairs}
    options = dataclasses.replace(options, stamp=options.stamp or output.timestamp(), step_folders=len(steps) > 1)
    references: Mapping[int, NoiseReference] = {}
    if options.noise_reference is not None and options.rules == "noise":
        from probe_compare.reference import noise_references

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
    with writing(f"the compare summary in {out}", options.written.copy):
        written = output.write_summary(out, summary)
        options.written.append(str(written))
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
    if len(pairs) > 1 and options.process_ends:  # each pair's index and forms go once compared: what is left to
        options = dataclasses.replace(options, process_ends=False)  # the exit must not pile up over many pairs
    chains: dict[int, list[tuple[RankDump, RankDump]]] = {}
    for target, bench in sorted(pairs, key=lambda p: (_rank(p[0]), _step(p[0]))):
        chains.setdefault(_rank(target), []).append((target, bench))
    choice = ExecutorChoice(options.executor, options.workers, options.scheduler)
    if not choice.parallel or (len(chains) == 1 and choice.kind == "local"):
        return [compare_chain(chain, registry, options, references.get(rank)) for rank, chain in chains.items()]
    from rich.progress import Progress

    specs = [[(dump_spec(t), dump_spec(b)) for t, b in chain] for chain in chains.values()]
    alone = dataclasses.replace(options, workers=1, progress=False, process_ends=False)  # workers go on
    results = []
    with Progress(transient=True, disable=not options.progress) as bar, \
            job_executor(choice, len(specs)) as executor:
        task = bar.add_task(f"compare {len(pairs)} rank dumps ({len(specs)} ranks)", total=len(specs))
        n = len(specs)
        for result in run_jobs(executor, _chain_job, specs, [registry_ref(registry)] * n, [alone] * n,
                               [references.get(rank) for rank in chains]):
            results.append(result)
            options.written.extend(path for rank in result.results for path in (rank.csv, rank.xlsx) if path)
            bar.advance(task)
    return results


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
    if options.process_ends:  # every entry's facts: they die with the process
        left_to_exit((pending, [step.facts for step in steps]))
    for item, judged in zip(pending, steps):
        if judged.judgement is not None:
            item.errors = judged.judgement.errors
            item.first = judged.judgement.first
            item.accepted = judged.judgement.accepted
        judged.facts = _answer_facts(judged)
    return ChainResult([write_rank(item, options) for item in pending], steps)


def _answer_facts(step: StepFacts) -> list[EntryFacts]:
    """The facts the job's answer reads (:func:`~probe_compare.verdicts.first_of_job`): the target's
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

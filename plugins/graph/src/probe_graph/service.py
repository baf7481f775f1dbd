"""Run ``probe graph``: find the dumps, build (merge, compare) each graph, write one ``.vis.db``.

Work is cut into jobs, one per output graph (one rank of one step, or one
data-parallel group once per-rank graphs are merged); jobs run in worker
processes when ``workers > 1``, or on a Dask cluster (``--executor dask``), and hand back only rows and a
summary.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_compare.api import EntryFacts, Finding, NoiseReference, StepFacts, judge_job, load_comparators
from probe_core.api import (DataMode, ExecutorChoice, GraphError, RegistryRef, collector_paused, job_executor,
                            left_to_exit, load_mode, output_folder, pair_mode, registry_of, registry_ref, run_jobs)
from probe_graph.api import Graph, Layout, merge_side
from probe_graph.export import export_dump
from probe_graph.jobs import GraphJob, group_jobs
from probe_graph.match import match_graphs
from probe_graph.overflow import mark_overflow
from probe_graph.precision import ERROR_AT, ERROR_INDEX, WARNING_INDEX, node_colors, score_graphs, tool_tips
from probe_graph.source import RankFolder, discover, load_graph
from probe_graph.summary import GraphSummary, summarize
from probe_graph.vis_db import GraphRows, VisConfig, graph_rows, write_vis_db


@dataclass(frozen=True)
class GraphOptions:
    """How to build and compare (everything a worker needs; picklable)."""

    overflow: bool = False
    fuzzy: bool = False
    layer_mapping: dict[str, dict[str, str]] | bool | None = None
    layouts: tuple[Layout, Layout] | None = None  # (target, bench) parallel layouts to merge
    json_dir: str | None = None  # --file_type json: write each (merged) graph as a dump under step{S}/rank{R}/
    tensor_log: bool = False  # -tensor_log: one line per compared node
    progress_log: bool = False  # -progress_log: one line per finished graph
    rules: str = "noise"  # --rules: the noise-aware judge (as probe compare's) or "msprobe"
    noise_reference: tuple[Path, Path] | None = None  # --noise-reference: a benign (target, bench) pair
    ranks: list[int] | None = None  # --rank: only these ranks (None: all)
    steps: list[int] | None = None  # --step: only these steps


STRUCTURE_TASK = "structure"  # msprobe's task that records the hierarchy only: compared as structure


@dataclass
class JobResult:
    rows: list[GraphRows] = field(default_factory=list)
    summary: GraphSummary | None = None
    micro_steps: int = 1
    mode: str = ""  # the data mode the graphs were compared in; STRUCTURE_TASK; "" for a build
    step: int = 0
    rank: int = 0
    facts: list[EntryFacts] = field(default_factory=list)  # the judge's facts: target nodes, then bench-only ones


def _side(folders: Sequence[RankFolder], source: str, layout: Layout | None, step: int, rank: int,
          registry: Any, msprobe_tree: bool = False) -> Graph:
    graphs = [load_graph(folder, source, registry, msprobe_tree) for folder in folders]
    if layout is None or len(graphs) == 1 and layout.is_trivial:
        graph = graphs[0]
    else:
        graph = merge_side(graphs, layout, registry)
    graph.step, graph.rank, graph.source = step, rank, source
    graph.framework = graph.framework or graphs[0].framework
    return graph


def run_job(job: GraphJob, options: GraphOptions, registry: Any) -> JobResult:
    """Build (and compare) one graph; return its rows and summary.

    The cyclic garbage collector is paused meanwhile: a graph is millions of
    small long-lived objects, which it would otherwise rescan over and over.
    """
    with collector_paused():
        return _run_job(job, options, registry)


def compare_mode(target: Graph, bench: Graph, registry: Any) -> DataMode | None:
    """The data mode two graphs are compared in, decided as ``probe compare`` decides it (``None``: structure
    only)."""
    if STRUCTURE_TASK in (target.task, bench.task) or not (target.mode and bench.mode):
        return None
    return pair_mode(load_mode(registry.data_modes[target.mode]), load_mode(registry.data_modes[bench.mode]),
                     registry, target.dump_file, bench.dump_file)


def _run_job(job: GraphJob, options: GraphOptions, registry: Any) -> JobResult:
    layouts = options.layouts or (None, None)
    msprobe_tree = options.rules == "msprobe"
    target = _side(job.target, "NPU", layouts[0], job.step, job.rank, registry, msprobe_tree)
    result = JobResult(step=job.step, rank=job.rank)
    if options.overflow:
        mark_overflow(target)
    bench = mode = None
    metrics = None
    if job.bench is not None:
        bench = _side(job.bench, "Bench", layouts[1], job.step, job.rank, registry, msprobe_tree)
        if options.overflow:
            mark_overflow(bench)
        mode = compare_mode(target, bench, registry)
        result.mode = mode.name if mode is not None else STRUCTURE_TASK
        match_graphs(target, bench, fuzzy=options.fuzzy, layer_mapping=options.layer_mapping, registry=registry)
        comparators = load_comparators(registry, mode.name) if mode is not None else []
        metrics, result.facts = score_graphs(target, bench, mode, comparators, options.rules)
    if options.tensor_log and bench is not None:
        _log_nodes(target)
    if options.json_dir is not None:
        export_dump(target, Path(options.json_dir) / f"step{job.step}" / f"rank{job.rank}")
        result.summary = summarize(target, bench)
        for graph in (target, bench):
            if graph is not None:
                graph.release()
        return result
    shown = (mode.shown_rows, mode.shown_columns) if mode is not None else (None, None)
    result.rows.append(graph_rows(target, metrics, *shown))
    if bench is not None:  # both graphs stay until their rows are written (each row links to its partner)
        result.rows.append(graph_rows(bench))
    result.summary = summarize(target, bench)
    result.micro_steps = max(target.micro_steps, bench.micro_steps if bench else 1)
    return result


def _log_nodes(target: Graph) -> None:
    for node in target.preorder():
        other = node.matched
        where = f"step{target.step} rank{target.rank}"
        if other is None:
            print(f"[graph] {where} {node.name}: no bench node", flush=True)
        else:
            print(f"[graph] {where} {node.name} ~ {other.name}: precision index {node.precision_index}", flush=True)


def _run_job_in_worker(job: GraphJob, options: GraphOptions, ref: RegistryRef) -> JobResult:
    return run_job(job, options, registry_of(ref))


def plan_jobs(target_path: str | Path, bench_path: str | Path | None, options: GraphOptions) -> list[GraphJob]:
    """Pair the target's rank dumps with the bench's (by step and rank, or by merge group)."""
    targets = discover(target_path, options.ranks, options.steps)
    benches = discover(bench_path, options.ranks, options.steps) if bench_path is not None else None
    if options.layouts is not None:
        return group_jobs(targets, benches, options.layouts)
    if benches is None:
        return [GraphJob(t.step, t.rank, (t,)) for t in targets]
    if len(targets) == 1 and len(benches) == 1:
        t, b = targets[0], benches[0]
        return [GraphJob(t.step, t.rank, (t,), (b,))]
    by_key = {(b.step, b.rank): b for b in benches}
    jobs = [GraphJob(t.step, t.rank, (t,), (by_key[(t.step, t.rank)],)) for t in targets if (t.step, t.rank) in by_key]
    if not jobs:
        have = lambda dumps: ", ".join(f"step{d.step}/rank{d.rank}" for d in dumps)  # noqa: E731
        raise GraphError(f"{target_path} ({have(targets)}) and {bench_path} ({have(benches)}) share no step/rank; "
                         "give folders of the same layout, or --rank-size/--tp/--pp to merge ranks first")
    return jobs


def run_graph(target_path: str | Path, bench_path: str | Path | None, output_dir: str | Path,
              options: GraphOptions, *, workers: int = 1, registry: Any = None,
              progress: bool = True, executor: ExecutorChoice | None = None,
              process_ends: bool = False) -> tuple[Path, list[GraphSummary]]:
    """Everything ``probe graph`` does but printing: returns the written file and the summaries.

    ``registry`` defaults to the process-wide one (:func:`probe_core.api.current_registry`); the graphs
    are built in ``workers`` local processes, or where ``executor`` says (``--executor``/``--scheduler``).
    ``process_ends``: the caller ends the process next (the CLI): the graphs are never freed
    (:func:`~probe_core.api.left_to_exit`).
    """
    executor = executor or ExecutorChoice("local", workers)
    if registry is None:
        from probe_core.api import current_registry

        registry = current_registry()
    with collector_paused(), output_folder(output_dir, flag="-o"):  # see run_job; the folder checked first
        return _run_graph(target_path, bench_path, output_dir, options, executor, registry, progress, process_ends)


def _run_graph(target_path: str | Path, bench_path: str | Path | None, output_dir: str | Path,
               options: GraphOptions, executor: ExecutorChoice, registry: Any,
               progress: bool, process_ends: bool = False) -> tuple[Path, list[GraphSummary]]:
    jobs = plan_jobs(target_path, bench_path, options)
    results = _execute(jobs, options, executor, registry, progress)
    compare = bench_path is not None
    if compare:
        references = None
        if options.noise_reference is not None and options.rules == "noise":
            from probe_compare.api import noise_references

            references = noise_references(options.noise_reference, registry, progress=progress)
        apply_verdicts(results, options.rules, references)
    modes = {r.mode for r in results}
    mode_name = modes.pop() if len(modes) == 1 else ""
    mode = load_mode(registry.data_modes[mode_name]) if mode_name in registry.data_modes else None
    comparators = load_comparators(registry, mode.name) if mode is not None else []
    config = VisConfig(
        graph_type="compare" if compare else "build",
        task=(mode.graph_task if mode is not None else mode_name or "summary") if compare else "",
        tool_tip=tool_tips(mode, comparators) if compare and mode is not None else None,
        micro_steps=max(r.micro_steps for r in results),
        overflow_check=options.overflow,
        node_colors=node_colors(mode or DataMode()) if compare else None,
        ranks=[job.rank for job in jobs], steps=[job.step for job in jobs],
    )
    if options.json_dir is not None:
        return Path(options.json_dir), [r.summary for r in results if r.summary is not None]
    name = f"{'compare' if compare else 'build'}_{time.strftime('%Y%m%d%H%M%S')}.vis.db"
    parts = [rows for r in results for rows in r.rows]
    path = write_vis_db(Path(output_dir) / name, parts, config)  # {name}_1.vis.db, ... when another run holds it
    summaries = [r.summary for r in results if r.summary is not None]
    if process_ends:  # the graphs (nodes, the dumps' entries, shown metrics) die with the process
        left_to_exit(results)
    else:
        for part in parts:
            part.release()
    return path, summaries


def apply_verdicts(results: Sequence[JobResult], rules: str,
                   references: Mapping[int, NoiseReference] | None = None) -> None:
    """Judge every compared graph as ``probe compare`` judges its dumps (steps chained, ranks ordered), turn
    the nodes the judge flags red on both sides, with the modules around them (the path to them in the
    viewer), and set each summary's first divergent node."""
    steps = [StepFacts(r.step, r.rank, r.facts) for r in results]
    answer = judge_job(steps, rules, references)
    job_first = f"step {answer.step} rank {answer.rank}: {answer.finding.name}" if answer is not None else None
    for result, judged in zip(results, steps):
        judgement = judged.judgement
        if judgement is None or result.summary is None:
            continue
        flags = _flag_indexes(judgement.errors.values(), result.facts)
        bench_flags = {f.bench_name: flags[f.name] for f in result.facts if f.name in flags and f.bench_name}
        for rows, indexes in zip(result.rows, (flags, bench_flags)):
            rows.flag(indexes)
        errors = sum(1 for name, index in result.rows[0].indexes()
                     if flags.get(name, index) is not None and flags.get(name, index) >= ERROR_AT) \
            if result.rows else result.summary.errors
        first = judgement.first.name if judgement.first is not None else None
        result.summary = result.summary._replace(errors=errors, first_divergent=first, job_first=job_first)


def _flag_indexes(findings: Iterable[Finding], facts: Sequence[EntryFacts]) -> dict[str, float]:
    """The precision index of each node the judge names and of the modules around it (the path to it in the
    viewer: a collapsed module must show what is inside it): red, or yellow for a communication call the
    divergence arrives through, as compare's CSV makes its rows warnings; a module around both is red."""
    parents = {f.name: f.parent for f in facts}
    indexes: dict[str, float] = {}
    for finding in findings:
        index = WARNING_INDEX if finding.received else ERROR_INDEX
        name: str | None = finding.name
        depth = 0
        while name is not None and indexes.get(name, -1.0) < index and depth < 256:
            indexes[name] = index  # the modules above a node hold at least its index: stop where one does
            name, depth = parents.get(name), depth + 1
    return indexes


def _log_progress(options: GraphOptions, job: GraphJob, done: int, total: int) -> None:
    if options.progress_log:
        print(f"[graph] {done}/{total} graphs done ({100 * done // total}%): step{job.step} rank{job.rank}",
              flush=True)


@contextmanager
def _progress_bar(total: int, shown: bool) -> Iterator[Callable[[], None]]:
    """A transient bar of the graphs built, on a terminal; its advance function. Elsewhere (output to a pipe
    or a file, where the bar would show nothing) no bar at all: rich's refresh thread stays unstarted."""
    if not shown or sys.stdout is None or not sys.stdout.isatty():
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(transient=True, console=Console()) as bar:  # its own console: never nested in another display
        task = bar.add_task("building graphs", total=total)
        yield lambda: bar.advance(task)


def _execute(jobs: list[GraphJob], options: GraphOptions, choice: ExecutorChoice, registry: Any,
             progress: bool) -> list[JobResult]:
    if choice.kind == "local":
        choice = dataclasses.replace(choice, workers=max(1, min(choice.workers, os.cpu_count() or 1)))
    n = len(jobs)
    with _progress_bar(n, progress) as advance, job_executor(choice, n) as executor:
        results = []
        for job, result in zip(jobs, run_jobs(executor, _run_job_in_worker, jobs, [options] * n,
                                              [registry_ref(registry)] * n)):
            results.append(result)
            advance()
            _log_progress(options, job, len(results), n)
        return results

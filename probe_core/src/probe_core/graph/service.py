"""Run ``probe graph``: find the dumps, build (merge, compare) each graph, write one ``.vis.db``.

Work is cut into jobs, one per output graph (one rank of one step, or one
data-parallel group once per-rank graphs are merged); jobs run in worker
processes when ``workers > 1`` and hand back only rows and a summary.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_core.errors import GraphError
from probe_core.graph.match import match_graphs
from probe_core.graph.merge import Layout, merge_side
from probe_core.graph.model import Graph
from probe_core.graph.overflow import mark_overflow
from probe_core.graph.precision import TASK_OF_MODE, node_colors, score_graphs, tool_tips
from probe_core.graph.source import RankFolder, discover, load_graph
from probe_core.graph.summary import GraphSummary, summarize
from probe_core.graph.vis_db import GraphRows, VisConfig, graph_rows, write_vis_db


@dataclass(frozen=True)
class GraphOptions:
    """How to build and compare (everything a worker needs; picklable)."""

    overflow: bool = False
    fuzzy: bool = False
    layer_mapping: dict[str, dict[str, str]] | bool | None = None
    layouts: tuple[Layout, Layout] | None = None  # (target, bench) parallel layouts to merge


@dataclass(frozen=True)
class GraphJob:
    """One output graph: the rank dumps of each side that make it."""

    step: int
    rank: int
    target: tuple[RankFolder, ...]
    bench: tuple[RankFolder, ...] | None = None


@dataclass
class JobResult:
    rows: list[GraphRows] = field(default_factory=list)
    summary: GraphSummary | None = None
    micro_steps: int = 1
    mode: str = "statistics"


def _side(folders: Sequence[RankFolder], source: str, layout: Layout | None, step: int, rank: int,
          registry: Any) -> Graph:
    graphs = [load_graph(folder, source) for folder in folders]
    if layout is None or len(graphs) == 1 and layout.is_trivial:
        graph = graphs[0]
    else:
        graph = merge_side(graphs, layout, registry)
    graph.step, graph.rank, graph.source = step, rank, source
    return graph


def run_job(job: GraphJob, options: GraphOptions, registry: Any = None) -> JobResult:
    """Build (and compare) one graph; return its rows and summary.

    The cyclic garbage collector is paused meanwhile: a graph is millions of
    small long-lived objects, which it would otherwise rescan over and over.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return _run_job(job, options, registry)
    finally:
        if paused:
            gc.enable()


def _run_job(job: GraphJob, options: GraphOptions, registry: Any) -> JobResult:
    layouts = options.layouts or (None, None)
    target = _side(job.target, "NPU", layouts[0], job.step, job.rank, registry)
    result = JobResult(mode=target.mode)
    if options.overflow:
        mark_overflow(target)
    bench = None
    metrics = None
    if job.bench is not None:
        bench = _side(job.bench, "Bench", layouts[1], job.step, job.rank, registry)
        if options.overflow:
            mark_overflow(bench)
        mode = target.mode if target.mode == bench.mode else "statistics"
        if target.task == "structure" or bench.task == "structure":
            mode = "structure"
        result.mode = mode
        match_graphs(target, bench, fuzzy=options.fuzzy, layer_mapping=options.layer_mapping)
        metrics = score_graphs(target, bench, mode)
    elif target.task == "structure":
        result.mode = "structure"
    result.rows.append(graph_rows(target, metrics))
    if bench is not None:
        result.rows.append(graph_rows(bench))
    result.summary = summarize(target, bench)
    result.micro_steps = max(target.micro_steps, bench.micro_steps if bench else 1)
    return result


def _run_job_in_worker(job: GraphJob, options: GraphOptions) -> JobResult:
    registry = None
    if options.layouts is not None:
        from probe_core.plugins import load_registry

        registry = load_registry()
    return run_job(job, options, registry)


def plan_jobs(target_path: str | Path, bench_path: str | Path | None, options: GraphOptions) -> list[GraphJob]:
    """Pair the target's rank dumps with the bench's (by step and rank, or by merge group)."""
    targets = discover(target_path)
    benches = discover(bench_path) if bench_path is not None else None
    if options.layouts is not None:
        from probe_core.graph.merge import group_jobs

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
              progress: bool = True) -> tuple[Path, list[GraphSummary]]:
    """Everything ``probe graph`` does but printing: returns the written file and the summaries."""
    paused = gc.isenabled()
    gc.disable()  # see run_job
    try:
        return _run_graph(target_path, bench_path, output_dir, options, workers, registry, progress)
    finally:
        if paused:
            gc.enable()


def _run_graph(target_path: str | Path, bench_path: str | Path | None, output_dir: str | Path,
               options: GraphOptions, workers: int, registry: Any, progress: bool) -> tuple[Path, list[GraphSummary]]:
    jobs = plan_jobs(target_path, bench_path, options)
    results = _execute(jobs, options, workers, registry, progress)
    compare = bench_path is not None
    modes = {r.mode for r in results}
    mode = modes.pop() if len(modes) == 1 else "statistics"
    config = VisConfig(
        graph_type="compare" if compare else "build",
        task=TASK_OF_MODE.get(mode, "summary") if compare else "",
        tool_tip=tool_tips(mode) if compare else None,
        micro_steps=max(r.micro_steps for r in results),
        overflow_check=options.overflow,
        node_colors=node_colors(mode) if compare else None,
        ranks=[job.rank for job in jobs], steps=[job.step for job in jobs],
    )
    stamp = time.strftime("%Y%m%d%H%M%S")
    kind = "compare" if compare else "build"
    name, n = f"{kind}_{stamp}.vis.db", 0
    while (Path(output_dir) / name).exists():
        n += 1
        name = f"{kind}_{stamp}_{n}.vis.db"
    path = write_vis_db(Path(output_dir) / name, [rows for r in results for rows in r.rows], config)
    return path, [r.summary for r in results if r.summary is not None]


def _execute(jobs: list[GraphJob], options: GraphOptions, workers: int, registry: Any,
             progress: bool) -> list[JobResult]:
    from rich.progress import Progress

    workers = max(1, min(workers, len(jobs), os.cpu_count() or 1))
    with Progress(transient=True, disable=not progress) as bar:
        task = bar.add_task("building graphs", total=len(jobs))
        if workers == 1:
            results = []
            for job in jobs:
                results.append(run_job(job, options, registry))
                bar.advance(task)
            return results
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(_run_job_in_worker, job, options) for job in jobs]
            results = []
            for future in futures:
                results.append(future.result())
                bar.advance(task)
            return results

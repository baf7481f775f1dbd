"""Rank dump pairs: which target dump meets which bench dump, and the compare of each pair (facts and spooled rows,
not yet judged or written). The job (:mod:`probe_compare.engine`) and the noise reference
(:mod:`probe_compare.reference`) both start here.
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

from probe_compare.options import CompareOptions
from probe_compare.rank import PendingRank, _probe_warning, compare_ranks, rank_label
from probe_core.api import (CompareError, ExecutorChoice, RankDump, RegistryRef, job_executor, registry_of,
                            registry_ref, run_jobs)


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


def dump_spec(dump: RankDump) -> tuple[Path, int | None, int | None, bool]:
    """What a worker process needs to open ``dump`` again."""
    return (dump.dump_file, dump.step, dump.rank, dump.lenient)


def _pair_job(target: tuple, bench: tuple, ref: RegistryRef, options: CompareOptions) -> PendingRank:
    """One step of a rank in a worker process (``--workers`` with a single rank's several steps)."""
    return compare_ranks(RankDump(*target), RankDump(*bench), registry_of(ref), options)


def compare_pairs(pairs, registry, options: CompareOptions) -> list[PendingRank]:
    """Compare each (target, bench) pair: its facts and spooled rows, not yet judged. One pair after another with a
    progress bar each, or ``--workers`` processes, one pair each."""
    progress = _progress_bar() if options.progress else _NoProgress()
    results = []
    with progress:
        if options.workers > 1 and len(pairs) > 1:  # one process per rank pair
            n = len(pairs)
            task = progress.add_task(f"compare {n} rank dumps", total=n)
            alone = dataclasses.replace(options, workers=1, progress=False)
            with job_executor(ExecutorChoice("local", options.workers), n) as executor:
                for result in run_jobs(executor, _pair_job, [dump_spec(t) for t, _ in pairs],
                                       [dump_spec(b) for _, b in pairs], [registry_ref(registry)] * n, [alone] * n):
                    results.append(result)
                    progress.advance(task, 1)
            return results
        for target, bench in pairs:
            task = progress.add_task(f"compare {rank_label(target)}", total=None)
            results.append(compare_ranks(
                target, bench, registry, options,
                advance=lambda n, task=task: progress.advance(task, n),
                on_total=lambda total, task=task: progress.update(task, total=total)))
    return results


def _progress_bar():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    transient=True)


class _NoProgress:
    """What :func:`compare_pairs` calls of a progress bar, doing nothing (``--quiet``: rich is not imported)."""

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, *args: object, **kwargs: object) -> int:
        return 0

    def advance(self, *args: object) -> None:
        return None

    def update(self, *args: object, **kwargs: object) -> None:
        return None

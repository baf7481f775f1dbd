"""``--workers N``: run APIs in N processes (spawned, so that neither torch nor MindSpore state is forked);
``--executor dask`` / ``--scheduler ADDRESS``: on a Dask cluster's workers.

Each local worker builds its own backend once, on its own device (``-d 0 1``
gives worker i the device ``{kind}:{ids[i]}``), with the CPU threads shared
out between the workers. A cluster's worker builds one backend on ``--device``
at its first batch of APIs and keeps it for the next. Results come back in the
dump's order.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

from probe_acc_check.backend import Run, load_backend
from probe_acc_check.cases import ApiCase
from probe_acc_check.errors import AccCheckError

_STATE: dict[str, Any] = {}


def _init(framework: str, options: Any, counter: Any) -> None:
    from probe_acc_check.runner import tensor_loader

    threads = max(1, (os.cpu_count() or 1) // options.workers)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    devices = options.devices()
    try:
        _STATE["backend"] = load_backend(framework, options.backend_options(devices[index % len(devices)]))
    except AccCheckError as exc:
        _STATE["error"] = exc
    _STATE["seed"] = options.seed
    _STATE["load"] = tensor_loader(options.mode)


def _run(case: ApiCase) -> Run | str:
    from probe_acc_check.runner import run_case

    if "error" in _STATE:
        raise _STATE["error"]
    return run_case(case, _STATE["backend"], _STATE["seed"], _STATE["load"])


def in_workers(cases: list[ApiCase], framework: str, options: Any) -> Iterator[Run | str]:
    """The outcome of each case, in order, computed by ``options.workers`` processes."""
    context = multiprocessing.get_context("spawn")
    counter = context.Value("i", 0)
    workers = min(options.workers, len(cases))
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init,
                             initargs=(framework, replace(options, workers=workers), counter)) as pool:
        futures = [pool.submit(_run, case) for case in cases]
        try:
            for case, future in zip(cases, futures):
                try:
                    yield future.result()
                except BrokenProcessPool:
                    raise AccCheckError(f"a worker process died while running {case.name} or an API after it "
                                        f"(killed, or a crash in the framework); resume with --result_csv_path, "
                                        f"without --workers to see which API") from None
        finally:
            for future in futures:
                future.cancel()


CLUSTER_BATCH = 16  # APIs a cluster job runs: an API often takes a millisecond, a Dask job a few
_BACKENDS: dict[tuple, Any] = {}  # a cluster worker's backends, kept between its jobs


def _run_batch(cases: list[ApiCase], framework: str, options: Any) -> list[Run | str]:
    from probe_acc_check.runner import run_case, tensor_loader

    key = (framework, options.device, options.dtype, options.save_error_data)
    backend = _BACKENDS.get(key)
    if backend is None:
        backend = _BACKENDS[key] = load_backend(framework, options.backend_options(options.device))
    load = tensor_loader(options.mode)
    return [run_case(case, backend, options.seed, load) for case in cases]


def on_cluster(cases: list[ApiCase], framework: str, options: Any) -> Iterator[Run | str]:
    """The outcome of each case, in order, computed on a Dask cluster (``options.scheduler``, or a local
    cluster of ``options.workers`` processes), :data:`CLUSTER_BATCH` cases a job. The cluster is reached and
    the jobs sent now, so that a missing Dask or an unreachable scheduler is reported before any file is
    written; the outcomes come as the jobs finish."""
    from probe_core.api import ExecutorChoice, job_executor

    batches = [cases[at:at + CLUSTER_BATCH] for at in range(0, len(cases), CLUSTER_BATCH)]
    stack = ExitStack()
    executor = stack.enter_context(job_executor(ExecutorChoice("dask", options.workers, options.scheduler),
                                                len(batches)))
    n = len(batches)
    try:
        outcomes = executor.map(_run_batch, batches, [framework] * n, [options] * n)  # Dask wants sized lists
    except BaseException:
        stack.close()
        raise
    return _flattened(outcomes, stack)


def _flattened(batches: Iterator[list[Run | str]], stack: ExitStack) -> Iterator[Run | str]:
    with stack:  # the cluster is left when the last outcome is read (or the reader stops)
        for batch in batches:
            yield from batch

"""Where a command's independent jobs run: this machine's processes, or a Dask cluster.

``probe compare``, ``probe graph`` and ``probe acc-check`` split their work into jobs that need nothing of
each other (a rank's chain of steps, one step of a rank, one graph, a batch of APIs to re-run).
:func:`job_executor` gives them a :class:`concurrent.futures.Executor` to submit those jobs to:

* ``--executor local`` (the default): ``--workers N`` forked processes of this machine (none at 1);
* ``--executor dask``: a Dask distributed cluster: the scheduler ``--scheduler tcp://host:8786`` (a cluster
  started with ``dask scheduler`` / ``dask worker``, or by ``dask-jobqueue`` on Slurm, PBS or LSF), or when
  none is given a local cluster of ``--workers`` processes. Install it with ``pip install 'probe-core[dask]'``.

Dask rather than Ray: its wheels are pure Python and light, ``dask-jobqueue`` starts workers where large
training jobs live (Slurm/PBS clusters), and its client is a ``concurrent.futures`` executor, so the local
and the distributed runs share one code path. The workers of a cluster must see the dumps and the output
folder at the same paths as the client (a shared file system), as the training job's ranks did.

A job's function must be importable and its arguments picklable. Plugins do not travel: a job asks
:func:`registry_of` for its registry, which is the parent's own in a forked local worker and one built from
the same ``config.json`` plugin selection on a cluster's worker.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from probe_core.errors import ProbeError

EXECUTORS = ("local", "dask")


@dataclass(frozen=True)
class ExecutorChoice:
    """``--executor``, ``--scheduler`` and ``--workers`` as a command was given them."""

    kind: str = "local"
    workers: int = 1
    scheduler: str | None = None

    @property
    def parallel(self) -> bool:
        """Whether jobs leave this process (a local pool of several workers, or any cluster)."""
        return self.kind != "local" or self.workers > 1


def add_executor_arguments(parser: argparse.ArgumentParser, workers_help: str | None) -> None:
    """``--workers``, ``--executor`` and ``--scheduler``, the same on every command that has jobs
    (``workers_help`` ``None``: the command declares its own ``--workers``)."""
    if workers_help is not None:
        parser.add_argument("--workers", type=int, default=1, metavar="N", help=workers_help)
    parser.add_argument("--executor", choices=EXECUTORS, default=None,
                        help="where jobs run: local processes (default) or a Dask cluster (pip install "
                             "'probe-core[dask]'; a local cluster of --workers processes unless --scheduler)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="the Dask scheduler to send jobs to, e.g. tcp://host:8786 (implies --executor dask)")


def executor_choice(args: argparse.Namespace, error: type[ProbeError] = ProbeError,
                    workers: int | None = None) -> ExecutorChoice:
    """The :class:`ExecutorChoice` of parsed arguments (``workers``: the command's own count, instead of
    ``--workers``); a clear error for a bad combination."""
    workers = args.workers if workers is None else workers
    if workers < 1:
        raise error(f"--workers {workers}: give 1 or more")
    kind = args.executor or ("dask" if args.scheduler else "local")
    if args.scheduler and kind != "dask":
        raise error(f"--scheduler {args.scheduler} sends jobs to a Dask cluster: drop --executor {kind}")
    return ExecutorChoice(kind, workers if kind == "dask" else min(workers, os.cpu_count() or 1), args.scheduler)


# -- the registry a job runs with ----------------------------------------------------------

_LOCAL_REGISTRIES: dict[int, Any] = {}  # what forked workers inherit from the parent


@dataclass(frozen=True)
class RegistryRef:
    """A picklable stand-in for a registry: its key in this process, and the plugin selection it was built with."""

    key: int
    selection: Any


def registry_ref(registry: Any) -> RegistryRef:
    _LOCAL_REGISTRIES[id(registry)] = registry
    return RegistryRef(id(registry), getattr(registry, "selection", None))


def registry_of(ref: RegistryRef) -> Any:
    """The registry ``ref`` stands for: the parent's own (forked), else one built from its selection."""
    registry = _LOCAL_REGISTRIES.get(ref.key)
    if registry is not None:
        return registry
    if ref.selection is None:
        raise ProbeError("this job's plugin registry holds in-process plugins, which a cluster's worker cannot "
                         "load: install them as distributions (entry points) or run with --executor local")
    from probe_core.plugins import current_registry

    return current_registry(ref.selection)


# -- the executors ----------------------------------------------------------------------------


@contextmanager
def job_executor(choice: ExecutorChoice, jobs: int) -> Iterator[Executor | None]:
    """An executor for ``jobs`` jobs as ``choice`` says, or ``None``: run them here, one after another."""
    if choice.kind == "dask":
        with _dask_executor(choice) as executor:
            yield executor
        return
    workers = min(choice.workers, jobs)
    if workers <= 1:
        yield None
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
        yield pool


@contextmanager
def _dask_executor(choice: ExecutorChoice) -> Iterator[Executor]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ProbeError("--executor dask needs Dask distributed, which is not installed: "
                         "pip install 'probe-core[dask]' (or leave out --executor/--scheduler)") from None
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)  # its INFO lines would bury probe's output
    cluster = None
    try:
        if choice.scheduler:
            client = Client(choice.scheduler, timeout=30)
        else:
            cluster = LocalCluster(n_workers=choice.workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
    except (OSError, TimeoutError) as exc:
        where = choice.scheduler or "a local cluster"
        raise ProbeError(f"--executor dask: cannot reach {where}: {exc}; start the scheduler "
                         "(dask scheduler; dask worker ADDRESS) or check the address") from None
    try:
        yield client.get_executor(pure=False)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_jobs(executor: Executor | None, function: Any, *arguments: list[Any]) -> Iterator[Any]:
    """``function`` over the zipped ``arguments``, results in order: on ``executor``, or here when ``None``."""
    if executor is None:
        return map(function, *arguments)
    return executor.map(function, *arguments)

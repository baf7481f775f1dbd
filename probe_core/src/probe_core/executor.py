"""Where a command's independent jobs run: this machine's processes, or a Dask cluster.

``probe compare``, ``probe graph`` and ``probe acc-check`` split their work into jobs that need nothing of
each other (a rank's chain of steps, one step of a rank, one graph, a batch of APIs to re-run).
:func:`job_executor` gives them a :class:`concurrent.futures.Executor` to submit those jobs to:

* ``--executor local`` (the default): ``--workers N`` forked processes of this machine (none at 1);
* ``--executor dask``: a Dask distributed cluster: the scheduler ``--scheduler tcp://host:8786`` (a cluster
  started with ``dask scheduler`` / ``dask worker``, or by ``dask-jobqueue`` on Slurm, PBS or LSF), or when
  none is given a local cluster of ``--workers`` processes. Install it with ``pip install 'probe-core[dask]'``.
  A ``--scheduler`` address must send Dask's handshake within :data:`SCHEDULER_TIMEOUT` seconds
  (:func:`check_scheduler`); anything else listening there is one clear line, not a hang.

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
import os
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from probe_core.errors import ProbeError
from probe_core.records import record

if TYPE_CHECKING:  # multiprocessing and sockets cost a command's start; imported when a pool starts
    import socket
    from concurrent.futures import Executor

EXECUTORS = ("local", "dask")
#: seconds a ``--scheduler`` address has to answer as a Dask scheduler (it sends its handshake at once)
SCHEDULER_TIMEOUT = 5
#: the largest handshake read from a ``--scheduler`` address (Dask's is about a hundred bytes)
_MAX_HANDSHAKE = 1 << 16


@record
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


@record
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
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

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
            check_scheduler(choice.scheduler)
            client = Client(choice.scheduler, timeout=SCHEDULER_TIMEOUT)
        else:
            cluster = LocalCluster(n_workers=choice.workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
    except (OSError, TimeoutError) as exc:
        if choice.scheduler:
            raise _no_scheduler(choice.scheduler, str(exc) or type(exc).__name__) from None
        raise ProbeError(f"--executor dask: cannot start a local cluster: {exc}; run with --executor local "
                         "or start a scheduler (dask scheduler; dask worker ADDRESS) and give --scheduler") from None
    try:
        yield client.get_executor(pure=False)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _no_scheduler(address: str, why: str) -> ProbeError:
    return ProbeError(f"--scheduler {address}: no Dask scheduler answered within {SCHEDULER_TIMEOUT}s ({why}); "
                      "start one with dask scheduler or drop --executor dask")


def _receive(sock: socket.socket, size: int, deadline: float) -> bytes:
    """Exactly ``size`` bytes from ``sock`` before ``deadline`` (``TimeoutError``/``ConnectionError`` else)."""
    data = bytearray()
    while len(data) < size:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        chunk = sock.recv(min(size - len(data), _MAX_HANDSHAKE))
        if not chunk:
            raise ConnectionError("it closed the connection without a Dask handshake")
        data += chunk
    return bytes(data)


def _handshake(payload: bytes) -> Any:
    """The message a Dask comm's frames ``payload`` holds, never deserialising pickles."""
    from distributed.protocol.core import loads
    from distributed.protocol.utils import unpack_frames

    frames = struct.unpack_from("Q", payload)[0]
    if not 0 < frames <= 16:
        raise ValueError(f"{frames} frames")
    return loads(unpack_frames(payload), deserialize=False)


def check_scheduler(address: str, timeout: float = SCHEDULER_TIMEOUT) -> None:
    """Refuse a ``tcp://`` ``address`` (one line) unless a Dask scheduler's handshake arrives from it within
    ``timeout`` seconds. Dask's own handshake has no timeout (a silent server hangs the client) and trusts the
    length a server sends (garbage asks for exabytes), so the handshake is read here first, bounded."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location, 8786)
    except (ValueError, TypeError) as exc:
        raise ProbeError(f"--scheduler {address}: not a scheduler address ({exc}); give tcp://HOST:8786") from None
    if scheme != "tcp":
        return  # tls://, ucx://, ...: Dask's own connect checks those, with its timeout
    deadline = time.monotonic() + timeout
    try:
        import socket

        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise _no_scheduler(address, f"cannot connect: {exc.strerror or exc}") from None
    with sock:
        try:
            header = _receive(sock, 8, deadline)
            size = struct.unpack("Q", header)[0]
            if not 8 <= size <= _MAX_HANDSHAKE:
                raise _no_scheduler(address, f"it answered {header!r}..., not Dask's protocol")
            payload = _receive(sock, size, deadline)
        except TimeoutError:
            raise _no_scheduler(address, "it accepted the connection but sent no Dask handshake") from None
        except OSError as exc:
            raise _no_scheduler(address, exc.strerror or str(exc)) from None
    try:
        message = _handshake(payload)
    except Exception:  # whatever garbage decodes into
        message = None
    if not (isinstance(message, dict) and "python" in message):
        raise _no_scheduler(address, f"it answered {header + payload[:24]!r}..., not Dask's protocol")


def run_jobs(executor: Executor | None, function: Any, *arguments: list[Any]) -> Iterator[Any]:
    """``function`` over the zipped ``arguments``, results in order: on ``executor``, or here when ``None``."""
    if executor is None:
        return map(function, *arguments)
    return executor.map(function, *arguments)

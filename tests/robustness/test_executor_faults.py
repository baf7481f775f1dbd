"""Issue 32, item 4: ``--scheduler`` pointing at something that is not a Dask scheduler (a service that answers
garbage, one that accepts and says nothing, nothing at all) is one clear line within seconds, exit 2 — never a
hang (Dask's handshake has no timeout) or an exabyte allocation (Dask trusts the length a peer sends). The real
CLI against real local TCP servers; ``probe compare`` and ``probe acc-check`` share the executor code."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.robustness.helpers import assert_clean_error, dump_pair, run_probe

pytest.importorskip("distributed")

#: an HTTP reply whose first 8 bytes, read as Dask's length prefix, ask for about 3.5 EiB
GARBAGE = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
#: the most a refusal may take: the probe waits 5 s for a handshake, the CLI starts in a few
FAST = 45


@contextmanager
def tcp_server(reply: bytes | None) -> Iterator[int]:
    """A local TCP service on a free port that sends ``reply`` to each connection (``None``: nothing) and
    keeps it open; yields the port."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            held.append(conn)
            if reply:
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


def _refused_fast(args: list[object], address: str, why: str) -> None:
    start = time.monotonic()
    result = run_probe(*args, "--scheduler", address, timeout=120)
    took = time.monotonic() - start
    assert_clean_error(result, f"--scheduler {address}: no Dask scheduler answered within", why,
                       "start one with dask scheduler or drop --executor dask")
    assert took < FAST, took


@pytest.mark.parametrize(("reply", "why"), [(GARBAGE, "not Dask's protocol"),
                                            (None, "accepted the connection but sent no Dask handshake")],
                         ids=["answers garbage", "says nothing"])
def test_compare_refuses_a_service_that_is_not_a_dask_scheduler(tmp_path, reply, why):
    target, bench = dump_pair(tmp_path)
    with tcp_server(reply) as port:
        _refused_fast(["compare", target, bench, "-o", tmp_path / "out", "--executor", "dask"],
                      f"tcp://127.0.0.1:{port}", why)
    assert not list((tmp_path / "out").glob("*.csv"))  # refused before any result was written


def test_compare_refuses_an_address_where_nothing_listens(tmp_path):
    target, bench = dump_pair(tmp_path)
    _refused_fast(["compare", target, bench, "-o", tmp_path / "out"], f"tcp://127.0.0.1:{_free_port()}",
                  "cannot connect: Connection refused")


def test_acc_check_shares_the_refusal(tmp_path):
    target, _ = dump_pair(tmp_path)
    with tcp_server(GARBAGE) as port:
        _refused_fast(["acc-check", "-api_info", target / "dump.json", "-o", tmp_path / "acc"],
                      f"tcp://127.0.0.1:{port}", "not Dask's protocol")

"""End to end: TensorBoard with tb-graph-ascend serves probe's .vis.db files over HTTP.

Starts the real viewer on a free 127.0.0.1 port against probe's output and
asks its HTTP API (``/data/plugin/graph_ascend/``) for a node, as the browser
page does: load_meta_dir, loadGraphData, loadGraphConfigInfo, getNodeInfo.
"""

from __future__ import annotations

from collections.abc import Callable

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from probe_graph.serve import tensorboard_command, viewer_installed
from tests.graph.helpers import PROBE, TORCH_DUMP, run_probe

API = "/data/plugin/graph_ascend"
NODE = "Module.blocks.0.attn.qkv.Linear.forward.0"
START_TIMEOUT = 90


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(base: str, path: str):
    with urllib.request.urlopen(base + path, timeout=20) as response:
        return json.loads(response.read())


def _load_graph(base: str, meta: dict) -> str:
    """loadGraphData opens the file; the plugin answers the bare word 'success' (a dict sent as a body)."""
    query = f"/loadGraphData?run={meta['run']}&tag={meta['tag']}&type=db"
    with urllib.request.urlopen(base + query, timeout=20) as response:
        return response.read().decode()


def _post(base: str, path: str, body: dict):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=20) as response:
        return json.loads(response.read())


@pytest.fixture
def viewer(tmp_path: Path):
    """A running TensorBoard on ``tmp_path/logdir``: yields (base url, logdir); always stopped."""
    assert viewer_installed(), "tb-graph-ascend is a test requirement (requirements-dev.txt)"
    logdir = tmp_path / "logdir"
    run_probe("-tp", TORCH_DUMP, "-o", logdir / "single")
    run_probe("-tp", TORCH_DUMP, "-gp", TORCH_DUMP, "-o", logdir / "pair")
    port = _free_port()
    log = (tmp_path / "tensorboard.log").open("w")
    server = subprocess.Popen(tensorboard_command(logdir, port), stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}{API}"
    try:
        meta = _wait_for_viewer(server, base, lambda: (tmp_path / "tensorboard.log").read_text())
        yield base, meta
    finally:
        _stop(server)
        log.close()


def _wait_for_viewer(server: subprocess.Popen, base: str, log: Callable[[], str]) -> dict:
    """The viewer's run list once it serves one; fails (with the server's log) after START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            meta = _get(base, "/load_meta_dir")
            if meta.get("data"):
                return meta
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the viewer did not come up: {log()}")
        time.sleep(0.5)


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=15)


def _meta(run: str, tag: str) -> dict:
    return {"run": run, "tag": tag, "type": "db", "lang": "en", "rank": 0, "step": 0, "microStep": -1}


@pytest.mark.slow
def test_viewer_reads_probe_files(viewer) -> None:
    base, meta = viewer
    runs = meta["data"]
    assert set(runs) == {"single", "pair"}
    assert all(run["type"] == "db" for run in runs.values())

    single = _meta("single", runs["single"]["tags"][0])
    assert _load_graph(base, single) == "success"
    config = _post(base, "/loadGraphConfigInfo", {"metaData": single})
    assert config["success"] and config["data"]["isSingleGraph"] and config["data"]["ranks"] == [0]
    info = _post(base, "/getNodeInfo", {"metaData": single, "nodeInfo": {"nodeName": NODE, "nodeType": "Single"}})
    assert info["success"], info
    node = info["data"]["npu"]
    assert node["node_name"] == NODE and node["upnode"] == "Module.blocks.0.attn.Attention.forward.0"
    assert node["subnodes"] == ["Functional.linear.0.forward"]
    assert node["input_data"][f"{NODE}.parameters.weight"]["shape"] == "[192, 64]"
    assert any("model.py" in line for line in node["stack_info"])  # tb_stack joined

    pair = _meta("pair", runs["pair"]["tags"][0])
    assert _load_graph(base, pair) == "success"
    config = _post(base, "/loadGraphConfigInfo", {"metaData": pair})
    assert config["success"] and not config["data"]["isSingleGraph"]
    assert "#C7C7C7" in config["data"]["colors"]
    info = _post(base, "/getNodeInfo", {"metaData": pair, "nodeInfo": {"nodeName": NODE, "nodeType": "NPU"}})
    assert info["success"], info
    assert info["data"]["npu"]["node_name"] == NODE and info["data"]["bench"]["node_name"] == NODE
    assert info["data"]["npu"]["data"]["precision_index"] == 0


@pytest.mark.slow
def test_probe_graph_serve_starts_the_viewer_on_loopback(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_probe("-tp", TORCH_DUMP, "-o", out)
    port = _free_port()
    server = subprocess.Popen([PROBE, "graph", "--serve", str(out), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        meta = _wait_for_viewer(server, f"http://127.0.0.1:{port}{API}", lambda: "(probe graph --serve)")
        assert list(meta["data"]) == ["out"]
    finally:
        _stop(server)
    assert f"127.0.0.1:{port}" in server.stdout.read()


def test_serve_without_viewer_or_files_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    from probe_core.errors import GraphError
    from probe_graph import serve as serve_module

    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([PROBE, "graph", "--serve", str(empty)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no *.vis.db" in done.stderr
    run_probe("-tp", TORCH_DUMP, "-o", tmp_path / "out")
    monkeypatch.setattr(serve_module, "viewer_installed", lambda: False)
    with pytest.raises(GraphError, match="pip install tb-graph-ascend"):
        serve_module.serve(tmp_path / "out", 0)

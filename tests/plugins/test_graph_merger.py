"""A graph merger from outside: tests/plugins/packages/probe-test-merger (merger ``audit``), pip-installed.

It registers priority 5 (the built-in ``tp`` has 0, ``vpp`` 10, ``pp`` 20), changes nothing and logs
each call. On a real tp=2 x pp=2 dump
(tests/graph/toy_megatron.py) it must run once per merged side, after tp merged each stage's two
ranks and before pp stitched the two stages.
"""

from __future__ import annotations

import json

from tests.config_check.conftest import run_probe
from tests.plugins.conftest import only_db, read_db, write_config

LAYOUT = ("--rank-size", "4", "--tp", "2", "--pp", "2")


def _calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_merger_runs_between_tp_and_pp(toy_tp2pp2, plugin_site, tmp_path):
    log = tmp_path / "audit.jsonl"
    done = run_probe("graph", "-tp", toy_tp2pp2, "-o", tmp_path / "g", *LAYOUT,
                     env={"MERGE_AUDIT_LOG": str(log)}, pythonpath=[plugin_site])
    assert done.returncode == 0, done.stdout + done.stderr
    calls = _calls(log)
    assert len(calls) == 1, calls  # one data-parallel group, one side
    call = calls[0]
    assert call["layout"] == {"tp": 2, "pp": 2, "vpp": 1}
    assert call["graphs"] == 2 and call["ranks"] == [0, 2]  # the two stages' first tp ranks: tp merged them
    assert call["tp_merged"] == [True, True] and call["pp_stitched"] == [False, False]
    # its input came back unchanged: pp stitched the stages as without it
    _, nodes = read_db(only_db(tmp_path / "g"))
    assert "pp=2" in nodes[("NPU", "DefaultModel")]["parallel_merge_info"]
    assert "Module.layers.1.ParallelMLP.forward.0" in {name for _, name in nodes}


def test_merger_order_in_probe_plugins_and_disabling(toy_tp2pp2, plugin_site, tmp_path):
    done = run_probe("plugins", "--json", pythonpath=[plugin_site])
    plugins = {row["name"]: row for row in json.loads(done.stdout)}
    assert plugins["merge_audit"]["provides"] == {"graph_mergers": ["audit"]}
    log = tmp_path / "audit.jsonl"
    config = write_config(tmp_path / "cfg.json", {"plugins": {"disable": ["merge_audit"]}})
    done = run_probe("graph", "-tp", toy_tp2pp2, "-o", tmp_path / "g", *LAYOUT, "-c", config,
                     env={"MERGE_AUDIT_LOG": str(log)}, pythonpath=[plugin_site])
    assert done.returncode == 0, done.stdout + done.stderr
    assert _calls(log) == []

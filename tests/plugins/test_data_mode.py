"""A data mode from outside: examples/plugins/probe-xor, pip-installed, through run, compare, graph and plugins.

Also: disabling a data mode (the third-party ``xor``, the built-in ``md5``) in config.json turns exactly
that mode off, with one clear error line for a config that asks for it.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.config_check.conftest import PROBE, run_probe
from tests.plugins.conftest import TRAIN_SMALL, csv_rows, error_lines, only_db, read_db, run_together, write_config

GELU = "Functional.gelu.0.forward"


def _records(dump: Path):
    data = json.loads((dump / "step0" / "rank0" / "dump.json").read_text())["data"]
    for entry in data.values():
        for side in ("input_args", "output"):
            for item in entry.get(side) or []:
                if isinstance(item, dict) and "dtype" in item and "shape" in item:
                    yield item


def _names_summary_mode(lines: list[str], mode: str) -> bool:
    """One error line naming the key summary_mode and the value (``summary_mode "xor"`` or
    ``key "statistics.summary_mode": "xor" is not allowed``)."""
    return len(lines) == 1 and "summary_mode" in lines[0] and f'"{mode}"' in lines[0]


def test_xor_run_writes_integer_checksums(xor_dumps):
    records = list(_records(xor_dumps / "A"))
    assert records
    assert all(isinstance(r["md5"], int) and not isinstance(r["md5"], bool) for r in records)
    assert not any("Max" in r or "Norm" in r for r in records)
    assert not (xor_dumps / "A" / "step1").exists()  # "step": [0]


def test_xor_compare_finds_the_gelu(xor_dumps, plugin_site, tmp_path):
    done = run_probe("compare", xor_dumps / "B", xor_dumps / "A", "-o", tmp_path / "out", pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["mode"] == "xor"
    first = summary["first_divergence"]
    assert first["name"] == GELU and first["reason"].startswith("output.0: XOR ")
    rows = csv_rows(tmp_path / "out")
    assert {"NPU XOR", "BENCH XOR"} <= set(rows[0]) and "Max diff" not in rows[0]
    gelu = next(r for r in rows if r["NPU Name"] == f"{GELU}.output.0")
    # the noise judge (default) uses the mode's discrepancy: a checksum that differs is an infinite one
    assert gelu["Result"] == "error" and "adds error" in gelu["Err_message"]
    assert gelu["NPU XOR"] != gelu["BENCH XOR"]
    # msprobe's rules run the mode's own judge_row
    done = run_probe("compare", xor_dumps / "B", xor_dumps / "A", "-o", tmp_path / "legend", "--rules", "msprobe",
                     pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    gelu = next(r for r in csv_rows(tmp_path / "legend") if r["NPU Name"] == f"{GELU}.output.0")
    assert gelu["Result"] == "error" and "XOR checksum differs" in gelu["Err_message"]


def test_xor_graph_colours_the_gelu(xor_dumps, plugin_site, tmp_path):
    done = run_probe("graph", xor_dumps / "B", xor_dumps / "A", "-o", tmp_path / "g", pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    config, nodes = read_db(only_db(tmp_path / "g"))
    assert config["task"] == "md5" and "NPU XOR" in json.loads(config["tool_tip"])
    assert nodes[("NPU", GELU)]["precision_index"] == 1
    assert nodes[("NPU", "Module.blocks.0.mlp.1.GELU.forward.0")]["precision_index"] == 1
    assert nodes[("NPU", "Functional.layer_norm.0.forward")]["precision_index"] == 0  # before the gelu: equal


def test_disabled_xor_is_reported_and_refused(plugin_site, tmp_path):
    plain = write_config(tmp_path / "plain.json", {"plugins": {"disable": ["xor"]}})
    done = run_probe("plugins", "-c", plain, "--json", pythonpath=[plugin_site])
    assert done.returncode == 0, done.stderr
    plugins = {row["name"]: row for row in json.loads(done.stdout)}
    assert plugins["xor"]["status"] == "disabled" and plugins["xor"]["distribution"] == "probe-xor"
    assert plugins["absmean"]["status"] == "enabled"  # only the named plugin
    config = write_config(tmp_path / "cfg.json", {"task": "statistics", "statistics": {"summary_mode": "xor"},
                                                  "plugins": {"disable": ["xor"]}})
    done = run_probe("run", "-c", config, "--dump-path", tmp_path / "dump", TRAIN_SMALL, pythonpath=[plugin_site])
    assert done.returncode == 2, done.stdout + done.stderr
    assert _names_summary_mode(error_lines(done.stderr), "xor"), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "dump").exists()


def test_disabling_md5_leaves_statistics_and_tensor(tmp_path):
    config = write_config(tmp_path / "cfg.json", {"plugins": {"disable": ["md5"]}, "step": [0]})
    done = run_probe("plugins", "-c", config, "--json")
    assert done.returncode == 0, done.stderr
    status = {row["name"]: row["status"] for row in json.loads(done.stdout)}
    assert status["md5"] == "disabled" and status["statistics"] == status["tensor"] == "enabled"

    md5 = write_config(tmp_path / "md5.json", {"plugins": {"disable": ["md5"]}, "statistics": {"summary_mode": "md5"}})
    done = run_probe("run", "-c", md5, "--dump-path", tmp_path / "md5", TRAIN_SMALL)
    assert done.returncode == 2, done.stdout + done.stderr
    assert _names_summary_mode(error_lines(done.stderr), "md5") and "Traceback" not in done.stderr, done.stderr

    run_together(([PROBE, "run", "-c", str(config), "--dump-path", "stat", str(TRAIN_SMALL)], tmp_path),
                 ([PROBE, "run", "-c", str(config), "--task", "tensor", "--dump-path", "tensor", str(TRAIN_SMALL)],
                  tmp_path))
    records = list(_records(tmp_path / "stat"))
    assert records and all("Max" in r and "md5" not in r for r in records)
    assert any((tmp_path / "tensor" / "step0" / "rank0" / "dump_tensor_data").iterdir())

"""Every ``msprobe compare`` flag on ``probe compare``, with msprobe's meaning, through the real CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from .dumps import tiny_model_entries, write_dump
from .helpers import FIXTURES, read_csv, read_summary, result_csv, run_probe

PT = FIXTURES / "msprobe_pytorch_stat_mix"
MS = FIXTURES / "msprobe_mindspore_stat_mix"
STAMPED = re.compile(r"compare_result_rank0_\d{14}\.(csv|xlsx)")


def renamed(entries: list[tuple], old: str, new: str) -> list[tuple]:
    return [(item[0].replace(old, new), item[1].replace(old, new) if item[1] else None, *item[2:])
            for item in entries]


def dump_pair(tmp_path: Path, target: list[tuple], bench: list[tuple], mode: str = "statistics",
              framework: str = "pytorch") -> tuple[Path, Path]:
    write_dump(tmp_path / "t" / "step0" / "rank0", target, mode, framework)
    write_dump(tmp_path / "b" / "step0" / "rank0", bench, mode)
    return tmp_path / "t", tmp_path / "b"


def compare(*args: object) -> tuple[dict, list[dict[str, str]], str]:
    out = Path(args[args.index("-o") + 1])
    done = run_probe("compare", *args, "--quiet")
    assert done.returncode == 0, done.stderr
    return read_summary(out), read_csv(result_csv(out)), done.stdout + done.stderr


def test_csv_by_default_xlsx_when_asked_named_as_msprobe(tmp_path):
    t, b = dump_pair(tmp_path, tiny_model_entries(1.01), tiny_model_entries())
    compare(t, b, "-o", tmp_path / "csv")
    assert [STAMPED.fullmatch(p.name) is not None for p in (tmp_path / "csv").glob("compare_result_*")] == [True]
    assert not list((tmp_path / "csv").glob("*.xlsx"))
    summary, _, _ = compare("-tp", t, "-gp", b, "-o", tmp_path / "xlsx", "--xlsx")
    (xlsx,) = (tmp_path / "xlsx").glob("*.xlsx")
    assert STAMPED.fullmatch(xlsx.name) and summary["ranks"][0]["xlsx"] == str(xlsx)
    compare(t, b, "-o", tmp_path / "old", "--no-xlsx")  # probe's old flag still works (now the default)


def test_several_steps_go_to_step_folders(tmp_path):
    for side, scale in (("t", 1.01), ("b", 1.0)):
        for step in (0, 1):
            write_dump(tmp_path / side / f"step{step}" / "rank0", tiny_model_entries(scale))
    summary, _, _ = compare(tmp_path / "t", tmp_path / "b", "-o", tmp_path / "out")
    for step in (0, 1):
        assert Path(result_csv(tmp_path / "out", 0, step)).parent == tmp_path / "out" / f"step{step}"
    assert len(summary["ranks"]) == 2


def test_bare_lm_maps_mindspore_to_pytorch_and_gamma_beta_to_weight_bias(tmp_path):
    _, rows, _ = compare(MS / "step0", PT / "step0" / "proc11440", "-o", tmp_path / "out", "-lm")
    pairs = {r["NPU Name"]: r["Bench Name"] for r in rows}
    ln = "Cell.blocks.0.ln1.LayerNorm"
    assert pairs[f"{ln}.forward.0.parameters.gamma"] == "Module.blocks.0.ln1.LayerNorm.forward.0.parameters.weight"
    assert pairs[f"{ln}.parameters_grad.0.beta"] == "Module.blocks.0.ln1.LayerNorm.parameters_grad.0.bias"
    assert pairs["Mint.matmul.0.forward.input.0"] == "Torch.matmul.0.forward.input.0"
    assert not any(name.endswith((".gamma", ".beta")) and bench == "N/A" for name, bench in pairs.items())
    # ops.matmul is torch.matmul (the shipped table); -fm pairs the calls in order within their parent
    _, rows, _ = compare(MS / "step0", PT / "step0" / "proc11440", "-o", tmp_path / "fuzzy", "-lm", "-fm")
    pairs = {r["NPU Name"]: r["Bench Name"] for r in rows}
    assert pairs["Functional.matmul.0.forward.input.0"] == "Torch.matmul.1.forward.input.0"


def test_cell_mapping_renames_modules(tmp_path):
    t, b = dump_pair(tmp_path, renamed(tiny_model_entries(), "fc1.Linear", "dense1.Dense"), tiny_model_entries())
    summary, _, _ = compare(t, b, "-o", tmp_path / "plain")
    assert summary["counts"]["unmatched"] > 0
    mapping = tmp_path / "cells.yaml"
    mapping.write_text("dense1.Dense: fc1.Linear\n")
    summary, rows, _ = compare(t, b, "-o", tmp_path / "out", "-cm", mapping)
    assert summary["counts"]["unmatched"] == 0
    assert {"Module.dense1.Dense.forward.0.input.0": "Module.fc1.Linear.forward.0.input.0"}.items() <= \
        {r["NPU Name"]: r["Bench Name"] for r in rows}.items()


def test_api_mapping_file_pairs_arguments_by_position(tmp_path):
    x, y = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
    target = [("Functional.my_mm.0.forward", None, [y, x], [x @ y])]  # operands swapped, another name
    bench = [("Torch.matmul.0.forward", None, [x, y], [x @ y])]
    t, b = dump_pair(tmp_path, target, bench, framework="mindspore")
    mapping = tmp_path / "api.yaml"
    mapping.write_text("- ms_api: Functional.my_mm\n  pt_api: Torch.matmul\n  ms_args: [0, 1]\n  pt_args: [1, 0]\n"
                       "  ms_outputs: [0]\n  pt_outputs: [0]\n")
    summary, rows, _ = compare(t, b, "-o", tmp_path / "out", "-am", mapping)
    assert summary["counts"] == {"pass": 1, "warning": 0, "error": 0, "unmatched": 0}
    assert {r["NPU Name"]: r["Bench Name"] for r in rows}["Functional.my_mm.0.forward.input.0"] == \
        "Torch.matmul.0.forward.input.1"


def test_data_mapping_pairs_named_entries_and_tensors(tmp_path):
    entries = tiny_model_entries()
    t, b = dump_pair(tmp_path, renamed(entries, "Functional.relu.0", "Functional.my_relu.0"), entries)
    mapping = tmp_path / "data.yaml"
    mapping.write_text("Functional.my_relu.0.forward.input.0: Functional.relu.0.forward.input.0\n"
                       "Functional.my_relu.0.forward.output.0: Functional.relu.0.forward.output.0\n")
    summary, rows, _ = compare(t, b, "-o", tmp_path / "out", "-dm", mapping)
    assert summary["counts"]["unmatched"] == 0 and summary["counts"]["error"] == 0
    assert {r["NPU Name"]: r["Bench Name"] for r in rows}["Functional.my_relu.0.forward.output.0"] == \
        "Functional.relu.0.forward.output.0"


def test_diff_analyze_tensor_log_mode_and_rank_list(tmp_path):
    t, b = dump_pair(tmp_path, tiny_model_entries(1.01), tiny_model_entries())
    _, _, said = compare(t, b, "-o", tmp_path / "out", "-da", "-tensor_log", "-m", "offline_model", "--rank", "0,1")
    (found,) = (tmp_path / "out").glob("diff_analyze_*.json")
    assert json.loads(found.read_text())["rank_0"][0]["name"] == "Module.fc1.Linear.forward.0"
    # the log is written with the job's verdicts: the entry that adds error is an error, as in the CSV
    assert "[compare] Module.fc1.Linear.forward.0: error (3 tensors" in said
    assert "[compare] Functional.relu.0.forward: pass" in said  # it only carries fc1's error on
    assert "[compare] Functional.linear.0.forward: pass" in said
    assert "-m offline_model" in said and "auto" in said  # one warning: the mode needs Ascend tools
    assert run_probe("compare", t, b, "-o", tmp_path / "x", "-m", "nonsense").returncode == 2


def test_consistent_check_maps_training_module_names(tmp_path):
    entries = tiny_model_entries()
    t, b = dump_pair(tmp_path, renamed(entries, "fc1.", "linear_fc1."), renamed(entries, "fc1.", "gate_up_proj."))
    summary, _, _ = compare(t, b, "-o", tmp_path / "out", "--consistent_check", "--backend", "megatron")
    assert summary["counts"]["unmatched"] == 0


def test_config_is_the_tensor_postprocess_and_c_stays_probes_config(tmp_path):
    rng = np.random.default_rng(0)
    x, m = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    target = [("Torch.mm.0.forward", None, [x], [x @ m])]
    bench = [("Torch.mm.0.forward", None, [x], [x])]  # the bench stored before its calibration
    t, b = dump_pair(tmp_path, target, bench, mode="tensor")
    np.save(tmp_path / "calib.npy", m.astype(np.float32))
    summary, _, _ = compare(t, b, "-o", tmp_path / "plain")
    assert summary["counts"]["error"] == 1
    config = tmp_path / "post.yaml"
    config.write_text("right_matmul:\n  golden_tensor_map:\n    calib.npy: [Torch.mm.0.forward.output.0.npy]\n")
    probe_config = tmp_path / "config.json"
    probe_config.write_text(json.dumps({"plugins": {"disable": []}}))
    summary, rows, _ = compare(t, b, "-o", tmp_path / "out", "--config", config, "-c", probe_config)
    assert summary["counts"] == {"pass": 1, "warning": 0, "error": 0, "unmatched": 0}
    assert float(rows[-1]["Cosine"]) > 0.99999
    config.write_text("left_matmul: {}\nnot_a_section: {}\n")
    done = run_probe("compare", t, b, "-o", tmp_path / "bad", "--config", config)
    assert done.returncode == 2 and "not_a_section" in done.stderr and "Traceback" not in done.stderr

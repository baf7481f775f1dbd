"""``probe check ckpt``: l2/cos per parameter for state_dict files, safetensors and Megatron trees."""

from __future__ import annotations

import argparse
import json
import random
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.config_check.conftest import run_probe

LAYERS, HIDDEN, VOCAB, TP, PP = 4, 8, 16, 2, 2


def _expected(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(np.linalg.norm(x - y)), float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def _check(result: dict, full_a: dict, full_b: dict) -> None:
    assert set(result) == set(full_a)
    for name, a in full_a.items():
        l2, cos = _expected(a, full_b[name])
        entry = result[name]
        assert entry["shape"] == list(a.shape) and entry["numel"] == a.size, name
        assert entry["l2"] == pytest.approx(l2, rel=1e-9, abs=1e-12), name
        assert entry["cos"] == pytest.approx(cos, rel=1e-9), name


def _ckpt(tmp_path: Path, a: str, b: str, name: str = "sim.json") -> dict:
    out = tmp_path / name
    done = run_probe("check", "ckpt", a, b, "-o", out)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def _full_model(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    full = {"embedding.word_embeddings.weight": rng.standard_normal((VOCAB, HIDDEN)),
            "decoder.final_layernorm.weight": rng.standard_normal(HIDDEN),
            "output_layer.weight": rng.standard_normal((VOCAB, HIDDEN))}
    for layer in range(LAYERS):
        prefix = f"decoder.layers.{layer}."
        full[prefix + "input_layernorm.weight"] = rng.standard_normal(HIDDEN)
        full[prefix + "self_attention.linear_qkv.weight"] = rng.standard_normal((3 * HIDDEN, HIDDEN))
        full[prefix + "self_attention.linear_proj.weight"] = rng.standard_normal((HIDDEN, HIDDEN))
        full[prefix + "self_attention.linear_proj.bias"] = rng.standard_normal(HIDDEN)
    return {k: v.astype(np.float32) for k, v in full.items()}


def _shard(name: str, value: np.ndarray, tp: int) -> np.ndarray:
    if "norm" in name or name.endswith("linear_proj.bias"):
        return value
    axis = 1 if name.endswith("linear_proj.weight") else 0
    return np.split(value, TP, axis=axis)[tp]


def _write_megatron(root: Path, full: dict[str, np.ndarray], iteration: int) -> Path:
    """Megatron layout: TP=2, PP=2, local layer numbers per stage, args and RNG state saved alongside."""
    per_stage = LAYERS // PP
    folder = root / f"iter_{iteration:07d}"
    for tp in range(TP):
        for pp in range(PP):
            state = {}
            for name, value in full.items():
                if name.startswith("decoder.layers."):
                    layer = int(name.split(".")[2])
                    if layer // per_stage != pp:
                        continue
                    name = name.replace(f"layers.{layer}.", f"layers.{layer % per_stage}.")
                elif name.startswith("embedding.") and pp != 0:
                    continue  # the embedding lives on the first stage
                elif not name.startswith("embedding.") and pp != PP - 1:
                    continue  # final norm and output layer live on the last stage
                state[name] = torch.from_numpy(_shard(name, value, tp).copy())
            state["decoder.layers.0.self_attention.core_attention._extra_state"] = torch.zeros(1)
            rank_dir = folder / f"mp_rank_{tp:02d}_{pp:03d}"
            rank_dir.mkdir(parents=True)
            torch.save({"model": state, "iteration": iteration, "checkpoint_version": 3.0,
                        "args": argparse.Namespace(tensor_model_parallel_size=TP, lr=1e-4),
                        "rng_state": [{"random_rng_state": random.getstate(),
                                       "np_rng_state": np.random.get_state(),
                                       "torch_rng_state": torch.get_rng_state()}]},
                       rank_dir / "model_optim_rng.pt")
    (root / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return root


@pytest.mark.slow
def test_megatron_trees_merge_tp_pp_shards(tmp_path):
    old, bench, target = _full_model(0), _full_model(1), _full_model(1)
    target["decoder.layers.3.self_attention.linear_proj.weight"] += 0.01
    target["embedding.word_embeddings.weight"] *= 1.5
    _write_megatron(tmp_path / "a", old, 5)
    _write_megatron(tmp_path / "a", bench, 10)  # latest_checkpointed_iteration.txt now says 10
    _write_megatron(tmp_path / "b", target, 10)
    result = _ckpt(tmp_path, tmp_path / "a", tmp_path / "b")
    _check(result, bench, target)
    assert result["decoder.layers.0.input_layernorm.weight"]["l2"] == 0.0
    assert result["decoder.layers.3.self_attention.linear_proj.weight"]["l2"] > 0
    # an iteration folder can be named directly
    older = _ckpt(tmp_path, tmp_path / "a" / "iter_0000005", tmp_path / "b" / "iter_0000010", "older.json")
    _check(older, old, target)


def test_state_dict_files(tmp_path):
    a = {"w": torch.randn(5, 3, generator=torch.Generator().manual_seed(0)), "b": torch.ones(3)}
    b = {"w": a["w"] * 0.5 + 0.1, "b": torch.ones(3)}
    torch.save({"state_dict": a, "epoch": 3}, tmp_path / "a.pt")
    torch.save(b, tmp_path / "b.pt")
    result = _ckpt(tmp_path, tmp_path / "a.pt", tmp_path / "b.pt")
    _check(result, {k: v.numpy() for k, v in a.items()}, {k: v.numpy() for k, v in b.items()})
    assert result["b"] == {"l2": 0.0, "cos": pytest.approx(1.0), "numel": 3, "shape": [3], "max_abs_diff": 0.0,
                           "dtype": "float32", "rel_l2": 0.0}


def test_per_parameter_report_worst_first_shows_a_rescaled_weight(tmp_path):
    """Two checkpoints of a small real model: one weight rescaled (cosine stays 1), one bias nudged, one weight
    stored in bfloat16; the report names each, worst first, with L2 and max |diff| and the dtypes."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    bench = {k: v.clone() for k, v in model.state_dict().items()}
    target = {k: v.clone() for k, v in bench.items()}
    target["2.weight"] *= 2.0
    target["0.bias"] += 1e-3
    target["0.weight"] = target["0.weight"].bfloat16()
    torch.save(bench, tmp_path / "a.pt")
    torch.save(target, tmp_path / "b.pt")
    done = run_probe("check", "ckpt", tmp_path / "a.pt", tmp_path / "b.pt", "-o", tmp_path / "sim.json")
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "sim.json").read_text())
    assert list(result) == ["2.weight", "0.bias", "0.weight", "2.bias"]  # worst first: by L2 / the bench's norm
    rescaled = result["2.weight"]
    weight = bench["2.weight"].double()
    assert rescaled["cos"] == pytest.approx(1.0) and rescaled["rel_l2"] == pytest.approx(1.0)
    assert rescaled["l2"] == pytest.approx(weight.norm().item())
    assert rescaled["max_abs_diff"] == pytest.approx(weight.abs().max().item())
    assert result["0.bias"]["max_abs_diff"] == pytest.approx(1e-3, rel=1e-3)
    assert (result["0.weight"]["dtype"], result["0.weight"]["target_dtype"]) == ("float32", "bfloat16")
    assert result["2.bias"]["l2"] == 0.0
    table = [line for line in done.stdout.splitlines() if "│" in line and "parameter" not in line]
    assert [line.split("│")[1].strip() for line in table[:3]] == ["2.weight", "0.bias", "0.weight"]
    assert "1 identical, 3 differ" in done.stdout


def test_msprobes_config_check_c_compares_checkpoints(tmp_path):
    torch.save({"w": torch.ones(3)}, tmp_path / "a.pt")
    torch.save({"w": torch.full((3,), 3.0)}, tmp_path / "b.pt")
    done = run_probe("config_check", "-c", tmp_path / "a.pt", tmp_path / "b.pt", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "ckpt_similarity.json").read_text())  # msprobe's default output
    assert result["w"]["max_abs_diff"] == 2.0 and result["w"]["cos"] == pytest.approx(1.0)


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, array) in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def test_safetensors_files_parsed_without_the_package(tmp_path):
    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((4, 6)).astype(np.float32)
    bf_a = (rng.standard_normal(7).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bf_b = bf_a ^ np.uint16(1)
    _write_safetensors(tmp_path / "a.safetensors", {"w": ("F32", w1), "h": ("BF16", bf_a)})
    _write_safetensors(tmp_path / "b.safetensors", {"w": ("F32", w2), "h": ("BF16", bf_b)})
    result = _ckpt(tmp_path, tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    widen = lambda bits: (bits.astype(np.uint32) << 16).view(np.float32)  # noqa: E731
    _check(result, {"w": w1, "h": widen(bf_a)}, {"w": w2, "h": widen(bf_b)})
    assert (result["w"]["dtype"], result["h"]["dtype"]) == ("float32", "bfloat16")


class Exploit:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_checkpoint_with_pickled_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    torch.save({"w": torch.ones(2), "payload": Exploit(str(marker))}, tmp_path / "evil.pt")
    torch.save({"w": torch.ones(2)}, tmp_path / "ok.pt")
    done = run_probe("check", "ckpt", tmp_path / "evil.pt", tmp_path / "ok.pt", "-o", tmp_path / "x.json")
    assert done.returncode == 2
    assert "refusing to load" in done.stderr and "weights_only=True" in done.stderr
    assert "system" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists() and not (tmp_path / "x.json").exists()


def test_existing_output_is_not_overwritten(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "a.pt")
    (tmp_path / "sim.json").write_text("keep")
    done = run_probe("check", "ckpt", tmp_path / "a.pt", tmp_path / "a.pt", "-o", tmp_path / "sim.json")
    assert done.returncode == 2 and "already exists" in done.stderr
    assert (tmp_path / "sim.json").read_text() == "keep"


def test_missing_and_mismatched_parameters_are_reported(tmp_path):
    torch.save({"w": torch.ones(2, 2), "only_a": torch.ones(1)}, tmp_path / "a.pt")
    torch.save({"w": torch.ones(4)}, tmp_path / "b.pt")
    result = _ckpt(tmp_path, tmp_path / "a.pt", tmp_path / "b.pt")
    assert result["w"]["error"] == "shape mismatch" and result["w"]["target_shape"] == [4]
    assert result["only_a"]["error"] == "missing in target"


def test_virtual_pipeline_chunks_and_experts_get_global_numbers():
    """PP=2 x VPP=2 with one layer per chunk: chunk c of stage s holds global layer c*2 + s; EP=2 x 2 experts."""
    from probe_config_check.ckpt_loaders import _merge_shards

    local = {(0, stage, 0): {chunk: {"decoder.layers.0.norm.weight": np.array([chunk * 2.0 + stage])}
                             for chunk in (0, 1)} for stage in (0, 1)}
    merged = _merge_shards(local)
    assert {k: float(v[0]) for k, v in merged.items()} == {
        f"decoder.layers.{i}.norm.weight": float(i) for i in range(4)}
    experts = _merge_shards({(0, 0, ep): {0: {f"decoder.layers.0.mlp.experts.local_experts.{e}.weight":
                                              np.array([ep * 2.0 + e]) for e in (0, 1)}} for ep in (0, 1)})
    assert {k: float(v[0]) for k, v in experts.items()} == {
        f"decoder.layers.0.mlp.experts.local_experts.{e}.weight": float(e) for e in range(4)}

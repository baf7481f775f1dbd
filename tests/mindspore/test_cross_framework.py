"""The same network in MindSpore and PyTorch, identical weights and input: ``probe compare`` across frameworks.

Cells pair with Modules (``Cell.blocks.0.fc1.Dense`` ↔ ``Module.blocks.0.fc1.Linear``
through the built-in class table), ``Mint.*`` with ``Torch.*``; where the math
is the same every matched row passes, and a perturbed cell is the first
divergent entry.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from probe_compare.engine import CompareOptions, run_compare
from probe_core.plugins import load_registry

from . import twins
from .conftest import dump_ms

PERTURBED = "Cell.blocks.1.fc1.Dense.forward.0"


def _dump_pair(tmp_path: Path, level: str, perturb: bool = False) -> tuple[Path, Path]:
    from probe_torch import PrecisionDebugger as TorchDebugger

    ms_net, pt_net = twins.twin_pair()
    x = twins.batch()
    if perturb:  # blocks.1.fc1 computes 1% more in the MindSpore run
        cell = ms_net.blocks[1].fc1
        plain = cell.construct
        cell.construct = lambda t: plain(t) * 1.01
    ms_root = tmp_path / "ms"
    dump_ms(ms_root, lambda: twins.ms_train_step(ms_net, x), model=ms_net, level=level)
    debugger = TorchDebugger(dump_path=str(tmp_path / "pt"), task="statistics", level=level)
    debugger.start(pt_net)
    twins.pt_train_step(pt_net, x)
    debugger.stop()
    debugger.close()
    return ms_root, tmp_path / "pt"


def _compare(tmp_path: Path, target: Path, bench: Path) -> tuple[dict, list[dict[str, str]]]:
    mapping = tmp_path / "map.yaml"
    mapping.write_text("{}\n")  # the built-in MindSpore<->PyTorch tables only
    out = tmp_path / "out"
    summary = run_compare(CompareOptions(target, bench, out, mapping=mapping, xlsx=False, progress=False),
                          load_registry())
    with open(next(out.glob("*.csv")), newline="", encoding="utf-8") as handle:
        return summary, list(csv.DictReader(handle))


def _pairs(rows: list[dict[str, str]], result: str) -> set[tuple[str, str]]:
    return {(r["NPU Name"].rsplit(".", 2)[0], r["Bench Name"].rsplit(".", 2)[0]) for r in rows if r["Result"] == result}


@pytest.mark.slow
def test_cells_match_modules_and_mint_matches_torch(tmp_path):
    summary, rows = _compare(tmp_path, *_dump_pair(tmp_path, "mix"))
    passed = _pairs(rows, "pass")
    for pair in [("Cell.blocks.0.fc1.Dense.forward.0", "Module.blocks.0.fc1.Linear.forward.0"),
                 ("Cell.blocks.1.fc2.Linear.forward.0", "Module.blocks.1.fc2.Linear.forward.0"),
                 ("Cell.blocks.0.ln.LayerNorm.forward.0", "Module.blocks.0.ln.LayerNorm.forward.0"),
                 ("Cell.head.Dense.backward.0", "Module.head.Linear.backward.0"),
                 ("Cell.head.Dense.parameters_grad", "Module.head.Linear.parameters_grad"),
                 ("Mint.mean.0.forward", "Torch.mean.0.forward"),
                 ("Mint.sigmoid.1.backward", "Torch.sigmoid.1.backward"),
                 ("Tensor.__add__.0.backward", "Tensor.__add__.0.backward")]:
        assert pair in passed, pair
    # every matched tensor row passes except the input gradients of the network input x, which needs none:
    # cells whose input it is write [null] on MindSpore (as msprobe does), [] on PyTorch; in x + fc2(...) each
    # framework writes what its msprobe writes: MindSpore x's gradient (the add's tensor inputs share one
    # identity), PyTorch null (the grad_fn has no edge to x)
    others = [(r["NPU Name"], r["Result"]) for r in rows if r["Result"] not in ("pass", "unmatched")]
    assert others == [("Tensor.__add__.0.backward.output.0", "error"),
                      ("Cell.blocks.0.MsBlock.backward.0.output.0", "warning"),
                      ("Cell.blocks.0.ln.LayerNorm.backward.0.output.0", "warning")]
    assert summary["counts"]["error"] == 1
    # entries only one framework has (Primitive.*, Functional.linear) stay unmatched, never wrongly paired
    unmatched = {r["NPU Name"] or r["Bench Name"] for r in rows if r["Result"] == "unmatched"}
    assert any(n.startswith("Primitive.matmul.MatMul.") for n in unmatched)


@pytest.mark.slow
def test_same_math_has_no_divergence_and_a_perturbed_cell_is_first(tmp_path):
    same_summary, _ = _compare(tmp_path / "same", *_dump_pair(tmp_path / "same", "L0"))
    forward_first = same_summary["first_divergence"]
    # (mean of a near-zero gradient may differ in the 7th digit: compare's tolerance, not a collection error)
    assert forward_first is None or ".forward." not in forward_first["name"]
    summary, rows = _compare(tmp_path / "perturbed", *_dump_pair(tmp_path / "perturbed", "L0", perturb=True))
    first = summary["first_divergence"]
    assert first["name"] == PERTURBED and first["bench_name"] == "Module.blocks.1.fc1.Linear.forward.0"
    results = {r["NPU Name"]: r["Result"] for r in rows}
    assert results["Cell.blocks.0.fc2.Linear.forward.0.output.0"] == "pass"
    assert results[f"{PERTURBED}.input.0"] == "pass"


@pytest.mark.slow
def test_probe_compare_cli_across_frameworks(tmp_path):
    ms_root, pt_root = _dump_pair(tmp_path, "L0", perturb=True)
    mapping = tmp_path / "map.yaml"
    mapping.write_text("{}\n")
    proc = subprocess.run([str(Path(sys.executable).parent / "probe"), "compare", "-tp", str(ms_root),
                           "-gp", str(pt_root), "-o", str(tmp_path / "cli"), "--mapping", str(mapping),
                           "--quiet"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["first_divergence"]["name"] == PERTURBED

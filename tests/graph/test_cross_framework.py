"""``probe graph -lm`` between a MindSpore dump and a PyTorch dump (msprobe's own fixture dumps of the same
transformer), and msprobe's log flags.

msprobe 26.2's graph_visualize -lm links 65 of the MindSpore graph's 210 nodes on this pair (its .vis.db,
``matched_node_link``); probe links every one of those the same way, plus the view ops under matched modules
(``Tensor.swapaxes`` is ``Tensor.transpose``) that the shipped API table names.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.graph.helpers import MS_DUMP, TORCH_DUMP, only_db, rows, run_probe

MSPROBE_MATCHED = 65  # measured: msprobe graph_visualize -tp MS -gp PT -lm on these two dumps
PAIRS = {
    "Cell.blocks.0.attn.qkv.Dense.forward.0": "Module.blocks.0.attn.qkv.Linear.forward.0",
    "Cell.blocks.1.ln2.LayerNorm.parameters_grad.0": "Module.blocks.1.ln2.LayerNorm.parameters_grad.0",
    "Mint.matmul.0.forward": "Torch.matmul.0.forward",
    "Functional.matmul.0.forward": "Torch.matmul.1.forward",  # ops.matmul: the table, in call order
    "Mint.mean.0.forward": "Tensor.mean.0.forward",  # same op, another namespace
    "Tensor.swapaxes.0.forward": "Tensor.transpose.3.forward",
    "Functional.cross_entropy.0.backward": "Functional.cross_entropy.0.backward",
    "Apis_Between_Modules.0": "Apis_Between_Modules.0",
}


def test_layer_mapping_matches_mindspore_cells_and_apis_to_pytorch(tmp_path: Path) -> None:
    done = run_probe("-tp", MS_DUMP, "-gp", TORCH_DUMP, "-o", tmp_path / "out", "-lm", "-tensor_log",
                     "-progress_log")
    npu = {name: row for (source, name), row in rows(only_db(tmp_path / "out")).items() if source == "NPU"}
    matched = {name: json.loads(row["matched_node_link"])[-1] for name, row in npu.items()
               if row["matched_node_link"] not in ("[]", "", None)}
    assert len(npu) == 210 and len(matched) >= MSPROBE_MATCHED, len(matched)
    for target, bench in PAIRS.items():
        assert matched.get(target) == bench, target
    assert not any(name.startswith("Primitive.") for name in matched)  # no PyTorch twin: left grey
    # -tensor_log: one line per node; -progress_log: one per graph
    assert "Functional.matmul.0.forward ~ Torch.matmul.1.forward: precision index" in done.stdout
    assert "Primitive.matmul.MatMul.0.forward: no bench node" in done.stdout
    assert "[graph] 1/1 graphs done (100%): step0 rank0" in done.stdout

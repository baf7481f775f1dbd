"""One seeded MindSpore training run dumped by msprobe 26.2.0 and by probe: the two dumps line up entry for entry.

The fixture's network (``tests/mindspore/ms_net.py``: Dense, mint Linear, LayerNorm, attention with
``Tensor.reshape``/``transpose``, ``Primitive.*`` calls of the cells, cross_entropy, an SGD step), PyNative
on CPU, two steps, runs once under msprobe's MindSpore PrecisionDebugger and once under probe's, level
mix. ``probe compare PROBE MSPROBE`` then finds every entry on both sides and no error, and ``msprobe
compare`` gives every row a bench and no error row, in statistics, md5 and tensor mode.

MindSpore 2.10 has no CPU kernel for ``mint.norm``, which msprobe's statistics call, so the
msprobe run takes the Norm from numpy (the only change to msprobe, in its process alone).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.interop.same_run import (dump_both, entries, errors, msprobe_compare_rows, probe_compare_counts,
                                    rank_folder, without_bench)

pytestmark = pytest.mark.slow

NET = Path(__file__).resolve().parent.parent / "mindspore" / "ms_net.py"

SCRIPT = '''
import json, sys
import mindspore as ms
import ms_net
tool, task, dump = sys.argv[1:4]
if tool == "msprobe":
    import types
    import numpy as np
    from msprobe.mindspore import PrecisionDebugger
    from msprobe.core.dump.data_dump.data_processor import mindspore_processor

    class HostNorm(types.ModuleType):  # mint.norm has no CPU kernel in MindSpore 2.10
        def __getattr__(self, name):
            return getattr(ms.mint, name)

        @staticmethod
        def norm(data):
            return ms.Tensor(np.linalg.norm(data.asnumpy().astype(np.float64).ravel()), ms.float32)

    mindspore_processor.mint = HostNorm("mint")
else:
    from probe_mindspore import PrecisionDebugger
ms.set_seed(0)
net = ms_net.Net()
debugger = PrecisionDebugger(config_path=dump + ".config.json")
for _ in range(2):
    debugger.start(net)
    ms_net.train(net, 1)
    debugger.stop()
    debugger.step()
'''


def _leaf_shapes(value: object, path: str = "") -> dict[str, object]:
    """Every leaf of an entry (``input_args.0``, ``output.1``...) with its shape, or its value when not a tensor."""
    if isinstance(value, dict) and "type" in value:
        return {path: value.get("shape", value.get("value"))}
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
    if items is None:
        return {path: value}
    leaves: dict[str, object] = {}
    for key, child in items:
        leaves.update(_leaf_shapes(child, f"{path}.{key}" if path else str(key)))
    return leaves


@pytest.mark.parametrize("task", ["statistics", "md5", "tensor"])
def test_probe_and_msprobe_mindspore_dumps_of_one_run_compare_clean(msprobe, tmp_path, task):
    shutil.copy(NET, tmp_path / "ms_net.py")
    ours, theirs = dump_both(msprobe, tmp_path, task, SCRIPT)
    for step in (0, 1):
        our_data, their_data = entries(ours, step), entries(theirs, step)
        assert sorted(our_data) == sorted(their_data)
        # every leaf at the same place with the same shape: primitive backward gradients last input first
        assert _leaf_shapes(our_data) == _leaf_shapes(their_data)
    if task == "tensor":
        our_files = {p.name for p in (rank_folder(ours, 0) / "dump_tensor_data").iterdir()}
        their_files = {p.name for p in (rank_folder(theirs, 0) / "dump_tensor_data").iterdir()}
        assert our_files == their_files and len(our_files) > 500  # msprobe's names, file for file

    counts = probe_compare_counts(ours, theirs, tmp_path / "probe_compare")
    assert counts["error"] == 0 and counts["unmatched"] == 0 and counts["pass"] >= 400, counts  # 208 a step

    rows = msprobe_compare_rows(msprobe, ours, theirs, tmp_path / "msprobe_compare")
    assert len(rows) >= 600  # every leaf of the 208 entries
    assert without_bench(rows) == [] and errors(rows) == []

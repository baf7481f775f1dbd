"""The MindSpore<->PyTorch name maps (hook ``probe_name_maps``): how a MindSpore dump's names become a PyTorch
dump's, and back, for ``probe compare -lm`` and ``probe graph -lm``.

* API prefixes (``Mint`` -> ``Torch``), the shipped API table (``data/ms_pt_api.json``, written by
  ``scripts/gen_ms_pt_api_table.py``), cell classes (``Dense`` -> ``Linear``), parameter names
  (``gamma`` -> ``weight``).

Imports neither framework: the tables are plain data.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from probe_compare.api import NameMap

#: MindSpore API prefixes and their PyTorch counterparts.
MS_TO_PT_PREFIX = {"Mint": "Torch", "MintFunctional": "Functional", "Tensor": "Tensor", "Cell": "Module",
                   "Functional": "Functional", "Distributed": "Distributed", "Torch": "Torch"}
#: MindSpore cell classes and their PyTorch module twins.
MS_TO_PT_CLASS = {"Dense": "Linear", "SequentialCell": "Sequential", "CellList": "ModuleList",
                  "CellDict": "ModuleDict", "BatchNorm1d": "BatchNorm1d", "Conv2d": "Conv2d"}
#: MindSpore parameter names and their PyTorch twins (LayerNorm/BatchNorm ``gamma``/``beta``, BatchNorm statistics).
MS_TO_PT_PARAM = {"gamma": "weight", "beta": "bias", "moving_mean": "running_mean",
                  "moving_variance": "running_var", "embedding_table": "weight"}
#: probe's MindSpore -> PyTorch API table (``scripts/gen_ms_pt_api_table.py`` writes it).
API_TABLE = Path(__file__).with_name("data") / "ms_pt_api.json"


@lru_cache(maxsize=1)
def ms_to_pt_api() -> dict[str, str]:
    """The shipped MindSpore -> PyTorch API table (``{"Functional.dense": "Functional.linear", ...}``)."""
    return dict(json.loads(API_TABLE.read_text(encoding="utf-8"))["apis"])


def mindspore_to_pytorch() -> NameMap:
    """A MindSpore target's names in a PyTorch bench's naming."""
    return NameMap(api=dict(ms_to_pt_api()), prefix=dict(MS_TO_PT_PREFIX), classes=dict(MS_TO_PT_CLASS),
                   params=dict(MS_TO_PT_PARAM))


def pytorch_to_mindspore() -> NameMap:
    """A PyTorch target's names in a MindSpore bench's naming (the tables inverted)."""
    inverse_prefix = {"Torch": "Mint", "Module": "Cell", "Functional": "Functional", "Tensor": "Tensor"}
    inverse_api: dict[str, str] = {}
    for ms_name, pt_name in ms_to_pt_api().items():
        inverse_api.setdefault(pt_name, ms_name)
    for pt_name in [n for n, m in inverse_api.items() if m.partition(".")[2] == n.partition(".")[2]]:
        del inverse_api[pt_name]  # same op name: the prefix map finds the MindSpore twin (Torch.x -> Mint.x)
    return NameMap(api=inverse_api, prefix=inverse_prefix, classes={v: k for k, v in MS_TO_PT_CLASS.items()},
                   params={v: k for k, v in MS_TO_PT_PARAM.items() if k != "embedding_table"})

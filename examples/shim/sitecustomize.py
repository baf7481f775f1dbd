"""Lets ``import transformers`` work where the installed torchvision is a CUDA build beside a CPU torch.

transformers imports torchvision when it is installed. The registry's torchvision wheels are CUDA builds whose
compiled ops cannot load with the CPU build of torch: ``import torchvision`` then fails at its fake-kernel
registrations for ``torchvision::nms``. Where torchvision's compiled ops do not load, this defines the two op
schemas before torchvision is imported, so that its pure-Python parts import (detection ops stay unavailable).
``make demo`` puts this folder on ``PYTHONPATH`` so that examples/train_demo.py stays exactly as a transformers
user writes it; so do the real-client tests (tests/clients) and the benchmarks that run timm, torchvision or
transformers scripts. On a machine whose torchvision matches its torch it is not needed, and does nothing: the
compiled ops load and no schema is defined. It runs only when something imports torchvision.
"""

import importlib.util
import sys
from pathlib import Path


class _DefineTorchvisionOps:
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torch

            folder = Path(importlib.util.find_spec("torchvision").origin).parent
            try:
                for compiled in folder.glob("_C.*"):
                    torch.ops.load_library(compiled)
            except OSError:  # a CUDA build beside a CPU torch: its ops cannot load
                library = torch.library.Library("torchvision", "DEF")
                library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
                library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
                sys.modules["_probe_examples_torchvision_ops"] = library  # keeps the definitions alive
        return None


sys.meta_path.insert(0, _DefineTorchvisionOps())

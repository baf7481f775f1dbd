"""Lets torchvision's pure-Python parts import beside the CPU build of torch (see ENVIRONMENT.md).

The registry's torchvision wheels are CUDA builds whose compiled ops cannot load with the CPU torch;
``import torchvision`` then fails at its fake-kernel registrations for ``torchvision::nms``. Defining the
two op schemas first lets it import (the model zoo works; detection ops stay unavailable). The tests put
this folder on ``PYTHONPATH`` so that the training scripts stay exactly as their users write them; torch
is imported only when something imports torchvision (timm and Lightning do).
"""

import sys


class _DefineTorchvisionOps:
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            sys.meta_path.remove(self)
            import torch

            library = torch.library.Library("torchvision", "DEF")
            library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            sys.modules["_probe_tests_torchvision_ops"] = library  # keeps the definitions alive
        return None


sys.meta_path.insert(0, _DefineTorchvisionOps())

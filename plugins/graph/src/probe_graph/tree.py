"""construct.json read as msprobe's ``graph_visualize`` reads it: backward parents that an in-place op broke are
repaired, and (``--rules msprobe``) parameter gradients show only where msprobe shows them.

* **In-place repair** (always): a module whose forward changes its input in place (``nn.ReLU(inplace=True)``)
  fires no backward hook, so the modules called after it in the backward are recorded as its children:
  ``Module.layer1.0.conv3.Conv2d.backward.0`` under ``Module.layer1.0.relu.ReLU.backward.2``. A module's
  backward node belongs under a node of the module that owns it (its path minus the last part); when the
  recorded parent is another module's node, the parent becomes the backward node mirroring its forward call's
  parent (``Module.layer1.0.Bottleneck.backward.0``), or the model root when the forward call had none.
* **Parameter gradients**: ``{module}.parameters_grad.{n}`` goes under the module's last backward node, as msprobe
  puts it (always); a module without one (a BatchNorm whose backward hook the in-place ReLU after it
  swallowed) gets none shown with ``--rules msprobe``, as msprobe; by default probe shows them under the model
  root, since they hold the module's weight gradients.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe_core.api import BACKWARD, FORWARD, counterpart, direction, is_module, is_params_grad


def _path(name: str) -> str:
    """``Module.layer1.0.conv3.Conv2d.backward.0`` -> ``Module.layer1.0.conv3`` (the module's own path)."""
    return name.rsplit(".", 3)[0]


def _owner(name: str) -> str:
    """The path of the module that owns the module ``name`` calls: ``Module.layer1.0``."""
    return _path(name).rpartition(".")[0]


_BACKWARD_PART = f".{BACKWARD}."
_PARAMS_GRAD_PART = ".parameters_grad."  # what is_params_grad(name) looks for, inline: a call less per entry


def _is_module_backward(name: str) -> bool:
    """Whether ``name`` is a module's backward call (``Module.fc.Linear.backward.0``)."""
    # the first test: most fail it (forward calls, and API backward calls: ``Torch.matmul.0.backward``)
    return _BACKWARD_PART in name and is_module(name) and direction(name) == BACKWARD


def _module_backwards(construct: Mapping[str, Any], data: Mapping[str, Any]) -> set[str]:
    """The module backward calls either file names."""
    return {name for names in (construct, data) for name in names
            if _BACKWARD_PART in name and _is_module_backward(name)}  # the first test inline: most fail it


def repair_inplace(construct: Mapping[str, Any]) -> dict[str, Any]:
    """``construct`` with the backward parents an in-place op broke repaired (see the module docstring)."""
    repaired = dict(construct)
    for name, parent in construct.items():
        if not (isinstance(name, str) and _BACKWARD_PART in name and isinstance(parent, str)
                and _is_module_backward(name) and _is_module_backward(parent)):
            continue
        if _owner(name) == _path(parent):
            continue
        forward = counterpart(name, FORWARD)
        if forward not in construct:
            continue
        forward_parent = construct[forward]
        if forward_parent is None:
            repaired[name] = None
            continue
        mirrored = counterpart(forward_parent, BACKWARD) if isinstance(forward_parent, str) else None
        if mirrored in construct:
            repaired[name] = mirrored
    return repaired


def place_params_grads(construct: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """``construct`` with each ``parameters_grad`` entry only dump.json has put under its module's last backward
    node, as msprobe puts it (``parameters_grad.1`` of step 1 under ``backward.0`` when the module ran once)."""
    last: dict[str, tuple[int, str]] = {}
    for name in _module_backwards(construct, data):
        module, _, count = name.rsplit(".", 2)
        if count.isdigit() and int(count) >= last.get(module, (-1, ""))[0]:
            last[module] = (int(count), name)
    placed = dict(construct)
    for name in data:
        if _PARAMS_GRAD_PART in name and name not in construct and counterpart(name, BACKWARD) not in construct:
            found = last.get(name.rsplit(".", 2)[0])
            if found is not None:
                placed[name] = found[1]
    return placed


def hidden_params_grads(construct: Mapping[str, Any], data: Mapping[str, Any]) -> set[str]:
    """The ``parameters_grad`` entries msprobe does not show: those of modules with no backward node."""
    modules = {name.rsplit(".", 2)[0] for name in _module_backwards(construct, data)}
    return {name for name in data if is_params_grad(name) and name.rsplit(".", 2)[0] not in modules}

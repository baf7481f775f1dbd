"""What a dump entry name says: module or API, forward or backward, its call count.

Names follow msprobe: APIs ``{Prefix}.{api}.{count}.{forward|backward}`` (the
API part may hold dots, e.g. MindSpore ``Primitive.matmul.MatMul.0.forward``),
modules ``{Module|Cell}.{path}.{Class}.{forward|backward}.{count}`` and
parameter gradients ``{Module|Cell}.{path}.{Class}.parameters_grad.{count}``.
"""

from __future__ import annotations

FORWARD, BACKWARD, PARAMS_GRAD = "forward", "backward", "parameters_grad"
MODULE_PREFIXES = ("Module.", "Cell.")
PARAMS_GRAD_PART = f".{PARAMS_GRAD}."  # in every parameters_grad name


def is_module(name: str) -> bool:
    return name.startswith(MODULE_PREFIXES)


def is_params_grad(name: str) -> bool:
    return PARAMS_GRAD_PART in name


def direction(name: str) -> str | None:
    """``forward``, ``backward``, ``parameters_grad`` or None for other names."""
    parts = name.rsplit(".", 2)
    if is_module(name) and len(parts) == 3:
        return parts[1] if parts[1] in (FORWARD, BACKWARD, PARAMS_GRAD) else None
    last = parts[-1]
    return last if last in (FORWARD, BACKWARD) else None


def counterpart(name: str, to: str) -> str | None:
    """The same call's name in direction ``to`` (forward <-> backward; parameters_grad -> backward)."""
    parts = name.rsplit(".", 2)
    if len(parts) < 3:
        return None
    if is_module(name) and parts[1] in (FORWARD, BACKWARD, PARAMS_GRAD):
        return f"{parts[0]}.{to}.{parts[2]}"
    if parts[2] in (FORWARD, BACKWARD) and to in (FORWARD, BACKWARD):
        return f"{parts[0]}.{parts[1]}.{to}"
    return None


def without_count(name: str) -> str:
    """The name with its call count removed (fuzzy matching key)."""
    parts = name.rsplit(".", 2)
    if len(parts) < 3:
        return name
    if is_module(name) and parts[1] in (FORWARD, BACKWARD, PARAMS_GRAD):
        return f"{parts[0]}.{parts[1]}"
    if parts[2] in (FORWARD, BACKWARD) and parts[1].isdigit():
        return f"{parts[0]}.{parts[2]}"
    return name


def split_module(name: str) -> tuple[str, str, str, str, str] | None:
    """``Module.a.b.Class.forward.3`` -> ("Module", "a.b", "Class", "forward", "3"); None for non-modules."""
    if not is_module(name):
        return None
    head, rest = name.split(".", 1)
    pieces = rest.rsplit(".", 3)
    if len(pieces) != 4:
        return None
    path, cls, way, count = pieces
    return head, path, cls, way, count


def api_op(name: str) -> str:
    """The API's own name: ``Tensor.empty_like.0.forward`` -> ``empty_like``."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else name

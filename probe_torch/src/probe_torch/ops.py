"""The tensor operations the framework-neutral engine and data modes need, for PyTorch."""

from __future__ import annotations

import sys
import weakref
from typing import Any

import torch

from probe_core.api import host_stats, KINDS, row_layout, TensorOps
from probe_torch import ptfile

_LOW_PRECISION = (torch.float16, torch.bfloat16)
#: The dtypes whose CPU tensors get :func:`probe_core.collect.fused.host_stats` (one pass instead of four).
_FUSED = {getattr(torch, name): kind for name, kind in KINDS.items()}
#: The tensor types whose memory the kernel reads directly (subclasses may hold theirs elsewhere).
_PLAIN = frozenset({torch.Tensor, torch.nn.Parameter})
#: Cached statistics are pruned of dead tensors when they grow past this (and then past twice the live ones).
_SEEN_PRUNE = 1024


class TorchTensorOps(TensorOps):
    """:class:`probe_core.collect.TensorOps` for ``torch.Tensor``.

    A DTensor (FSDP2's parameters and gradients, tensor parallelism's activations) is recorded as this
    rank's shard (``to_local()``, no communication) with its mesh and placements as msprobe writes them;
    ``full_dtensor`` (config.json ``"dtensor": "full"``) records the whole tensor instead, gathered by a
    collective on every rank.

    Statistics are launched on the tensor's device as 0-d tensors and fetched
    by :meth:`fetch_stats` with one ``torch.stack(...).tolist()`` per device;
    a dense float tensor on the CPU has them at once from one pass over its
    memory (:func:`probe_core.collect.fused.host_stats`).
    A tensor seen twice (an API's output that is the next API's input, a module
    output equal to its last API's output) is computed once, unless it was
    modified in place in between (``_version``). Those statistics are held by
    weak reference, so they outlive a flush (the next call's input was the last
    batch's output) but never keep a tensor alive; :meth:`values_changed` drops
    them.
    """

    framework = "pytorch"
    tensor_suffix = ".pt"
    capabilities = frozenset({"new_batch", "values_changed", "once_per_batch", "alias", "nbytes"})

    def __init__(self, full_dtensor: bool = False) -> None:
        self.full_dtensor = full_dtensor
        self._seen: dict[int, tuple[weakref.ref, int, Any]] = {}
        self._seen_bound = _SEEN_PRUNE
        self._aliases: dict[int, tuple[torch.Tensor, int, torch.Tensor, int]] = {}
        self._once: dict[tuple[int, str], tuple[torch.Tensor, int, Any]] = {}

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor)

    def describe(self, tensor: torch.Tensor) -> dict[str, Any]:
        if not is_dtensor(tensor):
            return {"type": "torch.Tensor", "dtype": str(tensor.dtype), "shape": list(tensor.shape)}
        shape = tensor.shape if self.full_dtensor else tensor.to_local().shape
        return {"type": DTENSOR_TYPE, "dtype": str(tensor.dtype), "shape": list(shape),
                **dtensor_layout(tensor), **({"full_tensor": True} if self.full_dtensor else {})}

    def plain(self, tensor: torch.Tensor) -> torch.Tensor:
        """The values recorded for ``tensor``: itself, or a DTensor's local shard (or whole tensor, gathered)."""
        if not is_dtensor(tensor):
            return tensor
        with torch.no_grad():
            return tensor.full_tensor() if self.full_dtensor else tensor.to_local()

    def requires_grad(self, tensor: torch.Tensor) -> bool:
        return tensor.requires_grad

    def new_batch(self) -> None:
        self._aliases = {}
        self._once = {}
        if len(self._seen) > self._seen_bound:  # drop the statistics of dead tensors (amortised)
            self._seen = {key: hit for key, hit in self._seen.items() if hit[0]() is not None}
            self._seen_bound = max(_SEEN_PRUNE, 2 * len(self._seen))

    def values_changed(self) -> None:
        self._seen = {}
        self._seen_bound = _SEEN_PRUNE
        self.new_batch()

    def once_per_batch(self, tensor: torch.Tensor, kind: str, compute: Any) -> Any:
        """``compute()`` once per tensor, version and kind within a batch (a CRC, a saved file)."""
        key = (id(tensor), kind)
        hit = self._once.get(key)
        version = tensor._version
        if hit is not None and hit[0] is tensor and hit[1] == version:
            return hit[2]
        value = compute()
        self._once[key] = (tensor, version, value)
        return value

    def nbytes(self, tensor: torch.Tensor) -> int:
        return tensor.nbytes

    def alias(self, view: Any, source: Any) -> None:
        """``view`` holds exactly ``source``'s values (reshape, transpose, ...): its statistics are ``source``'s."""
        if isinstance(view, torch.Tensor) and isinstance(source, torch.Tensor) and view is not source and \
                view.dtype == source.dtype and view.numel() == source.numel() and not is_dtensor(view):
            self._aliases[id(view)] = (view, view._version, source, source._version)

    def stats(self, tensor: torch.Tensor) -> Any:
        key = id(tensor)
        hit = self._seen.get(key)
        version = tensor._version
        if hit is not None and hit[0]() is tensor and hit[1] == version:
            return hit[2]
        same = self._aliases.get(key)
        if same is not None and same[0] is tensor and same[1] == version and same[2]._version == same[3]:
            handle = self.stats(same[2])
        else:
            handle = _launch_stats(self.plain(tensor))
        self._seen[key] = (weakref.ref(tensor), version, handle)
        return handle

    def fetch_stats(self, handles: list[Any]) -> list[tuple[Any, Any, Any, Any] | None]:
        by_device: dict[torch.device, list[torch.Tensor]] = {}
        for handle in handles:
            if handle is not None and handle[0] != "h":
                by_device.setdefault(handle[1], []).extend(handle[2])
        values: dict[torch.device, list[float]] = {}
        for device, scalars in by_device.items():  # the scalars come from detached tensors: no graph
            values[device] = torch.stack(scalars).tolist()
        positions = dict.fromkeys(values, 0)
        out: list[tuple[Any, Any, Any, Any] | None] = []
        for handle in handles:
            if handle is None:
                out.append(None)
                continue
            kind, device, scalars, count = handle
            if kind == "h":  # computed on the host already
                out.append(scalars)
                continue
            start = positions[device]
            got = values[device][start:start + len(scalars)]
            positions[device] = start + len(scalars)
            if kind == "n":  # float: mean finished here
                out.append((got[0], got[1], got[2] / count, got[3]))
            elif kind == "i":
                out.append((int(got[0]), int(got[1]), None, None))
            else:
                out.append((bool(got[0]), bool(got[1]), None, None))
        return out

    def raw_bytes(self, tensor: torch.Tensor) -> Any:
        flat = self.plain(tensor).detach().reshape(-1)
        if flat.device.type != "cpu":
            flat = flat.cpu()
        flat = flat.contiguous()
        if flat.numel() == 0:
            return b""
        return flat.view(torch.uint8).numpy()

    def snapshot(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.plain(tensor).detach().clone()

    def save(self, tensor: torch.Tensor, path: str) -> int | None:
        return ptfile.save(self.plain(tensor), path)

    def encode_other(self, value: Any) -> dict[str, Any] | None:
        if isinstance(value, torch.dtype):
            return {"type": "torch.dtype", "value": str(value)}
        if isinstance(value, torch.device):
            return {"type": "torch.device", "value": str(value)}
        if isinstance(value, torch.Size):
            return {"type": "torch.Size", "value": list(value)}
        if isinstance(value, torch.memory_format):
            return {"type": "torch.memory_format", "value": str(value)}
        return None


#: dump.json's ``type`` of a DTensor (msprobe's).
DTENSOR_TYPE = "torch.distributed.tensor.DTensor"


def is_dtensor(tensor: Any) -> bool:
    """Whether ``tensor`` is a DTensor (never imports torch.distributed.tensor: without it there is none)."""
    if type(tensor) in _PLAIN:
        return False
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


def dtensor_layout(tensor: Any) -> dict[str, Any]:
    """A DTensor's ``device_mesh`` (the ranks, as nested lists) and ``placements``, as msprobe writes them."""
    placements: list[dict[str, Any]] = []
    for placement in tensor.placements:
        if placement.is_shard():
            placements.append({"Shard": {"dim": placement.dim}})
        elif placement.is_replicate():
            placements.append({"Replicate": {}})
        elif placement.is_partial():
            placements.append({"Partial": {"reduce_op": str(placement.reduce_op)}})
    return {"device_mesh": tensor.device_mesh.mesh.tolist(), "placements": placements}


def _launch_stats(tensor: torch.Tensor) -> Any:
    """(kind, device, [0-d tensors], count) — no host synchronisation; ("h", None, values, 0) when the
    values were computed on the host at once."""
    kind = _FUSED.get(tensor.dtype)
    if kind is not None and tensor.is_cpu and tensor.layout == torch.strided:  # checks ordered by cost
        values = _host_stats(tensor, kind)
        if values is not None:
            return ("h", None, values, 0)
    if tensor.numel() == 0 or tensor.is_complex() or tensor.is_meta or tensor.layout != torch.strided:
        return None
    t = tensor.detach()  # detached: no autograd graph (cheaper than a no_grad context per tensor)
    if t.is_floating_point() and t.element_size() == 1:  # float8: most reductions have no kernel for it
        t = t.float()
    if t.is_floating_point():
        # amax + amin + sum + norm, four passes and no temporary (measured on CPU: less than aminmax + mean, and
        # far less than a squared copy's allocation); mean is finished on the host after the fetch
        high, low = t.amax(), t.amin()
        if t.dtype in _LOW_PRECISION:
            return ("n", t.device, (high, low, torch.sum(t, dtype=torch.float32), _norm(t, torch.float32)),
                    t.numel())
        return ("n", t.device, (high, low, t.sum(), _norm(t, None)), t.numel())
    if t.dtype == torch.bool:
        return ("b", t.device, (t.any(), t.all()), 0)
    return ("i", t.device, (t.amax(), t.amin()), 0)


def _host_stats(t: torch.Tensor, kind: int) -> tuple[float, float, float, float] | None:
    """One pass over a plain CPU tensor whose elements lie in one block of memory (in any order) or in
    evenly spaced rows (a chunk of the last dimension); None for any other layout."""
    if type(t) not in _PLAIN or t.is_neg():  # subclasses (DTensor, fake tensors) keep the torch path
        return None
    layout = (1, t.numel(), 0) if t.is_contiguous() else _row_layout(t)
    if layout is None:
        return None
    try:
        address = t.data_ptr()
    except RuntimeError:  # a wrapper with no storage of its own (functorch)
        return None
    rows, length, stride = layout
    return host_stats(address, length, kind, rows, stride * t.element_size())


#: Rows shorter than this are not worth a call each: torch's strided reductions take them.
_SHORTEST_ROW = 64


def _row_layout(t: torch.Tensor) -> tuple[int, int, int] | None:
    """:func:`probe_core.api.row_layout` of ``t``, its rows at least :data:`_SHORTEST_ROW` long."""
    return row_layout(t.shape, t.stride(), _SHORTEST_ROW)


def _memory_order(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` with its dimensions in memory order (a transpose undone) if that is contiguous, else None."""
    if t.is_contiguous():
        return t
    t = t.permute(sorted(range(t.dim()), key=lambda d: -t.stride(d)))
    return t if t.is_contiguous() else None


#: Lines of partial sums up to this long keep a float32 norm within about 3e-6 of the exact one (measured).
_LONGEST_LINE = 1 << 12


def _norm(t: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """L2 norm in two levels on CPU: the norms of rows of about sqrt(n) elements, then their norm.

    torch's CPU ``vector_norm`` accumulates each SIMD lane in one long line: a float32 norm of a million
    equal values is 4e-4 off (the float64 bench it is compared with is not). Rows along the tensor's own
    dimensions keep each line short (within 3e-6 there), read the data once and allocate nothing. A large
    tensor with no such split (overlapping strides, a long 1-D) sums its squares (a cascaded sum).
    """
    if t.device.type != "cpu" or t.dtype == torch.float64 or t.numel() <= _LONGEST_LINE:
        return torch.linalg.vector_norm(t, dtype=dtype)
    rows = _rows(t)
    if rows is None:
        return torch.sum(torch.square(t if dtype is None else t.to(dtype))).sqrt()
    return torch.linalg.vector_norm(torch.linalg.vector_norm(rows, dim=1, dtype=dtype))


def _rows(t: torch.Tensor) -> torch.Tensor | None:
    """``t``'s elements as a 2-D view whose rows and row length are both at most :data:`_LONGEST_LINE`
    (the split along its dimensions with the shorter longest line), or None. A permuted tensor (a
    transpose) is read in its memory order: the norm does not depend on the order."""
    t = _memory_order(t)
    if t is None:
        return None
    n, best, rows = t.numel(), None, 1
    for size in t.shape[:-1]:
        rows *= size
        longest = max(rows, n // rows)
        if best is None or longest < best[0]:
            best = (longest, rows)
    if best is None or best[0] > _LONGEST_LINE:
        return None
    return t.view(best[1], -1)

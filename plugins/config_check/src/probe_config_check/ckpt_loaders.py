"""Reading checkpoints into ``{parameter name: array}`` without running pickled code.

Kinds understood:

- a torch file (``torch.save`` of a state_dict, possibly nested under
  ``state_dict``/``model``/...): loaded with ``torch.load(weights_only=True)``
  only; torch is imported here, lazily, never at module load;
- a ``.safetensors`` file, or a folder of them: parsed by hand (8-byte header
  length, JSON header, raw little-endian bytes), no extra dependency;
- a Megatron-LM / MindSpeed folder: ``latest_checkpointed_iteration.txt`` picks
  ``iter_XXXXXXX`` (or the ``iter_*`` folder is given), whose
  ``mp_rank_TT[_PPP[_EEE]]/model_optim_rng.pt`` shards are merged back into
  whole parameters (tensor-parallel shards concatenated, pipeline stages' and
  virtual chunks' layer numbers made global, expert numbers made global).
"""

from __future__ import annotations

import math
import os
import re
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from probe_core.api import CheckError, loads

Params = dict[str, Any]  # name -> numpy array or torch tensor


class Bfloat16Array(np.ndarray):
    """The float32 values of a bfloat16 tensor numpy cannot hold (safetensors ``BF16``): its dtype is bfloat16."""

# -- torch files -----------------------------------------------------------------

_NUMPY_GLOBALS = ("numpy.dtype", "numpy.ndarray", "numpy.core.multiarray._reconstruct",
                  "numpy._core.multiarray._reconstruct", "numpy.core.multiarray.scalar",
                  "numpy._core.multiarray.scalar")
#: Plain data containers Megatron writes next to the weights (args, enums): loaded as inert stubs.
_STUBBED = re.compile(r"^(megatron|mindspeed|transformer_engine)(\.\w+)*\.(enums?|\w*[Ee]num\w*)\.\w+$")


class _InertStub:
    """Stands in for an enum or data class of an unimportable package; keeps its arguments only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state


def _allowed_global(name: str) -> Any:
    """The object to let ``weights_only`` unpickling use for global ``name``, or ``None`` to refuse it."""
    import argparse
    import importlib

    if name == "argparse.Namespace":
        return argparse.Namespace
    if name in _NUMPY_GLOBALS or name.startswith("numpy.dtypes."):
        module, _, attr = name.rpartition(".")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            return None
    if _STUBBED.match(name):
        return (type(name.rpartition(".")[2], (_InertStub,), {}), name)
    return None


def load_torch_file(path: str | os.PathLike[str]) -> Any:
    """``torch.load(path, weights_only=True)``; a file holding pickled code is refused with a clear error."""
    try:
        import torch
    except ImportError:
        raise CheckError(f"{path}: reading a torch checkpoint needs torch; pip install torch") from None
    path = os.fspath(path)
    allowed = []
    try:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        zip_format = True
    except Exception:  # not the zip format (legacy files): weights_only loading below still guards
        unsafe, zip_format = [], False
    refused = []
    for name in unsafe:
        obj = _allowed_global(name)
        (refused.append(name) if obj is None else allowed.append(obj))
    if refused:
        raise _refuse_pickle(path, ", ".join(refused))
    if any(name.startswith("numpy.") for name in unsafe):
        allowed += _numpy_dtype_classes()
    try:
        with torch.serialization.safe_globals(allowed):
            # mmap: tensors stay on disk until read (optimizer states are never read at all)
            return torch.load(path, map_location="cpu", weights_only=True, mmap=zip_format)
    except FileNotFoundError:
        raise CheckError(f"{path}: file not found") from None
    except Exception as exc:
        import pickle

        if isinstance(exc, pickle.UnpicklingError) or "weights_only" in str(exc):
            text = str(exc)
            detail = text.split("WeightsUnpickler error:", 1)[-1].strip().splitlines()
            raise _refuse_pickle(path, detail[0] if detail else text) from None
        raise CheckError(f"{path}: not a readable torch checkpoint ({type(exc).__name__}: {exc})") from None


def _numpy_dtype_classes() -> list[Any]:
    """numpy's per-dtype classes (``numpy.dtypes.UInt32DType``, ...): plain data, needed for numpy arrays."""
    try:
        import numpy.dtypes as dtypes
    except ImportError:
        return []
    return [cls for cls in vars(dtypes).values() if isinstance(cls, type) and issubclass(cls, np.dtype)]


def _refuse_pickle(path: str, what: str) -> CheckError:
    return CheckError(f"{path}: refusing to load: the checkpoint holds pickled code or objects ({what}); "
                      "probe loads checkpoints with torch.load(weights_only=True) only — "
                      "re-save the weights with torch.save(model.state_dict(), PATH)")


def tensors_of(obj: Any, prefix: str = "") -> Params:
    """Every tensor in a (nested) state dict, by dotted name; other values are skipped."""
    out: Params = {}
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if _is_tensor(value):
                if not str(key).endswith("_extra_state"):
                    out[name] = value
            elif isinstance(value, Mapping):
                out.update(tensors_of(value, name))
    return out


def _is_tensor(value: Any) -> bool:
    return isinstance(value, np.ndarray) or (hasattr(value, "detach") and hasattr(value, "shape"))


_WRAPPERS = ("state_dict", "model_state_dict", "module", "model")


def state_dict_of(obj: Any) -> Any:
    """Unwrap the usual containers (``{"state_dict": ...}``, ``{"model": ...}``) around a state dict."""
    while isinstance(obj, Mapping):
        wrappers = [k for k in _WRAPPERS if isinstance(obj.get(k), Mapping)]
        if not wrappers or any(_is_tensor(v) for v in obj.values()):
            return obj
        obj = obj[wrappers[0]]
    return obj


# -- safetensors -----------------------------------------------------------------

_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
                       "I16": "<i2", "I8": "i1", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8",
                       "BOOL": "?"}
_MAX_HEADER = 100 * 1024 * 1024


def _int(value: Any) -> bool:
    return type(value) is int


def _safetensors_header(path: Any, handle: Any, size: int) -> tuple[int, dict[str, Any]]:
    """(header length, header) of a safetensors file, every field checked; CheckError names what is wrong."""
    head = handle.read(8)
    if len(head) < 8:
        raise CheckError(f"{path}: too short to be a safetensors file")
    length = struct.unpack("<Q", head)[0]
    if length > min(_MAX_HEADER, size - 8):
        raise CheckError(f"{path}: not a safetensors file (header length {length} does not fit the file)")
    try:
        header = loads(handle.read(length), max_depth=4)
    except ValueError as exc:
        raise CheckError(f"{path}: not a safetensors file (bad JSON header: {exc})") from None
    if not isinstance(header, dict):
        raise CheckError(f"{path}: not a safetensors file (the header is a JSON {type(header).__name__}, "
                         "not an object of tensors); re-save it with safetensors")
    return length, header


def _tensor_meta(path: Any, name: str, meta: Any, data_size: int) -> tuple[str, list[int], int, int]:
    """(dtype, shape, start, end) of one header entry, checked against the data section's size."""
    def bad(why: str) -> CheckError:
        return CheckError(f"{path}: tensor {name!r}: {why}; the file is damaged or not a safetensors file: "
                          "re-save it with safetensors")

    if not isinstance(meta, dict):
        raise bad(f"its header entry is {type(meta).__name__}, not an object with dtype, shape, data_offsets")
    dtype, shape, offsets = meta.get("dtype"), meta.get("shape"), meta.get("data_offsets")
    if not isinstance(dtype, str):
        raise bad(f'"dtype" is {dtype!r}, not a string')
    if dtype not in _SAFETENSORS_DTYPES:
        raise CheckError(f"{path}: tensor {name!r} has dtype {dtype[:20]}, which probe cannot read yet")
    if not isinstance(shape, list) or len(shape) > 64 or not all(_int(n) and n >= 0 for n in shape):
        raise bad(f'"shape" is {str(shape)[:60]}, not a list of sizes')
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_int(n) for n in offsets):
        raise bad(f'"data_offsets" is {str(offsets)[:60]}, not two integers [start, end]')
    start, end = offsets
    nbytes = math.prod(shape) * np.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize  # Python ints: no overflow
    if not 0 <= start <= end <= data_size or end - start != nbytes:
        raise bad(f"data offsets {start}..{end} do not match shape {shape} x {dtype} "
                  f"({nbytes} bytes) or run past the end of the file ({data_size} data bytes)")
    return dtype, shape, start, end


def load_safetensors(path: str | os.PathLike[str]) -> Params:
    """Every tensor of a safetensors file as a numpy array (memory-mapped; BF16 widened to float32)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            length, header = _safetensors_header(path, handle, size)
    except OSError as exc:
        raise CheckError(f"{path}: cannot read the checkpoint ({exc.strerror})") from None
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length) if size > 8 + length else np.zeros(0, np.uint8)
    out: Params = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, start, end = _tensor_meta(path, name, meta, data.size)
        array = data[start:end].view(np.dtype(_SAFETENSORS_DTYPES[dtype]))
        if dtype == "BF16":  # flat first: a 0-d bf16 scalar would become a Python-promoted int64
            array = (array.astype(np.uint32) << np.uint32(16)).view(np.float32).view(Bfloat16Array)
        array = array.reshape(shape)
        out[name] = array
    return out


# -- Megatron layout --------------------------------------------------------------

_RANK_DIR = re.compile(r"^mp_rank_(\d+)(?:_(\d+))?(?:_(\d+))?$")
_LAYER = re.compile(r"(?<![\w])(layers\.)(\d+)(?=\.)")
_EXPERT = re.compile(r"(local_experts\.)(\d+)(?=\.)")
_ROW_PARALLEL_WEIGHTS = ("linear_proj.weight", "linear_fc2.weight", "dense.weight", "dense_4h_to_h.weight")
_ROW_PARALLEL_BIASES = ("linear_proj.bias", "linear_fc2.bias", "dense.bias", "dense_4h_to_h.bias")


def is_megatron(path: Path) -> bool:
    return path.is_dir() and ((path / "latest_checkpointed_iteration.txt").is_file()
                              or any(_RANK_DIR.match(p.name) for p in path.iterdir() if p.is_dir())
                              or any(p.name.startswith("iter_") for p in path.iterdir() if p.is_dir()))


def megatron_iteration_dir(path: Path) -> Path:
    """The ``iter_*`` folder to read: given directly, or the one ``latest_checkpointed_iteration.txt`` names."""
    if any(_RANK_DIR.match(p.name) for p in path.iterdir() if p.is_dir()):
        return path
    tracker = path / "latest_checkpointed_iteration.txt"
    if not tracker.is_file():
        iters = sorted(p.name for p in path.iterdir() if p.name.startswith("iter_"))
        raise CheckError(f"{path}: no latest_checkpointed_iteration.txt; pass one iteration folder "
                         f"({', '.join(iters[-3:]) or 'iter_XXXXXXX'}) instead")
    text = tracker.read_text(encoding="utf-8", errors="replace").strip()
    number = text.isdigit() and len(text) < 19  # a 5,000-digit "iteration" is a name, not a number
    chosen = path / ("release" if text == "release" else f"iter_{int(text):07d}" if number else text)
    if not chosen.is_dir() or chosen.parent.resolve() != path.resolve():
        raise CheckError(f"{tracker}: names iteration {text!r}, but {chosen} is not a folder of {path}")
    return chosen


def load_megatron(path: Path) -> Params:
    """Whole parameters from every ``mp_rank_*`` shard of one iteration folder."""
    folder = megatron_iteration_dir(path)
    shards: dict[tuple[int, int, int], Path] = {}
    for rank_dir in sorted(folder.iterdir()):
        match = _RANK_DIR.match(rank_dir.name)
        if not match or not rank_dir.is_dir():
            continue
        files = [rank_dir / "model_optim_rng.pt"] if (rank_dir / "model_optim_rng.pt").is_file() else \
            sorted(p for p in rank_dir.glob("*.pt") if "optim" not in p.name or "model" in p.name)
        if not files:
            raise CheckError(f"{rank_dir}: no model_optim_rng.pt; is this a Megatron checkpoint folder?")
        tp, pp, ep = (int(g) if g is not None else 0 for g in match.groups())
        shards[(tp, pp, ep)] = files[0]
    if not shards:
        raise CheckError(f"{folder}: no mp_rank_* folders; pass a Megatron checkpoint folder or iteration")
    # (tp, pp, ep) -> chunk -> local name -> tensor
    local: dict[tuple[int, int, int], dict[int, Params]] = {}
    for key, file in shards.items():
        state = load_torch_file(file)
        chunks = sorted(k for k in state if re.fullmatch(r"model\d+", str(k))) if isinstance(state, Mapping) else []
        if chunks:
            local[key] = {int(k[5:]): tensors_of(state[k]) for k in chunks}
        else:
            local[key] = {0: tensors_of(state_dict_of(state))}
    return _merge_shards(local)


def _layers_per_chunk(local: Mapping[tuple[int, int, int], Mapping[int, Params]]) -> int:
    counts = [len({m.group(2) for name in params for m in [_LAYER.search(name)] if m})
              for chunks in local.values() for params in chunks.values()]
    return max(counts, default=0)


def _experts_per_rank(local: Mapping[tuple[int, int, int], Mapping[int, Params]]) -> int:
    counts = [len({m.group(2) for name in params for m in [_EXPERT.search(name)] if m})
              for chunks in local.values() for params in chunks.values()]
    return max(counts, default=0)


def _merge_shards(local: Mapping[tuple[int, int, int], Mapping[int, Params]]) -> Params:
    pp_size = max(pp for _, pp, _ in local) + 1
    per_chunk, per_ep = _layers_per_chunk(local), _experts_per_rank(local)
    # global name -> tp rank -> tensor
    by_name: dict[str, dict[int, Any]] = {}
    for (tp, pp, ep), chunks in local.items():
        for chunk, params in chunks.items():
            layer_offset = chunk * pp_size * per_chunk + pp * per_chunk
            for name, tensor in params.items():
                name = _renumber(_LAYER, name, layer_offset)
                name = _renumber(_EXPERT, name, ep * per_ep)
                by_name.setdefault(name, {})[tp] = tensor
    return {name: _join_tp(name, parts) for name, parts in sorted(by_name.items())}


def _renumber(pattern: re.Pattern[str], name: str, offset: int) -> str:
    """Add ``offset`` to the local index ``pattern`` finds (``layers.1.`` -> ``layers.5.``)."""
    return pattern.sub(lambda m: f"{m.group(1)}{offset + int(m.group(2))}", name) if offset else name


def _join_tp(name: str, parts: Mapping[int, Any]) -> Any:
    if len(parts) == 1:
        return next(iter(parts.values()))
    ordered = [parts[tp] for tp in sorted(parts)]
    if "norm" in name or name.endswith(_ROW_PARALLEL_BIASES) or ordered[0].ndim == 0:
        return ordered[0]  # replicated across tensor-parallel ranks
    dim = 1 if name.endswith(_ROW_PARALLEL_WEIGHTS) and ordered[0].ndim > 1 else 0
    if hasattr(ordered[0], "detach"):
        import torch

        return torch.cat(ordered, dim=dim)
    return np.concatenate(ordered, axis=dim)


# -- dispatch --------------------------------------------------------------------


def load_checkpoint(path: str | os.PathLike[str]) -> tuple[str, Params]:
    """(kind, parameters) of any checkpoint kind probe understands."""
    path = Path(path)
    if not path.exists():
        raise CheckError(f"{path}: no such file or folder; pass a checkpoint file or folder")
    if path.is_dir():
        if is_megatron(path):
            return "megatron", load_megatron(path)
        files = sorted(path.glob("*.safetensors"))
        if files:
            params: Params = {}
            for file in files:
                params.update(load_safetensors(file))
            return "safetensors", params
        raise CheckError(f"{path}: a folder with neither Megatron mp_rank_*/iter_* folders nor .safetensors files")
    if path.suffix == ".safetensors":
        return "safetensors", load_safetensors(path)
    return "torch", tensors_of(state_dict_of(load_torch_file(path)))

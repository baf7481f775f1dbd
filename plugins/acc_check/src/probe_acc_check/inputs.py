"""Input values of a case: the real tensors of a tensor-mode dump, or values generated from the statistics.

Framework-neutral (numpy). A generated tensor has the recorded shape; its
values are uniform in [Min, Max] with Min and Max themselves planted at two
random positions, integers are drawn from [Min, Max], booleans are constant
when Max == Min. Every draw comes from a generator seeded by the API's name
and the run's seed, so a value does not depend on which other APIs ran
before (a resumed or parallel run generates the same inputs).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probe_acc_check.cases import ApiCase, TensorSpec, map_leaves
from probe_acc_check.dtypes import canonical, is_float, is_int
from probe_acc_check.errors import SkipApi


@dataclass(frozen=True)
class Array:
    """A tensor input as numpy values plus the dtype it is recorded in (framework spelling)."""

    data: np.ndarray
    dtype: str
    name: str


@dataclass(frozen=True)
class Inputs:
    """What a backend runs a case with: arguments (trees of :class:`Array`) and one gradient per flattened
    output (``None`` where the recorded output is not a floating tensor); ``notes`` say what about them the
    verdict must be read with (values generated for a missing file, from a non-finite Max/Min)."""

    args: list
    kwargs: dict
    grads: tuple[np.ndarray | None, ...]
    notes: tuple[str, ...] = ()


def case_rng(case: ApiCase, seed: int) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(case.name.encode()), seed & 0xFFFFFFFF])


def _bound(value: Any, name: str, which: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SkipApi(f"{name}: no {which} recorded; dump with task \"statistics\" or \"tensor\" to pre-check it")
    return float(value)


def _plant(data: np.ndarray, low: Any, high: Any, rng: np.random.Generator) -> None:
    if data.size >= 2:
        first, second = rng.choice(data.size, 2, replace=False)
        data[first], data[second] = low, high
    elif data.size == 1:
        data[0] = high


#: ``(path, leaf name) -> numpy array``: the dump's data mode reading its tensor files (``DataMode.load_tensor``)
TensorLoader = Callable[[Path, str], np.ndarray]


def generate(spec: TensorSpec, rng: np.random.Generator, load: TensorLoader | None = None) -> np.ndarray:
    """Values for one recorded tensor: its file in tensor mode (read by ``load``), otherwise drawn from its
    statistics."""
    if spec.path:
        if load is None:
            raise SkipApi(f"{spec.name}: no installed data mode reads this dump's tensor files")
        data = load(Path(spec.path), spec.name)
        if tuple(data.shape) != spec.shape:
            raise SkipApi(f"{spec.name}: the tensor file holds shape {list(data.shape)}, dump.json says "
                          f"{list(spec.shape)}")
        return data
    kind, size = canonical(spec.dtype), math.prod(spec.shape)
    if kind == "bool":
        low, high = bool(spec.min), bool(spec.max) if spec.max is not None else True
        data = np.full(size, low) if low == high else rng.integers(0, 2, size).astype(bool)
    elif is_int(kind):
        low, high = int(_bound(spec.min, spec.name, "Min")), int(_bound(spec.max, spec.name, "Max"))
        data = rng.integers(low, high + 1, size, dtype=np.int64)
    elif is_float(kind):
        low, high = _bound(spec.min, spec.name, "Min"), _bound(spec.max, spec.name, "Max")
        finite = [v for v in (low, high) if math.isfinite(v)] or [0.0]
        data = rng.uniform(min(finite), max(finite), size)
    else:
        raise SkipApi(f"{spec.name}: inputs of dtype {spec.dtype!r} cannot be generated")
    _plant(data, low, high, rng)
    return data.reshape(spec.shape)


def caveat(spec: TensorSpec) -> str:
    """What the values made for ``spec`` are not: the recorded tensor, or values between finite bounds."""
    if spec.missing:
        return f"{spec.name}: tensor file missing, values generated from its statistics"
    if spec.path is None and is_float(canonical(spec.dtype)):
        bounds = [v for v in (spec.min, spec.max) if isinstance(v, (int, float)) and not math.isfinite(v)]
        if bounds:
            return (f"{spec.name}: generated from non-finite Max/Min ({spec.max}/{spec.min}): the inputs hold "
                    f"NaN/Inf, dump in tensor mode to check this API on its real values")
    return ""


def _gradient(output: Any, recorded: Any, rng: np.random.Generator, load: TensorLoader | None) -> np.ndarray | None:
    if not isinstance(output, TensorSpec) or not is_float(output.dtype):
        return None
    usable = isinstance(recorded, TensorSpec) and (recorded.path or recorded.min is not None)
    if usable and recorded.shape == output.shape:
        return generate(recorded, rng, load).astype(np.float64)
    return rng.uniform(-1.0, 1.0, output.shape)


def make_inputs(case: ApiCase, seed: int, load: TensorLoader | None = None) -> Inputs:
    """The case's arguments and output gradients (raises :class:`SkipApi` when they cannot be made); ``load``
    reads the real tensors of a tensor-mode dump."""
    rng = case_rng(case, seed)
    notes = []

    def array(spec: TensorSpec) -> Array:
        notes.append(caveat(spec))
        return Array(generate(spec, rng, load), spec.dtype, spec.name)

    args, kwargs = map_leaves(case.args, array), map_leaves(case.kwargs, array)
    recorded = list(case.grads or ())
    recorded += [None] * (len(case.outputs) - len(recorded))
    grads = tuple(_gradient(out, rec, rng, load) for out, rec in zip(case.outputs, recorded))
    notes += [caveat(rec) for rec in recorded if isinstance(rec, TensorSpec) and rec.missing]
    return Inputs(args, kwargs, grads, tuple(note for note in notes if note))

"""pass / warning / error for one compared entry, before the noise-aware judge sees the step.

The rules work on :class:`RowResult` objects, one per leaf (tensor or
scalar) of a matched entry, whose ``metrics`` hold the values the
comparators computed (keys are the CSV column names). Three sources of
verdicts, applied in this order by :func:`judge_entry`:

1. the rules that hold in every data mode (msprobe's legend): a leaf on
   one side only (warning), tensor vs non-tensor, non-tensor values differ,
   shape differs, requires_grad differs, a dtype differs outside the float
   dtypes compared with each other (errors); by default, a DTensor's local
   part (a shard, a partial sum) against a tensor of another layout is not
   compared (:func:`part_of_whole`: a message, no verdict, hidden from the
   judge), where msprobe's legend says Shape inconsistent;
2. with ``--rules msprobe`` only, the data mode's value rules
   (:meth:`probe_core.modes.DataMode.judge_row` per tensor leaf,
   :meth:`~probe_core.modes.DataMode.judge_io` from the inputs' error to
   the outputs'); by default the noise-aware judge
   (:mod:`probe_compare.judge`) decides on values, step by step;
3. each comparator's optional ``judge(row)`` (a plugin's own verdict).

Exemptions: the input-based rules skip the placeholder collectives
(:data:`PLACEHOLDER_APIS`); redundant APIs (:data:`REDUNDANT_APIS`) always
pass.

``--rules msprobe`` gives the Result column msprobe writes, row for row
(measured on msprobe's own example dump: ``benchmarks/msprobe_parity.py``):
a row is an *output* when it is one of the entry's ``output`` tensors and an
*input* otherwise (parameters and parameter gradients included); a tensor
on the target side only passes (its bench cells ``N/A``) and one on the bench
side only writes no row (:attr:`RowResult.shown`; :func:`judge_unmatched` for
whole entries; a mode's ``msprobe_one_sided`` level, ``pass`` unless it sets
one, md5's ``warning``); non-tensor values are compared on the input side only; a placeholder collective's inputs are not judged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probe_core.api import TensorMeta, as_float, common_api_name, parse_entry_name

if TYPE_CHECKING:  # pragma: no cover
    from probe_core.api import DataMode

PASS, WARNING, ERROR, UNMATCHED = "pass", "warning", "error", "unmatched"
SEVERITY = {PASS: 0, WARNING: 1, ERROR: 2, UNMATCHED: -1}

PLACEHOLDER_APIS = frozenset({"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"})
REDUNDANT_APIS = frozenset({"empty", "empty_like", "numpy", "to", "setitem", "empty_with_format",
                            "new_empty_strided", "new_empty", "empty_strided"})

INPUT_ROLES = ("input", "parameters")
#: float dtypes compared with each other (a float64 bench of a float32 run, bf16 against float32): a dtype
#: difference among them is information, not an error (msprobe matches them too)
COMPARABLE_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
#: ``--rules``: probe's noise-aware judge (:mod:`probe_compare.judge`) or msprobe's legend
RULES = ("noise", "msprobe")
OUTPUT_ROLES = ("output", "parameters_grad", "debug")


@dataclass
class RowResult:
    """One compare row: a target leaf, its bench leaf (either may be ``None``), metrics, verdict."""

    npu: TensorMeta | None
    bench: TensorMeta | None
    metrics: dict[str, Any] = field(default_factory=dict)
    result: str = PASS
    messages: list[str] = field(default_factory=list)
    shown: bool = True  # False: a row msprobe's rules do not write (a tensor on the bench side only)
    part: bool = False  # a DTensor's local part against another layout: not compared (:func:`part_of_whole`)

    @property
    def role(self) -> str:
        return (self.npu or self.bench).role  # type: ignore[union-attr]

    @property
    def err_message(self) -> str:
        return " ".join(self.messages)

    def flag(self, level: str, message: str) -> None:
        """Raise this row to ``level`` (never lowers it) and record why."""
        if SEVERITY[level] > SEVERITY[self.result]:
            self.result = level
        if message not in self.messages:
            self.messages.append(message)


def api_op(entry_name: str) -> str:
    """The operation name of an API entry (``Distributed._all_gather_base.0.forward`` -> ``_all_gather_base``)."""
    common = common_api_name(entry_name)
    if common is not None:
        base = common[0]
    else:
        parsed = parse_entry_name(entry_name)
        if parsed.kind != "api":
            return ""
        base = parsed.base
    parts = base.split(".", 2)
    return parts[1] if len(parts) > 1 else parts[0]


@lru_cache(maxsize=4096)  # a few hundred operations, asked for on every entry
def _is_redundant(op: str) -> bool:
    return op in REDUNDANT_APIS or op.strip("_") in REDUNDANT_APIS  # Tensor.__setitem__ -> setitem


@lru_cache(maxsize=1024)  # a handful of dtype strings, asked for on every leaf
def normalize_dtype(dtype: Any) -> str:
    """``torch.float32``, ``Float32``, ``mindspore.float32``, ``float32`` -> ``float32``."""
    text = str(dtype).lower()
    for prefix in ("torch.", "mindspore.", "numpy.", "np."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return {"bfloat16": "bfloat16", "float": "float32", "half": "float16", "double": "float64"}.get(text, text)


#: what a model derives from a float dtype (``torch.finfo``): the largest finite value, the smallest normal one and
#: the machine epsilon. Two runs in other dtypes hold the same constant at their own precision (a causal mask
#: filled with ``finfo(dtype).min``: -3.4e38 in float32, -1.8e308 in float64).
FINFO = {"float64": (1.7976931348623157e308, 2.2250738585072014e-308, 2.220446049250313e-16),
         "float32": (3.4028234663852886e38, 1.1754943508222875e-38, 1.1920928955078125e-07),
         "tensorfloat32": (3.4028234663852886e38, 1.1754943508222875e-38, 1.1920928955078125e-07),
         "bfloat16": (3.3895313892515355e38, 1.1754943508222875e-38, 0.0078125),
         "float16": (65504.0, 6.103515625e-05, 0.0009765625),
         "float8_e4m3fn": (448.0, 0.015625, 0.125), "float8_e5m2": (57344.0, 6.103515625e-05, 0.25)}
_CONSTANTS = {sign * value: (kind, sign) for values in FINFO.values()
              for kind, value in zip(("max", "tiny", "eps"), values) for sign in (1.0, -1.0)}


def same_dtype_constant(a: Any, b: Any) -> bool:
    """Whether two numbers are the same dtype-derived constant (``finfo.min`` of float32 and of float64, ...)."""
    if a.__class__ is not float or b.__class__ is not float:
        return False
    found = _CONSTANTS.get(a)
    return found is not None and found == _CONSTANTS.get(b)


def _float_dtype_names(a: Any, b: Any) -> bool:
    """Whether two argument values both name a float dtype (``torch.float32``, ``Float64``)."""
    return (a.__class__ is str and b.__class__ is str and normalize_dtype(a) in COMPARABLE_FLOATS
            and normalize_dtype(b) in COMPARABLE_FLOATS)


def is_bad(value: Any) -> bool:
    """True for a float NaN or ±Inf."""
    return isinstance(value, float) and (math.isnan(value) or math.isinf(value))


# -- per-row rules of every mode ---------------------------------------------------------


def _row_rules(row: RowResult, msprobe: str | None = None) -> bool:
    """The rules of every mode (``msprobe``: as msprobe's legend words them, the level of a target-only row);
    True when the row holds two tensors the mode should judge."""
    npu, bench = row.npu, row.bench
    if npu is None or bench is None:
        side = "bench" if npu is None else "target"
        what = "Parameters" if row.role == "parameters" else "Tensor"
        if msprobe:  # msprobe: the row is written with its bench cells N/A; a bench-only row is not written
            row.shown = npu is not None
            row.flag(msprobe, f"{what} only on the {side} side: not compared.")
        else:
            row.flag(WARNING, f"{what} only on the {side} side.")
        return False
    if npu.is_tensor != bench.is_tensor:
        row.flag(ERROR, "Tensor on one side, non-tensor on the other.")
        return False
    if not npu.is_tensor:
        if msprobe:
            if row.role != "output" and npu.max != bench.max:  # msprobe compares the input numbers only
                row.flag(ERROR, f"Scalar values differ ({npu.value!r} vs {bench.value!r}).")
            return False
        if npu.value == bench.value or (is_bad(npu.value) and is_bad(bench.value)) \
                or same_dtype_constant(npu.value, bench.value):
            return False
        if _float_dtype_names(npu.value, bench.value):  # each side names its own precision (a float64 bench)
            row.messages.append(f"Dtype argument {npu.value} vs {bench.value}: each side's own precision.")
        else:
            row.flag(ERROR, f"Scalar values differ ({npu.value!r} vs {bench.value!r}).")
        return False
    if not msprobe:  # msprobe compares a shard with the whole tensor: Shape inconsistent
        note = part_of_whole(npu, bench)
        if note:
            row.part, row.metrics = True, {}
            row.messages.append(note)
            return False
    if npu.dtype is not None and bench.dtype is not None and normalize_dtype(npu.dtype) != normalize_dtype(bench.dtype):
        if normalize_dtype(npu.dtype) in COMPARABLE_FLOATS and normalize_dtype(bench.dtype) in COMPARABLE_FLOATS:
            row.messages.append(f"Dtype {npu.dtype} vs {bench.dtype}: compared at the coarser precision.")
        else:
            row.flag(ERROR, f"Dtype inconsistent ({npu.dtype} vs {bench.dtype}).")
    if npu.shape is not None and bench.shape is not None and tuple(npu.shape) != tuple(bench.shape):
        row.flag(ERROR, f"Shape inconsistent ({list(npu.shape)} vs {list(bench.shape)}).")
    if npu.requires_grad is not None and bench.requires_grad is not None and npu.requires_grad != bench.requires_grad:
        row.flag(ERROR, "Requires_grad inconsistent.")
    return True


def _mesh_sizes(mesh: Any) -> list[int]:
    """The size of each dimension of a DTensor's ``device_mesh`` as written (the ranks as nested lists)."""
    sizes = []
    while isinstance(mesh, list) and mesh:
        sizes.append(len(mesh))
        mesh = mesh[0]
    return sizes


def local_part(raw: Mapping[str, Any] | None) -> str | None:
    """How a tensor leaf (its dump.json record ``raw``) recorded as a DTensor's local part (``"dtensor":
    "local"``: its ``placements`` and ``device_mesh``, as msprobe writes them) differs from the whole tensor:
    ``dim 0 split across 2 ranks``, ``a partial sum over 2 ranks``; ``None`` for a whole tensor (recorded
    whole, replicated, on one rank, or no DTensor)."""
    if raw is None or raw.get("full_tensor") or not isinstance(raw.get("placements"), list):
        return None
    sizes = _mesh_sizes(raw.get("device_mesh"))
    parts = []
    for axis, placement in enumerate(raw["placements"]):
        ranks = sizes[axis] if axis < len(sizes) else 0
        if not isinstance(placement, dict) or ranks == 1:
            continue
        across = f"{ranks} ranks" if ranks else "the ranks"
        if isinstance(placement.get("Shard"), dict):
            parts.append(f"dim {placement['Shard'].get('dim')} split across {across}")
        elif isinstance(placement.get("Partial"), dict):
            parts.append(f"a partial {placement['Partial'].get('reduce_op', 'sum')} over {across}")
    return ", ".join(parts) or None


def part_of_whole(npu: TensorMeta, bench: TensorMeta) -> str | None:
    """Why two tensor leaves are not compared, when one is this rank's part of a DTensor (a shard, a partial
    sum) and the other is not the same part: a sharded run against one device, collected with the default
    ``"dtensor": "local"``. Its statistics are not the whole tensor's, whatever the values: no error, no
    divergence; ``"dtensor": "full"`` records the whole tensor, which is compared. ``None``: compare them."""
    for side, leaf, other in (("target", npu, bench), ("bench", bench, npu)):
        part = local_part(leaf.raw)
        if part is None:
            continue
        mine, theirs = leaf.raw or {}, other.raw or {}
        same_layout = all(mine.get(key) == theirs.get(key) for key in ("placements", "device_mesh", "full_tensor"))
        if same_layout and tuple(other.shape or ()) == tuple(leaf.shape or ()):
            return None  # two runs sharded alike: the same part of each
        shapes = f"{list(npu.shape or ())} vs {list(bench.shape or ())}"
        return (f"The {side}'s tensor is this rank's part of a DTensor ({part}; {shapes}): not compared with the "
                'whole tensor. Collect with "dtensor": "full" to compare it.')
    return None


def metric_values(rows: Sequence[RowResult], key: str) -> list[float]:
    """The numeric, non-NaN values of metric ``key`` over ``rows`` (for input -> output rules)."""
    values = []
    for row in rows:
        value = as_float(row.metrics.get(key))
        if value is not None and not math.isnan(value):
            values.append(value)
    return values


def judge_entry(entry_name: str, rows: Sequence[RowResult], mode: DataMode,
                comparators: Sequence[Any] = (), rules: str = "msprobe") -> str:
    """Apply every rule to the rows of one matched entry; return the entry's result.

    ``mode`` is the :class:`~probe_core.modes.DataMode` of the compare;
    ``comparators`` are loaded comparators (``.judge`` is called where a
    comparator has one). Each row's ``result`` and ``messages`` are updated
    in place; the entry's result is the worst row's (error > warning > pass).
    With ``rules="noise"`` the mode's value rules (its ``judge_row`` and
    ``judge_io``) are left to the noise-aware judge, which sees the whole
    step (:mod:`probe_compare.judge`).
    """
    op = api_op(entry_name)
    if _is_redundant(op):
        for row in rows:
            row.result, row.messages = PASS, ["Redundant API: not compared."]
            row.shown = rules != "msprobe" or row.npu is not None
        return PASS
    judges = [comp for comp in comparators if comp.judge is not None]
    msprobe = rules == "msprobe"
    by_values = msprobe or not mode.measures_noise()
    skipped_inputs = msprobe and op in PLACEHOLDER_APIS  # msprobe judges only a placeholder's outputs
    for row in rows:
        if skipped_inputs and row.role != "output":
            row.shown = row.npu is not None
            continue
        if _row_rules(row, one_sided_level(mode) if msprobe else None) and by_values:
            mode.judge_row(row)
        if row.npu is not None and row.bench is not None and not row.part:
            for comp in judges:
                verdict = comp.run_judge(row)
                if verdict:
                    row.flag(*verdict)
    if msprobe and op not in PLACEHOLDER_APIS:  # every row msprobe writes, in order (outputs[0] gets a warning)
        written = [r for r in rows if r.shown]
        mode.judge_io([r for r in written if r.role != "output"], [r for r in written if r.role == "output"])
    elif op not in PLACEHOLDER_APIS and by_values:
        both = [r for r in rows if r.npu is not None and r.bench is not None and not r.part]
        mode.judge_io([r for r in both if r.role in INPUT_ROLES], [r for r in both if r.role in OUTPUT_ROLES])
    return worst(row.result for row in rows if row.shown)


def one_sided_level(mode: DataMode) -> str:
    """msprobe's Result for a target tensor without a bench partner in ``mode`` (statistics: pass)."""
    return mode.msprobe_one_sided


def judge_unmatched(rows: Sequence[RowResult], side: str, mode: DataMode, rules: str = "noise") -> None:
    """The rows of an entry found on one ``side`` only (``"target"`` or ``"bench"``): unmatched; with
    ``rules="msprobe"``, as msprobe writes them: a target-only entry's rows get :func:`one_sided_level`
    (bench cells ``N/A``), a bench-only entry writes no row."""
    for row in rows:
        if rules == "msprobe":
            row.result, row.shown = one_sided_level(mode), side == "target"
        else:
            row.result = UNMATCHED
        row.messages = [f"Only in the {side} dump: no matching entry on the other side."]


def worst(results) -> str:
    """The most severe of ``results`` (``pass`` when empty)."""
    best = PASS
    for result in results:
        if SEVERITY[result] > SEVERITY[best]:
            best = result
    return best

"""The noise-aware judge: which entry *adds* error, and where a step first went wrong.

Two runs on other hardware, another precision or another kernel never agree
bit for bit, so "the outputs differ" says nothing by itself. The judge asks
how much error an entry adds: the error of its outputs against the error
already in its inputs and against the rounding noise of its precision.

Per compared entry the data mode measures each leaf's **discrepancy**
(:meth:`probe_core.modes.DataMode.discrepancy`: 0 for identical values,
about ``u`` for one rounding at unit roundoff ``u``). From the entry's
rows, :func:`entry_facts` keeps what the judge needs: the worst input,
parameter and output discrepancy and the roundoff of the coarser dtype of
its outputs (a module: of everything inside it). Then, over a whole step in
execution order (:func:`judge_step`):

* an entry **adds error** when its output discrepancy is more than
  :data:`ADDS_ERROR` times what it carries: the worst of its inputs, its
  parameters, the earlier outputs of its siblings (the statistics of a
  masked tensor can hide its error), the outputs of its children (a module
  carries what its calls added) and the roundoff. Parameter gradients
  are results of a backward, never an origin. An optimizer's own call
  must add :data:`DECISIVE` times what it carries (AdamW amplifies the
  noise of gradients near zero), unless a rule flags it (a scalar: lr, eps);
* a divergence **comes in from outside** the step's calls when an entry's
  inputs or parameters differ by more than :data:`ADDS_ERROR` times
  anything produced before it in the step: parameters at step N > 0 (the
  update of step N-1 diverged), a call only the target made, a tensor an
  in-place call changed after it was produced, or the data;
* the target computes **below the precision** of the bench where the rest
  of the step does not (a bfloat16 matmul in a float32 model): the first
  entry whose target dtype is coarser than both its bench's and the step's
  usual one, and whose error is more than :data:`ADDS_ERROR` times what
  came before, is such a divergence too;
* a NaN or Inf on **one side only** (in any statistic of a tensor's, target
  or bench) is always an error of the entry that holds it, whatever the
  loss says: the earliest such entry is where the values broke;
* a divergence from outside or of precision is **consequential** when the
  loss (the last forward entry before the first backward) differs by more
  than :data:`CONSEQUENCE` times the previous clean step's, and by more
  than :data:`FLOOR` roundoffs. Noise that the optimizer amplifies in a few
  parameters (AdamW on gradients near zero) changes no loss: it names
  nothing. Inputs (not parameters) that differ by more than
  :data:`DECISIVE` times what came before are consequential whatever the
  loss says: no noise comes in that far;

With a :class:`NoiseReference` (``--noise-reference``: a pair of benign
runs), the fixed factors give way to what that pair shows: an entry adds
error when it shows :data:`REFERENCE_MARGIN` times the reference's error
for that entry (and :data:`REFERENCE_ADDS` times what it carries), the
loss counts at :data:`REFERENCE_LOSS` times the reference's at that step,
and a rule's error the pair has too is a known difference.

The step's answer is the earlier of the first entry that adds error and a
consequential divergence from outside. The same facts feed ``probe compare``
(its Result column and summary.json) and ``probe graph`` (colours and its
first divergent node), so both name the same entry.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import repeat
from typing import TYPE_CHECKING, Any

from probe_compare.rules import ERROR, FINFO, PASS, RowResult, normalize_dtype
from probe_core.api import OPTIMIZER_NODE, is_communication, writes_in_place

if TYPE_CHECKING:  # pragma: no cover
    from probe_compare.columnar import Plain
    from probe_core.api import DataMode, TensorMeta

#: unit roundoff of each float dtype (half an ulp at 1)
ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "tensorfloat32": 2.0 ** -11, "float16": 2.0 ** -11,
            "bfloat16": 2.0 ** -8, "float8_e4m3fn": 2.0 ** -4, "float8_e4m3fnuz": 2.0 ** -4,
            "float8_e5m2": 2.0 ** -3, "float8_e5m2fnuz": 2.0 ** -3}
#: output error more than this many times what the entry carries: the entry adds error
ADDS_ERROR = 32.0
#: an output this many times smaller than the inputs it is made of is a sum that cancelled: its error is measured
#: against the inputs' magnitude (:func:`_against_inputs`)
CANCELLED = 2.0 ** -12
#: inputs (not parameters) that differ by more than this many times anything produced before them in the step:
#: a divergence from outside that matters whatever the loss says (a random-init loss may barely move; noise of
#: another precision or summation order stays far below this, and only parameters carry AdamW's amplified noise);
#: also what an optimizer's own call (``optimizer`` node) must add to be an origin without a rule's error (AdamW
#: amplifies the noise of gradients near zero: a float64 bench's control shows ~550x at its addcdiv_)
DECISIVE = 1024.0
#: the loss differs by more than this many times the previous clean step's: the divergence matters
CONSEQUENCE = 8.0
#: ... and by more than this many roundoffs
FLOOR = 64.0
#: the kind of a finding whose tensor holds a NaN or Inf on one side only: always an error
NONFINITE = "nan/inf"
FLOAT_DTYPES = frozenset(ROUNDOFF)
#: with a noise reference: an entry's error must be more than this many times the reference's for that entry,
REFERENCE_MARGIN = 8.0
#: ... and more than this many times what it carries (the reference, not a fixed factor, says what is noise)
REFERENCE_ADDS = 4.0
#: with a noise reference: the loss differs by more than this many times the reference's at the same step
REFERENCE_LOSS = 4.0
#: the bench's calls the target skipped, named in a reason (the last ones before the divergence)
SHOWN_SKIPPED = 3


def roundoff(dtype: Any) -> float:
    """The unit roundoff of ``dtype`` (0 for integers, booleans and unknown dtypes)."""
    if type(dtype) is str:
        return _roundoff(dtype)
    return ROUNDOFF.get(normalize_dtype(dtype), 0.0) if dtype is not None else 0.0


@lru_cache(maxsize=512)
def _roundoff(dtype: str) -> float:
    return ROUNDOFF.get(normalize_dtype(dtype), 0.0)


@lru_cache(maxsize=512)
def largest(dtype: Any) -> float:
    """The largest finite value of a float ``dtype`` (``finfo(dtype).max``, :data:`~probe_compare.rules.FINFO`;
    0 for integers and unknown dtypes)."""
    found = FINFO.get(normalize_dtype(dtype)) if dtype is not None else None
    return found[0] if found is not None else 0.0


@dataclass(slots=True)
class EntryFacts:
    """What the judge knows of one entry: its place and how far apart its two sides are."""

    index: int
    name: str
    parent: str | None
    kind: str                      # "forward", "backward", "parameters_grad" or "other"
    result: str                    # the rules' verdict before the judge (pass / warning / error / unmatched)
    in_err: float = 0.0
    param_err: float = 0.0
    out_err: float = 0.0
    roundoff: float = 0.0          # the coarser output dtype of the two sides
    outputs: list[tuple[int, float]] = field(default_factory=list)  # (row position, discrepancy) of outputs
    worst_input: str | Reason = ""  # "input.1: Norm 2.1 vs 2.0" (a Reason: the text, made when first shown)
    worst_output: str | Reason = ""
    side: str | None = None        # for an unmatched entry: "target" or "bench"
    bench_name: str | None = None
    message: str = ""              # the first error message of the rules, if any
    pairs: Any = field(default=None, compare=False, repr=False)  # each row's (target leaf, bench leaf): read
    #                                to explain a divergence (the same leaves, lazily built or not)
    fresh_in: list[tuple[float, int]] = field(default_factory=list)  # (discrepancy, row) of differing inputs
    inputs: list[tuple[int, float]] = field(default_factory=list)  # (row position, discrepancy) of inputs, parameters
    target_dtype: str = ""         # the coarsest float dtype of the target's outputs
    lowered: str = ""              # "bfloat16 vs float32": the coarsest target leaf dtype coarser than its bench's
    lowered_u: float = 0.0         # ... and its unit roundoff
    nonfinite: tuple[int, ...] = ()  # row positions whose NaN/Inf is on one side only
    nonfinite_why: str = ""        # "input.0: Max nan vs 1.0: NaN/Inf in the target only"
    nonfinite_in: bool = False     # one of them is an input or parameter (the entry did not make it)

    def stats_out(self) -> list[tuple | None]:
        """The target statistics of each output (to find which entry produced a tensor read later)."""
        return [_stats_key(self.pairs[pos][0]) for pos, _ in self.outputs] if self.pairs is not None else []

    def stats_in(self) -> list[tuple | None]:
        """The target statistics of each differing input, the most different first."""
        return [_stats_key(self.pairs[pos][0]) for _, pos in sorted(self.fresh_in, key=lambda item: -item[0])]


@dataclass
class Finding:
    """Where one step of one rank first went wrong."""

    index: int
    name: str
    reason: str
    kind: str                      # "adds error", "parameters", "only in target", "in-place", "inputs", "precision",
    #                                "rules", "nan/inf"; "update" once moved to the step before
    rows: tuple[int, ...] = ()     # rows of the entry to mark as errors
    module: str | None = None      # for "parameters": the module whose parameters differ

    @property
    def received(self) -> bool:
        """A communication call that adds error: the divergence arrives through it from another rank, or the
        collective itself makes it (then every rank shows it). Its rows are warnings, the job's answer says which."""
        return self.kind == "adds error" and is_communication(self.name)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reason": self.reason, "kind": self.kind}


_DIRECTIONS = ("forward", "backward")


def _kind(name: str) -> str:
    if ".parameters_grad" in name:
        return "parameters_grad"
    head, _, last = name.rpartition(".")
    if last in _DIRECTIONS:  # an API's name: Functional.linear.0.forward
        return last
    second = head[head.rfind(".") + 1:]
    if second in _DIRECTIONS:  # a module's: Module.fc.Linear.forward.0
        return second
    for part in reversed(name.split(".")):
        if part in _DIRECTIONS:
            return part
    return "other"


def _stats_key(leaf: Any) -> tuple | None:
    if leaf is None or not leaf.is_tensor or leaf.shape is None:
        return None
    return (tuple(leaf.shape), leaf.dtype, *leaf.stats)


def entry_facts(name: str, index: int, parent: str | None, result: str, rows: Sequence[RowResult],
                mode: DataMode, side: str | None = None, bench_name: str | None = None) -> EntryFacts:
    """The judge's view of one compared entry (``rows`` after the rules ran)."""
    facts = EntryFacts(index, name, parent, _kind(name), result, side=side, bench_name=bench_name)
    if side is not None:
        return facts
    if result == ERROR:
        facts.message = next((row.err_message for row in rows if row.result == ERROR), "")
    pairs = [(row.npu, row.bench) for row in rows]
    layout = RowLayout.of(pairs)
    errs: list[float | None] = [None] * len(rows)
    for pos, _, _ in layout.tensors:
        errs[pos] = mode.discrepancy(rows[pos])
    _measure(facts, layout, pairs, errs, mode)
    facts.worst_input, facts.worst_output = str(facts.worst_input), str(facts.worst_output)  # the rows go
    return facts


def plain_facts(index: int, parent: str | None, plain: Plain, mode: DataMode, texts: bool = False) -> EntryFacts:
    """:func:`entry_facts` of an entry whose rows all pass, from what the columnar compare found of it (its
    layout, each row's discrepancy, its statistics). Its worst input and output are :class:`Reason` s: the
    judge shows a few (the entries it names), and their leaves are built then; ``texts``: made now instead,
    for facts kept beside much else (a Reason keeps the entry's statistics: about 250 bytes an entry)."""
    name, rows, start = plain.name, plain.rows, plain.start
    facts = EntryFacts(index, name, parent, _kind(name), PASS, 0.0, 0.0, 0.0, 0.0, [], "", "", None, plain.bench_name,
                       "", None, [], [])  # positional: no default factories, _measure sets the rest
    _measure(facts, rows.layout, plain.pairs, plain.chunk.errs[start:start + len(rows.suffixes)], mode, plain.stats)
    if texts:
        facts.worst_input, facts.worst_output = str(facts.worst_input), str(facts.worst_output)
    return facts


PARAMETERS, INPUT, OUTPUT = 0, 1, 2
_ROLE_CODES = {"parameters": PARAMETERS, "input": INPUT, "output": OUTPUT, "parameters_grad": OUTPUT,
               "debug": OUTPUT}


@dataclass(frozen=True, slots=True)
class RowLayout:
    """What the judge reads of an entry's rows before their values: which rows hold a tensor on both sides
    (position, role code, the coarser unit roundoff of the two), and what the dtypes say (the coarsest target
    output dtype; the coarsest target dtype below its bench's, and its roundoff)."""

    tensors: tuple[tuple[int, int, float], ...]
    target_dtype: str = ""
    lowered: str = ""
    lowered_u: float = 0.0
    outputs: tuple[tuple[int, float], ...] = ()  # the output rows of :attr:`tensors`: (position, unit roundoff)
    others: tuple[tuple[int, int], ...] = ()  # its input and parameter rows: (position, role code)
    input_rows: tuple[int, ...] = ()  # the positions of its input rows (:func:`_against_inputs` reads them)

    @classmethod
    def of(cls, pairs: Sequence[tuple[TensorMeta | None, TensorMeta | None]]) -> RowLayout:
        tensors = []
        notes = _DtypeNotes()
        for pos, (npu, bench) in enumerate(pairs):
            if npu is None or bench is None or not npu.is_tensor or not bench.is_tensor:
                continue
            code = _ROLE_CODES.get(npu.role, -1)
            _note_dtypes(notes, npu.dtype, bench.dtype, code == OUTPUT)
            tensors.append((pos, code, max(roundoff(npu.dtype), roundoff(bench.dtype))))
        return cls(tuple(tensors), notes.target_dtype, notes.lowered, notes.lowered_u,
                   tuple((pos, unit) for pos, code, unit in tensors if code == OUTPUT),
                   tuple((pos, code) for pos, code, _ in tensors if 0 <= code != OUTPUT),
                   tuple(pos for pos, code, _ in tensors if code == INPUT))


class _DtypeNotes:
    target_dtype, lowered, lowered_u = "", "", 0.0


def _measure(facts: EntryFacts, layout: RowLayout, pairs: Sequence[tuple[TensorMeta | None, TensorMeta | None]],
             errs: Sequence[float | None], mode: DataMode, stats: tuple[tuple, tuple] | None = None) -> None:
    """How far apart the entry's inputs, parameters and outputs are (``errs``: each row's discrepancy; ``stats``:
    a plain entry's statistics, see :func:`_against_inputs`)."""
    facts.target_dtype, facts.lowered, facts.lowered_u = layout.target_dtype, layout.lowered, layout.lowered_u
    facts.pairs = pairs
    found = _spread_native(layout.outputs, layout.others, layout.input_rows, errs, *stats) \
        if stats is not None and _spread_native is not None else None
    (facts.out_err, facts.roundoff, facts.outputs, at_out, worst_out, facts.in_err, facts.param_err, facts.inputs,
     facts.fresh_in, at_in, worst_in, errs) = found if found is not None else _spread(layout, pairs, errs, stats)
    if at_in >= 0:
        facts.worst_input = Reason(facts.name, pairs, at_in, mode, worst_in)
    if at_out >= 0:
        facts.worst_output = Reason(facts.name, pairs, at_out, mode, worst_out)
    if worst_in == math.inf or worst_out == math.inf:  # only then can a side hold NaN/Inf the other does not
        _note_nonfinite(facts, layout, pairs, errs, mode)


def _spread(layout: RowLayout, pairs: Sequence[tuple[TensorMeta | None, TensorMeta | None]],
            errs: Sequence[float | None], stats: tuple[tuple, tuple] | None) -> tuple:
    """(worst output discrepancy, the outputs' coarser roundoff, each output's (position, discrepancy), the worst
    output's position and discrepancy, the worst input's and parameter's discrepancy, each input's and
    parameter's (position, discrepancy), each differing input's (discrepancy, position), the worst of them's
    position and discrepancy, ``errs`` as measured: see :func:`_against_inputs`). Positions are -1 where
    there is none. The C helper (``probe_compare._facts``) gives the same for the common entry."""
    if max(filter(None, errs), default=0.0) > _CANCELLED_CHECK:  # rare but for noisy pairs: a cancelled result
        errs = _against_inputs(layout, pairs, errs, stats)
    worst_out = worst_in = -1.0
    at_in = at_out = -1
    out_err = unit_out = 0.0
    outputs: list[tuple[int, float]] = []
    for pos, unit in layout.outputs:
        err = errs[pos]
        if err is None:
            continue
        outputs.append((pos, err))
        if unit > unit_out:
            unit_out = unit
        if err > worst_out:
            worst_out, at_out = err, pos
            if err > out_err:
                out_err = err
    in_err = param_err = 0.0
    inputs: list[tuple[int, float]] = []
    fresh_in: list[tuple[float, int]] = []
    for pos, code in layout.others:
        err = errs[pos]
        if err is None:
            continue
        inputs.append((pos, err))
        if code == PARAMETERS:
            if err > param_err:
                param_err = err
        elif err > 0:  # only a differing input can have been changed in place
            fresh_in.append((err, pos))
            if err > in_err:
                in_err = err
        if err > worst_in:
            worst_in, at_in = err, pos
    return (out_err, unit_out, outputs, at_out, worst_out, in_err, param_err, inputs, fresh_in, at_in, worst_in,
            errs)


_CANCELLED_CHECK = ADDS_ERROR * ROUNDOFF["float32"]  # an error above it may be a cancelled sum's (_against_inputs)

try:
    from probe_compare._facts import configure as _configure_native, spread as _spread_native
except ImportError:  # built without a C compiler
    _spread_native = None
else:
    _configure_native(_CANCELLED_CHECK, CANCELLED, PARAMETERS)


def _against_inputs(layout: RowLayout, pairs: Sequence[tuple[TensorMeta | None, TensorMeta | None]],
                    errs: Sequence[float | None], stats: tuple[tuple, tuple] | None = None) -> Sequence[float | None]:
    """``errs`` with each output :data:`CANCELLED` times smaller than the inputs it is made of measured against
    the inputs' magnitude: a sum that cancels (the gradient of a bias before a normalisation, 0 in exact
    arithmetic) keeps the rounding error of its terms, however small it is itself. ``stats``: a plain entry's
    statistics (four per row, each side), read instead of its leaves."""
    magnitude, source = (_leaves_magnitude, pairs) if stats is None else (_stats_magnitude, stats)
    scale = max(map(magnitude, repeat(source), layout.input_rows), default=0.0)
    if not scale > 0 or not math.isfinite(scale):
        return errs
    out = None
    for pos, _ in layout.outputs:
        if errs[pos] and magnitude(source, pos) < CANCELLED * scale:
            if out is None:
                out = list(errs)
            target, bench = pairs[pos]
            apart = [abs(x - y) for x, y in zip(_numbers(target), _numbers(bench))]
            out[pos] = min(out[pos], max(apart, default=0.0) / scale)
    return errs if out is None else out


def _numbers(leaf: TensorMeta | None) -> tuple[float, ...]:
    """A tensor leaf's Max, Min and Mean where they are finite numbers."""
    values = (leaf.max, leaf.min, leaf.mean) if leaf is not None else ()
    return tuple(v if isinstance(v, (int, float)) and math.isfinite(v) else math.nan for v in values)


def _leaves_magnitude(pairs: Sequence[tuple[TensorMeta | None, TensorMeta | None]], pos: int) -> float:
    """The largest finite absolute Max or Min of row ``pos``'s leaf on either side (NaN when there is none)."""
    values = [abs(v) for leaf in pairs[pos] for v in _numbers(leaf)[:2] if v == v]
    return max(values) if values else math.nan


def _stats_magnitude(stats: tuple[tuple, tuple], pos: int) -> float:
    """:func:`_leaves_magnitude` of a plain entry's row from its statistics (numbers, four per row: Max first)."""
    at = 4 * pos
    target, bench = stats
    values = (abs(target[at]), abs(target[at + 1]), abs(bench[at]), abs(bench[at + 1]))
    total = sum(values)
    if total - total == 0.0:  # all finite: the common case
        return max(values)
    finite = [value for value in values if value - value == 0.0]
    return max(finite) if finite else math.nan


def _note_nonfinite(facts: EntryFacts, layout: RowLayout, pairs: Sequence[tuple[TensorMeta | None, TensorMeta | None]],
                    errs: Sequence[float | None], mode: DataMode) -> None:
    """Note the tensor rows whose statistics hold a NaN or Inf on one side only (rows infinitely apart)."""
    found, why = [], ""
    for pos, code, _ in layout.tensors:
        if errs[pos] != math.inf:
            continue
        npu, bench = pairs[pos]
        target_bad, bench_bad = _nonfinite(npu), _nonfinite(bench)
        if target_bad == bench_bad:
            continue
        found.append(pos)
        facts.nonfinite_in = facts.nonfinite_in or code != OUTPUT
        if not why:
            side = "target" if target_bad else "bench"
            why = f"{Reason(facts.name, pairs, pos, mode, math.inf)}: NaN/Inf in the {side} only"
    facts.nonfinite, facts.nonfinite_why = tuple(found), why


def _nonfinite(leaf: TensorMeta | None) -> bool:
    """Whether a tensor's statistics hold a NaN or an Inf."""
    return leaf is not None and any(type(v) is float and not math.isfinite(v) for v in leaf.stats)


def _note_dtypes(facts: Any, target: Any, bench: Any, output: bool) -> None:
    """Keep the coarsest target output dtype, and the coarsest target dtype below its bench's."""
    u_target, u_bench = roundoff(target), roundoff(bench)
    if output and u_target > roundoff(facts.target_dtype or None):
        facts.target_dtype = normalize_dtype(target)
    if u_target > u_bench and u_target > facts.lowered_u:
        facts.lowered_u, facts.lowered = u_target, f"{normalize_dtype(target)} vs {normalize_dtype(bench)}"


class Reason:
    """``input.1: Norm 2.1 vs 2.0``: a row's leaf name within its entry, and why its sides differ (``err``: the
    row's discrepancy, shown when the mode's own test finds no difference). The text is made when first
    shown (``str``, an f-string; a pickled Reason is its text): most entries' worst rows are never shown."""

    __slots__ = ("entry", "pairs", "pos", "mode", "err", "_text")

    def __init__(self, entry: str, pairs: Sequence[tuple[Any, Any]], pos: int, mode: DataMode, err: float) -> None:
        self.entry, self.pairs, self.pos, self.mode, self.err, self._text = entry, pairs, pos, mode, err, None

    def __str__(self) -> str:
        if self._text is None:
            npu, bench = self.pairs[self.pos]
            short = npu.name[len(self.entry) + 1:] if npu.name.startswith(self.entry) else ""
            reason = self.mode.differs(RowResult(npu, bench))
            if reason is None:
                reason = f"{self.err:.2g} apart for its scale" if self.err > 0 else "agrees"
            self._text = f"{short}: {reason}"
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __repr__(self) -> str:
        return repr(str(self))

    def __reduce__(self) -> tuple:
        return str, (str(self),)


# -- a noise reference ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseReference:
    """The noise of one rank as a pair of benign runs shows it (``--noise-reference``): per entry, the worst
    discrepancy of its inputs/parameters and of its outputs over the steps, and the rules' error messages
    it has too (a known difference: another GELU approximation, a scalar); per step, the loss's."""

    came_in: Mapping[str, float]
    out: Mapping[str, float]
    loss: Mapping[int, float]
    ruled: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(cls, steps: Iterable[tuple[int, Sequence[EntryFacts]]]) -> NoiseReference:
        came_in: dict[str, float] = {}
        out: dict[str, float] = {}
        loss: dict[int, float] = {}
        ruled: set[tuple[str, str]] = set()
        for step, facts in steps:
            for f in facts:
                if f.side is None:
                    came_in[f.name] = max(came_in.get(f.name, 0.0), f.in_err, f.param_err)
                    out[f.name] = max(out.get(f.name, 0.0), f.out_err)
                    if f.result == ERROR:
                        ruled.add((f.name, f.message))
            last = _loss(facts)
            if last is not None:
                loss[step] = last.out_err
        return cls(came_in, out, loss, frozenset(ruled))

    def limit(self, table: Mapping[str, float], name: str, carried: float) -> float | None:
        """How much error ``name`` may show before it counts, or ``None`` when the reference lacks it."""
        noise = table.get(name)
        return None if noise is None else max(REFERENCE_ADDS * carried, REFERENCE_MARGIN * noise)


def _limit(reference: NoiseReference | None, table: str, name: str, carried: float) -> float:
    found = reference.limit(getattr(reference, table), name, carried) if reference is not None else None
    return ADDS_ERROR * carried if found is None else found


# -- one step ---------------------------------------------------------------------------------------


@dataclass
class StepJudgement:
    """The judge's verdicts on one step of one rank."""

    errors: dict[int, Finding]     # entry index -> why it is an error
    first: Finding | None
    loss_err: float | None         # the loss's discrepancy (the next step's baseline)
    loss_roundoff: float = 0.0
    outside: Finding | None = None  # a divergence from outside the step, consequential or not
    consequential: bool = False
    accepted: frozenset[int] = frozenset()  # entries whose rule errors the noise reference has too


def _loss(facts: Sequence[EntryFacts]) -> EntryFacts | None:
    """The last forward entry before the first backward entry (the loss, in a training step)."""
    last = None
    for f in facts:
        if f.kind == "backward":
            break
        if f.kind == "forward" and f.side is None:
            last = f
    return last


def _parents(facts: Sequence[EntryFacts]) -> dict[str, str | None]:
    return {f.name: f.parent for f in facts}


def judge_step(facts: Sequence[EntryFacts], step: int, baseline: float | None = None,
               reference: NoiseReference | None = None) -> StepJudgement:
    """Judge one step (``facts`` in execution order); ``baseline`` is the largest loss discrepancy of the
    clean steps before it (``None`` at the first step); ``reference`` the rank's noise as benign runs show it."""
    parents = _parents(facts)
    usual = _usual_dtype(facts)
    inside: dict[str, float] = {}      # module -> coarsest roundoff of anything inside it
    inside_err: dict[str, float] = {}  # module -> the worst output error of anything inside it
    siblings: dict[str | None, float] = {}
    carried = 0.0                      # the worst output error produced so far in the step
    errors: dict[int, Finding] = {}
    ruled: dict[int, Finding] = {}
    accepted: set[int] = set()
    outside: Finding | None = None
    decisive = False                   # the outside divergence is far beyond noise (see DECISIVE)
    last_target_only: EntryFacts | None = None
    bench_only: list[EntryFacts] = []  # the bench's calls the target did not make, so far in the step
    saved: dict[str, float] = {}       # forward entry -> the worst error of the tensors its backward may read
    for f in _in_bench_order(facts):
        if f.side is not None:
            if f.side == "target":
                last_target_only = f
            else:
                bench_only.append(f)
            continue
        u = max(f.roundoff, inside.get(f.name, 0.0))
        within = inside_err.get(f.name, 0.0)
        parent, depth = f.parent, 0
        while parent is not None and depth < 256:  # a module's precision is the coarsest of anything inside it,
            inside[parent] = max(inside.get(parent, 0.0), u)  # and it carries the error of its children
            inside_err[parent] = max(inside_err.get(parent, 0.0), f.out_err, within)
            parent, depth = parents.get(parent), depth + 1
        if f.result == ERROR and reference is not None and (f.name, f.message) in reference.ruled:
            accepted.add(f.index)  # the benign pair has it too: a known difference
        elif f.result == ERROR:  # a rule's error (a scalar argument, a shape, ...) stands whatever the values
            ruled[f.index] = Finding(f.index, f.name, f.message or "the rules flag an error", "rules")
        if f.nonfinite:  # so does a NaN/Inf on one side only; its rows say which
            ruled[f.index] = Finding(f.index, f.name, f.nonfinite_why, NONFINITE, f.nonfinite)
        if f.kind == "parameters_grad":  # never an origin; but differing while nothing before them did, they
            # show a change in calls that were not dumped (a compiled model at L0: its gradients are all there is)
            if outside is None and not errors and not ruled and f.out_err > _limit(reference, "out", f.name,
                                                                                     carried + u):
                outside = Finding(f.index, f.name, f"{f.worst_output}; parameter gradients differ although no dumped "
                                  "call before them does: the change comes from calls not dumped", "inputs")
            continue
        context = siblings.get(f.parent, 0.0)
        if f.kind == "forward":
            saved[f.name] = max(f.in_err, f.param_err, f.out_err)
        elif f.kind == "backward":  # a backward also reads what its forward saved (inputs, weights, outputs)
            context = max(context, saved.get(_forward_of(f.name), 0.0))
        if outside is None and not errors and not ruled and f.lowered_u > usual[1] \
                and (f.in_err > _limit(reference, "came_in", f.name, carried + usual[1])
                     or f.out_err > _limit(reference, "out", f.name, carried + usual[1])):
            outside = Finding(f.index, f.name, f"the target computes in {f.lowered} here, where the rest of the "
                              f"step runs in {usual[0]} ({f.worst_input or f.worst_output}): a precision the bench "
                              "does not have", "precision", _over(f.inputs + f.outputs, carried + usual[1]))
        carries = max(f.in_err, f.param_err, context, within)
        limit = ADDS_ERROR * (carries + u) if reference is None else _limit(reference, "out", f.name, carries + u)
        if f.parent == OPTIMIZER_NODE and reference is None:  # AdamW divides by sqrt(v) + eps: noise in gradients
            limit = max(limit, DECISIVE * (carries + u))  # near zero comes out many times larger, bug or none
        if f.out_err > 0 and f.out_err > limit:
            errors[f.index] = Finding(
                f.index, f.name, f"{f.worst_output}; the entry adds error: {_times(f.out_err, carries + u)} what it "
                f"carries (inputs {f.in_err:.3g}, parameters {f.param_err:.3g}, roundoff {u:.3g})", "adds error",
                tuple(pos for pos, err in f.outputs if err > limit))
        came_in = max(f.in_err, f.param_err)
        if outside is None and came_in > 0 and not errors and not ruled \
                and came_in > _limit(reference, "came_in", f.name, carried + u):
            outside = _explain(f, step, {e.name: e for e in facts}, last_target_only, facts, bench_only)
            if outside.index == f.index:  # its own differing inputs and parameters are the rows to read
                outside.rows = _over(f.inputs, carried + u)
            decisive = outside.kind != "parameters" and reference is None and f.in_err > DECISIVE * (carried + u)
        siblings[f.parent] = max(context, f.out_err)
        carried = max(carried, f.out_err)
    loss = _loss(facts)
    loss_err = loss.out_err if loss is not None else None
    loss_u = loss.roundoff if loss is not None else 0.0
    consequential = False
    if outside is not None and (loss_err is None or decisive):  # no loss dumped (L0 of a compiled model): nothing
        consequential = True  # says it is noise; or it is far beyond any noise
    elif outside is not None and loss_err is not None:  # the loss itself may be the entry whose inputs differ
        noise = reference.loss.get(step) if reference is not None else None
        expected = CONSEQUENCE * (baseline or 0.0) if noise is None else REFERENCE_LOSS * noise
        consequential = loss_err > max(expected, FLOOR * loss_u) and loss.index >= outside.index
    independent = _unreached(outside, facts, errors, ruled, loss) if consequential and not decisive else set()
    if independent:  # the loss moved through a call of the step's own that the parameters' divergence never
        consequential = False  # reached: AdamW's noise in a few parameters did not move it
    if outside is not None and consequential and not any(i < outside.index for i in errors):
        errors[outside.index] = outside
    if outside is not None and not consequential:
        # the divergence from outside changed nothing that matters (AdamW's noise in a few parameters): the
        # entries it carries error into are consequences, not causes
        errors = {i: e for i, e in errors.items() if i < outside.index or i in independent}
    for index, finding in ruled.items():
        if finding.kind == NONFINITE or index not in errors:  # a NaN/Inf is named as what it is
            errors[index] = finding
    _unpaired_calls(errors, facts)
    _updates(errors, facts, step)
    first = errors[min(errors)] if errors else None
    return StepJudgement(errors, first, loss_err, loss_u, outside, consequential, frozenset(accepted))


def _unreached(outside: Finding | None, facts: Sequence[EntryFacts], errors: Mapping[int, Finding],
               ruled: Mapping[int, Finding], loss: EntryFacts | None) -> set[int]:
    """The step's errors after a divergence of the parameters, up to the loss, that it did not reach: what each
    carries is :data:`ADDS_ERROR` times less than the parameters' difference (it died out on the way, as the
    update noise of a bias does in the call that reads it)."""
    if outside is None or outside.kind != "parameters" or loss is None:
        return set()
    later = {i for i in (*errors, *ruled) if outside.index < i <= loss.index}
    if not later:
        return set()
    by_index = {f.index: f for f in facts if f.index == outside.index or f.index in later}
    came_in = max(by_index[outside.index].in_err, by_index[outside.index].param_err)
    return {i for i in later if ADDS_ERROR * max(by_index[i].in_err, by_index[i].param_err) < came_in}


def _in_bench_order(facts: Sequence[EntryFacts]) -> list[EntryFacts]:
    """The step's facts with each bench-only entry (listed last by the compare, its index ``-1 - bench index``)
    moved to where the bench made it: after as many matched entries as the bench made before it."""
    alone = sorted((f for f in facts if f.side == "bench"), key=lambda f: -1 - f.index)
    if not alone:
        return list(facts)
    before = {id(f): -1 - f.index - rank for rank, f in enumerate(alone)}  # matched bench entries before it
    out: list[EntryFacts] = []
    matched, waiting = 0, list(alone)
    for f in facts:
        if f.side == "bench":
            continue
        if f.side is None:
            while waiting and before[id(waiting[0])] <= matched:
                out.append(waiting.pop(0))
            matched += 1
        out.append(f)
    return out + waiting


def _api(name: str) -> str | None:
    """``Tensor.mul_`` of ``Tensor.mul_.4.forward`` (an API call's name; ``None`` for a module's)."""
    parts = name.split(".")
    if len(parts) < 4 or parts[-1] not in _DIRECTIONS or not parts[-2].isdigit():
        return None
    return ".".join(parts[:-2])


def _unpaired_calls(errors: dict[int, Finding], facts: Sequence[EntryFacts]) -> None:
    """A rule's error (requires_grad, shape, dtype) at a call of an API that one side called more often in the
    step: calls are paired by their count, so the pair may be two different calls. Said so in its reason."""
    if not errors:
        return
    extra = Counter((_api(f.name), f.side) for f in facts if f.side is not None)
    if not extra:
        return
    for finding in errors.values():
        api = _api(finding.name) if finding.kind == "rules" else None
        more = {side: extra[(api, side)] for side in ("target", "bench")} if api else {}
        side = max(more, key=more.get) if more else None
        if side is not None and more[side]:
            other = "bench" if side == "target" else "target"
            finding.reason = (f"{finding.reason.rstrip('.')}; the {side} made {more[side]} more calls of {api} "
                              f"than the {other} in this step: calls are paired by their count, so this pair may "
                              f"be two different calls: the {other} skipped one here or before")


def _updates(errors: dict[int, Finding], facts: Sequence[EntryFacts], step: int) -> None:
    """Findings at the optimizer's own calls (recorded under msprobe's ``optimizer`` node) are the update of
    the step: said so, with what the call found."""
    if not errors:
        return
    inside = {f.index for f in facts if f.parent == OPTIMIZER_NODE}
    for index, finding in errors.items():
        if index in inside and finding.kind in ("adds error", "rules", "inputs"):
            finding.kind = "update"
            finding.reason = f"the update of step {step} diverged at this optimizer call: {finding.reason}"


def _usual_dtype(facts: Sequence[EntryFacts]) -> tuple[str, float]:
    """The target's most common output dtype in a step, and its roundoff."""
    counts = Counter(f.target_dtype for f in facts if f.side is None and f.target_dtype)
    usual = counts.most_common(1)[0][0] if counts else ""
    return usual, roundoff(usual or None)


def _over(leaves: Sequence[tuple[int, float]], carried: float) -> tuple[int, ...]:
    """The row positions whose discrepancy is more than :data:`ADDS_ERROR` times ``carried``."""
    return tuple(pos for pos, err in leaves if err > ADDS_ERROR * carried)


def _forward_of(name: str) -> str:
    """The forward entry of a backward one: ``X.0.backward`` -> ``X.0.forward``, ``M.Linear.backward.0`` ->
    ``M.Linear.forward.0``."""
    head, _, tail = name.rpartition(".backward")
    return f"{head}.forward{tail}"


def _times(err: float, carried: float) -> str:
    return "infinitely more than" if carried == 0 or math.isinf(err) else f"{err / carried:.3g} times"


def _explain(f: EntryFacts, step: int, by_name: Mapping[str, EntryFacts], target_only: EntryFacts | None,
             facts: Sequence[EntryFacts], bench_only: Sequence[EntryFacts] = ()) -> Finding:
    """Why an entry's inputs differ although nothing before it in the step produced the difference (``facts``:
    the step's, in execution order; ``bench_only``: the calls before it that only the bench made)."""
    module = f.parent if f.param_err == 0 and f.parent in by_name and by_name[f.parent].param_err > 0 else None
    if f.param_err > 0 or module is not None:
        owner = f.name if f.param_err > 0 else module
        what = f.worst_input if f.param_err > 0 else by_name[module].worst_input  # type: ignore[index]
        if step > 0:
            return Finding(f.index, f.name, f"parameters of {_module_of(owner)} differ ({what}) although nothing "
                           f"in step {step} changed them: the update of step {step - 1} diverged", "parameters",
                           module=_module_of(owner))
        return Finding(f.index, f.name, f"parameters of {_module_of(owner)} differ ({what}) before any call of "
                       "the step: the two runs start from different weights", "parameters", module=_module_of(owner))
    if target_only is not None and target_only.index < f.index:
        return Finding(target_only.index, target_only.name,
                       f"only in the target dump; the next matched entry {f.name} already has differing inputs "
                       f"({f.worst_input})", "only in target")
    wanted = f.stats_in()
    produced = _producers(facts, f, {key for key in wanted if key is not None}) if wanted else {}
    for key in wanted:
        producer = produced.get(key) if key is not None else None
        if producer is not None and _in_place(producer.name):
            return Finding(producer.index, producer.name,
                           f"in-place call: {f.name} reads its output ({f.worst_input}) where the bench reads "
                           "another value: a tensor was changed in place after it was produced", "in-place")
    if bench_only:
        return Finding(f.index, f.name, f"inputs already differ ({f.worst_input}) after {_skipped(bench_only)}",
                       "inputs")
    return Finding(f.index, f.name, f"inputs already differ ({f.worst_input}): the change comes from outside "
                   "the dumped calls (data, or a call not dumped: the default risk_level leaves out calls that "
                   "create, cast or move values, such as tril, to, reshape; risk_level ALL records them)", "inputs")


def _skipped(bench_only: Sequence[EntryFacts]) -> str:
    """``bench_only`` said as code the target skipped (gradient clipping switched off, a hook removed)."""
    shown = ", ".join(f.name for f in bench_only[-SHOWN_SKIPPED:])
    more = f"{len(bench_only)} calls only the bench made, the last: " if len(bench_only) > SHOWN_SKIPPED else \
        f"{len(bench_only)} call{'s' if len(bench_only) > 1 else ''} only the bench made: "
    return (f"{more}{shown}: the target skipped code the bench runs (gradient clipping switched off, a step "
            "removed), and what it computed reaches this call")


def _producers(facts: Sequence[EntryFacts], before: EntryFacts, wanted: set[tuple]) -> dict[tuple, EntryFacts]:
    """Which matched entry before ``before`` last produced each of the ``wanted`` target statistics."""
    found: dict[tuple, EntryFacts] = {}
    for g in facts:
        if g is before:
            break
        if g.side is None and g.kind != "parameters_grad":
            for key in g.stats_out():
                if key in wanted:
                    found[key] = g
    return found


def _in_place(name: str) -> bool:
    """``Tensor.add_.0.forward``, ``Tensor.__iadd__.0.forward``: a call that changes its input in place."""
    parts = name.split(".")
    return len(parts) >= 3 and writes_in_place(parts[-3])


def _module_of(name: str) -> str:
    for marker in (".forward", ".backward", ".parameters_grad"):
        if marker in name:
            return name.split(marker)[0]
    return name


# -- msprobe's rules ---------------------------------------------------------------------------------


def judge_step_by_rules(facts: Sequence[EntryFacts]) -> StepJudgement:
    """``--rules msprobe``: the verdicts are the rules'; the step's answer is its first error entry."""
    for f in facts:
        if f.result == ERROR:
            first = Finding(f.index, f.name, "first entry whose Result is error (msprobe's rules)", "rules")
            return StepJudgement({}, first, None)
    return StepJudgement({}, None, None)


__all__ = ["ADDS_ERROR", "CONSEQUENCE", "EntryFacts", "FLOOR", "Finding", "NONFINITE", "ROUNDOFF",
           "StepJudgement", "entry_facts", "judge_step", "judge_step_by_rules", "largest", "roundoff"]

"""From the two runs of a case to its rows: one details row per output, one result row per API."""

from __future__ import annotations

import math
from dataclasses import dataclass

from probe_acc_check.backend import Outcome, Output, Run
from probe_acc_check.cases import ApiCase
from probe_acc_check.conditioning import within_spread
from probe_acc_check.metrics import Metrics, binary_metrics, float_metrics
from probe_acc_check.standards import ERROR, PASS, SKIP, WARNING, OutputCheck, Verdict, judge

SEVERITY = {ERROR: 3, WARNING: 2, PASS: 1, SKIP: 0, "": 0}


@dataclass(frozen=True)
class DetailRow:
    """One output of one API: both dtypes, the shape, the metrics, the standard that judged it and its verdict."""

    name: str
    bench_dtype: str
    tested_dtype: str
    shape: str
    metrics: Metrics
    standard: str
    status: str
    message: str


@dataclass(frozen=True)
class ApiResult:
    """One API: forward and backward status (``pass``/``warning``/``error``/``SKIP``; backward ``""`` when
    it has none), a message, and its details rows."""

    name: str
    forward: str
    backward: str
    message: str
    rows: tuple[DetailRow, ...] = ()

    @property
    def status(self) -> str:
        """The API's overall status: ``SKIP`` when it did not run, else the worse of forward and backward."""
        if self.forward == SKIP:
            return SKIP
        return max((self.forward, self.backward), key=SEVERITY.__getitem__)


def skipped(case: ApiCase, reason: str) -> ApiResult:
    """An API that did not run: SKIP, with one details row carrying the reason (as msprobe writes it)."""
    row = DetailRow(f"{case.name}.forward.output.0", "", "", "", Metrics(), "", SKIP, reason)
    return ApiResult(case.name, SKIP, SKIP, reason, (row,))


def worst(statuses: list[str]) -> str:
    """The worst status of some rows; ``SKIP`` when none of them was judged."""
    judged = [status for status in statuses if status != SKIP]
    return max(judged, key=SEVERITY.__getitem__) if judged else SKIP


def _row(name: str, tested: Output | None, bench: Output | None, metrics: Metrics, standard: str,
         verdict: Verdict, note: str) -> DetailRow:
    shape = list((tested or bench).shape) if (tested or bench) is not None else []
    message = "; ".join(text for text in (verdict.message, note) if text)
    return DetailRow(name, bench.dtype if bench else "", tested.dtype if tested else "", str(shape), metrics,
                     standard, verdict.status, message)


def _window_overlap(case: ApiCase) -> int:
    """How many windows of a max pooling can share one input element (its gradient sums their shares):
    per spatial dimension ``ceil(((kernel - 1) * dilation + 1) / stride)``, multiplied."""
    names = ("input", "kernel_size", "stride", "padding", "dilation")
    given = dict(zip(names, case.args)) | {key: value for key, value in case.kwargs.items() if key in names}

    def per_dim(value: object) -> list[int]:
        return list(value) if isinstance(value, (list, tuple)) else [value] if isinstance(value, int) else []

    kernel = per_dim(given.get("kernel_size"))
    stride = per_dim(given.get("stride")) or kernel
    dilation = per_dim(given.get("dilation")) or [1]
    if not kernel:
        return 1
    dims = max(len(kernel), len(stride), len(dilation), int(case.op[-2]) if case.op[-2].isdigit() else 1)
    spread = lambda values: values * dims if len(values) == 1 else values  # noqa: E731
    return math.prod(-(-((k - 1) * d + 1) // max(s, 1))
                     for k, s, d in zip(spread(kernel), spread(stride), spread(dilation)))


def summed_terms(case: ApiCase, forward: list[Output | None], grad: Output) -> int:
    """How many terms each element of the gradient ``grad`` of one input sums: for an input an element-wise
    op broadcast, the output's size over the input's (the gradient sums over the broadcast dimensions); for
    max pooling, the windows that can share an input element; else 1."""
    if case.op.startswith("max_pool"):
        return _window_overlap(case)
    sizes = [math.prod(out.shape) for out in forward if out is not None and out.is_tensor and out.floating]
    size = math.prod(grad.shape)
    return max(1, max(sizes, default=0) // size) if size else 1


def _compare(case: ApiCase, direction: str, tested: list, bench: list, standards: list, note: str,
             forward: list | None = None, spread: list | None = None) -> list[DetailRow]:
    """One row per output; ``forward``: the tested forward outputs (for a gradient's summed terms);
    ``spread``: the benchmark's outputs on inputs moved by one rounding (ill-conditioned operators)."""
    rows = []
    if len(tested) != len(bench):
        return [_row(f"{case.name}.{direction}.output.0", None, None, Metrics(), "",
                     Verdict(ERROR, f"the tested run gave {len(tested)} outputs, the benchmark {len(bench)}"), note)]
    for index, (t, b) in enumerate(zip(tested, bench)):
        name = f"{case.name}.{direction}.output.{index}"
        if t is None and b is None:
            continue
        if t is None or b is None or t.is_tensor != b.is_tensor:
            rows.append(_row(name, t, b, Metrics(), "", Verdict(ERROR, "one run gave no value (or no tensor) "
                                                                       "where the other gave one"), note))
        elif t.shape != b.shape:
            rows.append(_row(name, t, b, Metrics(), "", Verdict(ERROR, f"shape {list(t.shape)} differs from the "
                                                                       f"benchmark's {list(b.shape)}"), note))
        else:
            metrics = float_metrics(t.value, b.value, t.dtype) if t.floating else binary_metrics(t.value, b.value)
            terms = summed_terms(case, forward, t) if forward is not None and t.floating else 1
            standard, verdict = judge(OutputCheck(case.api, name, direction, t, b, metrics, terms), standards)
            moved = spread[index] if spread is not None and index < len(spread) else None
            if verdict.status in (ERROR, WARNING) and moved is not None and t.floating and moved.is_tensor:
                reason = within_spread(t.value, b.value, moved.value, terms)
                verdict = Verdict(PASS, reason) if reason else verdict
            rows.append(_row(name, t, b, metrics, standard, verdict, note))
    return rows


def _message(rows: list[DetailRow], fallback: str) -> str:
    failing = sorted((row for row in rows if row.status in (ERROR, WARNING)),
                     key=lambda row: -SEVERITY[row.status])
    if not failing:
        return fallback
    first = failing[0]
    more = f" (and {len(failing) - 1} more outputs)" if len(failing) > 1 else ""
    return f"{first.name}: {first.message}{more}"


def judge_run(case: ApiCase, run: Run, standards: list) -> ApiResult:
    """Compare both runs output by output; ``standards`` are ``(name, object)`` pairs in consulting order."""
    spread = run.spread or Outcome([], [])
    forward = _compare(case, "forward", run.tested.forward, run.bench.forward, standards, run.note,
                       spread=spread.forward if run.spread else None)
    backward = _compare(case, "backward", run.tested.backward, run.bench.backward, standards, run.note,
                        run.tested.forward, spread.backward if run.spread else None)
    fwd_status = worst([row.status for row in forward]) if forward else SKIP
    if backward:
        bwd_status = worst([row.status for row in backward])
    else:
        bwd_status = SKIP if run.backward_skip else ""
    fallback = "no output to compare" if not forward else (f"backward: {run.backward_skip}" if run.backward_skip
                                                          else run.note)
    return ApiResult(case.name, fwd_status, bwd_status, _message(forward + backward, fallback),
                     tuple(forward + backward))

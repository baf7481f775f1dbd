"""The ``tensor`` data mode (plugin ``tensor``; task ``tensor``): statistics plus every tensor saved.

* collection: the statistics record plus ``data_name``, the tensor written
  under ``dump_tensor_data/`` off the training thread;
* dumps: task ``tensor``, or tensor records with a ``data_name`` (msprobe
  writes some with another task); its dumps also compare in statistics mode
  against a statistics dump;
* compare: msprobe's real-data metrics from the saved files, in float64
  (:mod:`probe_modes.compare_tensor`) and its legend's rules — inputs' One
  Thousandth Err Ratio above 0.9 and an output's below 0.6 (error); inputs'
  cosine above 0.9 dropping by more than 0.1 at an output (warning). Two
  leaves differ when MaxAbsErr exceeds ``1e-8 + 1e-5 * max(|bench max|,
  |bench min|)``;
* graph: task ``all``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from probe_compare.api import ERROR, RowResult, WARNING, metric_values
from probe_core.api import ComparatorSpec, DataMode, DataModeSpec, as_float, hookimpl
from probe_modes.statistics import DIVERGENCE_ATOL, DIVERGENCE_RTOL, StatisticsMode

THOUSANDTH_INPUT_MIN = 0.9    # error: inputs' ratio above this ...
THOUSANDTH_OUTPUT_MAX = 0.6   # ... and an output's below this
COSINE_INPUT_MIN = 0.9        # warning: inputs' cosine above this ...
COSINE_DROP = 0.1             # ... dropping by more than this


class TensorMode(StatisticsMode):
    name = "tensor"
    saves_tensors = True
    compares_as = ("statistics",)
    data_name_column = True
    graph_task = "all"
    legend = "tensor error of inputs/outputs"

    def extend(self, record: dict[str, Any], tensor: Any, ops: Any, sink: Any, label: str) -> None:
        record["data_name"] = sink.save_tensor(tensor, label)

    def load_tensor(self, path: Path | None, leaf_name: str) -> Any:
        from probe_modes.tensor_io import load_array  # numpy: only when a tensor is read

        return load_array(path, leaf_name)

    def recognises(self, task: str, record: Mapping[str, Any] | None) -> bool:
        return task == "tensor" or (record is not None and bool(record.get("data_name")) and task != "statistics")

    def judge_io(self, inputs: Sequence[RowResult], outputs: Sequence[RowResult]) -> None:
        in_ratio = metric_values(inputs, "One Thousandth Err Ratio")
        in_cos = metric_values(inputs, "Cosine")
        for row in outputs:
            out_ratio = as_float(row.metrics.get("One Thousandth Err Ratio"))
            if in_ratio and out_ratio is not None and min(in_ratio) > THOUSANDTH_INPUT_MIN \
                    and out_ratio < THOUSANDTH_OUTPUT_MAX:
                row.flag(ERROR, f"Output One Thousandth Err Ratio {out_ratio:.4g} < {THOUSANDTH_OUTPUT_MAX} "
                                f"while inputs' > {THOUSANDTH_INPUT_MIN}.")
            out_cos = as_float(row.metrics.get("Cosine"))
            if in_cos and out_cos is not None and min(in_cos) > COSINE_INPUT_MIN \
                    and min(in_cos) - out_cos > COSINE_DROP:
                row.flag(WARNING, f"Cosine drops from {min(in_cos):.4g} (inputs) to {out_cos:.4g} (output).")

    def discrepancy(self, row: RowResult) -> float | None:
        """From the values themselves where they were compared: the Euclidean distance against the bench's
        Norm and the largest element error against the bench's largest magnitude, the worse of the two."""
        euc, max_abs = as_float(row.metrics.get("EucDist")), as_float(row.metrics.get("MaxAbsErr"))
        if max_abs is None or math.isnan(max_abs):
            return super().discrepancy(row)
        bench = row.bench
        norm = as_float(bench.norm) or 0.0
        scale = max(abs(as_float(bench.max) or 0.0), abs(as_float(bench.min) or 0.0))
        worst = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
        if euc is not None and not math.isnan(euc):
            worst = max(worst, euc / norm if norm > 0 else (0.0 if euc == 0 else math.inf))
        return worst

    def differs(self, row: RowResult) -> str | None:
        if "MaxAbsErr" not in row.metrics:
            return super().differs(row)
        err = as_float(row.metrics.get("MaxAbsErr"))
        bench = row.bench
        scale = max(abs(as_float(bench.max) or 0.0), abs(as_float(bench.min) or 0.0))
        if err is not None and (math.isnan(err) or err > DIVERGENCE_ATOL + DIVERGENCE_RTOL * scale):
            return f"MaxAbsErr {err:.4g}, Cosine {row.metrics.get('Cosine')}"
        return None

    def tool_tips(self) -> dict[str, str]:
        return {"Cosine": "cosine similarity of target and bench tensors (1 is identical)",
                "MaxAbsErr": "largest absolute element difference",
                "MaxRelativeErr": "largest relative element difference",
                "One Thousandth Err Ratio": "share of elements with relative error below 0.1%",
                "Five Thousandths Err Ratio": "share of elements with relative error below 0.5%"}

    shown_metrics = DataMode.shown_metrics  # the real-data metrics as they are


def _comparator() -> Any:
    from probe_modes.compare_tensor import TensorComparator  # numpy: only when a tensor compare runs

    return TensorComparator()


@hookimpl
def probe_data_modes() -> list[DataModeSpec]:
    return [DataModeSpec("tensor", "statistics plus every tensor saved under dump_tensor_data/", TensorMode,
                         tasks=("tensor",))]


@hookimpl
def probe_comparators() -> list[ComparatorSpec]:
    return [ComparatorSpec("tensor", "tensor", "Cosine, EucDist, MaxAbsErr, MaxRelativeErr, one/five-thousandth "
                           "error ratios in float64 from the saved tensors", _comparator)]

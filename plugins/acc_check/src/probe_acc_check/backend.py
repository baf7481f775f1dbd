"""What a framework backend hands back, and how the pre-check finds the backend of a dump's framework.

A backend re-runs one :class:`~probe_acc_check.cases.ApiCase` twice — on the
device under test in the recorded dtype (the *tested* run) and on the CPU in
float64 (the *benchmark*) — from the same :class:`~probe_acc_check.inputs.Inputs`,
and returns both runs' outputs as numpy values. Everything after that
(metrics, standards, CSVs) is framework-neutral. A backend raises
:class:`~probe_acc_check.errors.SkipApi` for an API it cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from probe_acc_check.cases import ApiCase
from probe_acc_check.errors import AccCheckError
from probe_acc_check.inputs import Inputs


@dataclass(frozen=True)
class Output:
    """One output (or input gradient) of a run.

    ``value``: numpy values (float64 for floating tensors, the tensor's own
    integer/bool dtype otherwise) or a plain Python value; ``dtype``: the
    framework's name of the dtype it was computed in (``torch.bfloat16``,
    ``Float32``) or the Python type; ``floating``: a floating-point tensor.
    """

    value: Any
    dtype: str
    is_tensor: bool = True
    floating: bool = True

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.value)) if self.is_tensor else ()


@dataclass(frozen=True)
class Outcome:
    """One run of a case: the forward outputs (flattened) and the gradients of the inputs that take one."""

    forward: list[Output | None]
    backward: list[Output | None] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    """Both runs of a case.

    ``backward_skip`` says why no backward was compared (empty when it was,
    or when the API has no floating output); ``note`` goes into every row's
    Message (e.g. the benchmark fell back to float32); ``inputs`` are the
    tested run's inputs ``(name, values, dtype)``, kept for ``-save_error_data``.
    """

    tested: Outcome
    bench: Outcome
    backward_skip: str = ""
    note: str = ""
    inputs: tuple[tuple[str, np.ndarray, str], ...] = ()


@dataclass(frozen=True)
class Options:
    """How to run: ``device`` under test (``cpu``, ``cuda:0``, ``npu:0``); ``dtype``: run floating inputs
    in this dtype instead of the recorded one (``None``: as recorded); ``keep_inputs`` for error data."""

    device: str = "cpu"
    dtype: str | None = None
    keep_inputs: bool = False


class Backend(Protocol):
    def run(self, case: ApiCase, inputs: Inputs) -> Run: ...


def dotted_attr(root: Any, dotted: str) -> Any:
    """``root.a.b`` for ``"a.b"``; ``None`` where an attribute is missing."""
    for part in dotted.split("."):
        root = getattr(root, part, None)
        if root is None:
            return None
    return root


def load_backend(framework: str, options: Options) -> Backend:
    """The backend for a dump of ``framework`` (``pytorch`` or ``mindspore``)."""
    if framework == "mindspore":
        from probe_acc_check.ms_backend import MindSporeBackend

        return MindSporeBackend(options)
    if framework in ("pytorch", ""):
        from probe_acc_check.torch_backend import TorchBackend

        return TorchBackend(options)
    raise AccCheckError(f'dump.json: "framework": {framework!r} is not pre-checked; probe acc-check runs PyTorch '
                        f"and MindSpore dumps")

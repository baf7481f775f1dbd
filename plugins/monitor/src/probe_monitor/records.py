"""What one recorded statistic row is, and the order quantities take along one training step."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

#: The quantities of one step in the order they come about: the state entering the step, the forward,
#: the backward (local gradients, collectives, reduced gradients, their global norm), the optimizer's
#: moments and the updated parameters. ``probe monitor compare`` names the first of them that parts.
CHAIN = ("param_origin", "actv", "actv_grad", "grad_unreduced", "comm", "grad_reduced", "grad_norm",
         "exp_avg", "exp_avg_sq", "param_updated")
#: Quantities recorded per micro-step (their CSVs have a ``micro_step`` column).
MICRO_TAGS = ("actv", "actv_grad", "comm")


def chain_index(tag: str) -> int:
    """Position of ``tag`` along :data:`CHAIN`; a third-party tag comes last."""
    return CHAIN.index(tag) if tag in CHAIN else len(CHAIN)


@dataclass(frozen=True)
class Row:
    """One tensor's statistics at one step: a line of ``{tag}_{start}-{end}.csv``.

    ``stats`` maps each statistic (the config's ``ops``, in order) to its value; ``shape`` and
    ``dtype`` are ``None`` for a tensor that did not exist (e.g. the gradient of an input that needs
    none: msprobe writes such rows as ``nan``). ``resolution`` is how far a value read back from a CSV
    may be from the statistic (half a unit of the last decimal its file was written with: msprobe rounds
    to 6 decimals), 0 for a row not read from a file.
    """

    tag: str
    name: str
    step: int
    stats: Mapping[str, float]
    shape: tuple[int, ...] | None
    dtype: str | None
    micro_step: int | None = None
    vpp_stage: int = 0
    resolution: float = 0.0

    @property
    def missing(self) -> bool:
        return self.shape is None

    @property
    def module(self) -> str:
        """The module a parameter or activation row belongs to (``blocks.0.fc1.weight`` → ``blocks.0.fc1``)."""
        return module_of(self.tag, self.name)


def module_of(tag: str, name: str) -> str:
    head, _, last = name.rpartition(".")
    if tag in ("actv", "actv_grad") and last.isdigit():
        head, _, _ = head.rpartition(".")  # blocks.0.attn.output.1
    return head


def non_finite(stats: Mapping[str, float]) -> list[str]:
    """The statistics of a row that are NaN or infinite (``nans`` counts NaNs: above 0 is one too)."""
    bad = [op for op, value in stats.items() if op != "nans" and not math.isfinite(value)]
    if stats.get("nans", 0) and "nans" in stats:
        bad.append("nans")
    return bad


def grad_norm(rows: list[Row], step: int) -> list[Row]:
    """The global norm of the reduced gradients of one step, from their per-parameter norms (host arithmetic);
    read back from files, within the rounding of those norms."""
    grads = [r for r in rows if r.tag == "grad_reduced" and r.step == step and not r.missing and "norm" in r.stats]
    if not grads:
        return []
    total = math.sqrt(sum(r.stats["norm"] ** 2 for r in grads))
    rounding = max(r.resolution for r in grads) * math.sqrt(len(grads))
    return [Row("grad_norm", "global", step, {"norm": total}, (), grads[0].dtype, resolution=rounding)]

"""``--noise-reference``: how much two benign runs differ, entry by entry, to calibrate the judge.

A user who has a pair of runs known to be good (the target stack on a release that trained well against the
same bench, or the bench run twice on other kernels) gives it to ``probe compare`` or ``probe graph``. probe
compares that pair first (facts only, nothing written) and keeps, per rank, the worst discrepancy of each
entry's inputs and outputs and each step's loss (:class:`~probe_compare.judge.NoiseReference`). The
judge then calls an entry an error only when it shows :data:`~probe_compare.judge.REFERENCE_MARGIN`
times more error than the reference pair does there: bf16 noise that a fixed factor must tolerate everywhere
is measured where it is, and smaller bugs stand out.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from probe_compare.judge import NoiseReference
from probe_compare.options import CompareOptions
from probe_compare.pairs import compare_pairs, pair_dumps
from probe_core.api import CompareError, ProbeError, discover


def reference_pair(paths: Sequence[str | Path], bench: str | Path) -> tuple[Path, Path]:
    """``--noise-reference REF [REF_BENCH]``: the benign pair, its bench the compared bench by default."""
    if not 1 <= len(paths) <= 2:
        raise CompareError(f"--noise-reference takes one dump (a benign run to compare with the bench) or two "
                           f"(a benign target and its bench), not {len(paths)}")
    return Path(paths[0]), Path(paths[1] if len(paths) == 2 else bench)


def noise_references(pair: tuple[Path, Path], registry: Any, *, ranks: Sequence[int] | None = None,
                     steps: Sequence[int] | None = None, lenient: bool = False,
                     progress: bool = False) -> dict[int, NoiseReference]:
    """Compare the benign ``pair`` (facts only) and return each rank's noise."""
    try:
        targets = discover(pair[0], ranks=ranks, steps=steps, lenient=lenient)
        benches = discover(pair[1], ranks=ranks, steps=steps, lenient=lenient)
        pairs = pair_dumps(targets, benches)
    except ProbeError as exc:
        raise CompareError(f"--noise-reference: {exc}") from exc
    by_rank: dict[int, list] = {}
    with tempfile.TemporaryDirectory(prefix="probe-noise-reference-") as scratch:
        options = CompareOptions(pair[0], pair[1], Path(scratch), lenient=lenient, progress=progress)
        options = dataclasses.replace(options, stamp="reference")
        for pending in compare_pairs(pairs, registry, options):
            pending.spool.unlink(missing_ok=True)  # only the facts are wanted
            by_rank.setdefault(pending.rank, []).append((pending.step, pending.facts))
    return {rank: NoiseReference.of(chain) for rank, chain in by_rank.items()}

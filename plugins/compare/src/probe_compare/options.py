"""What a compare is asked to do (:class:`CompareOptions`) and what one rank pair's compare gives back
(:class:`RankResult`, as summary.json writes it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from probe_core.api import record


@record(frozen=False)
class CompareOptions:
    """Everything ``probe compare`` was asked to do."""

    target: Path
    bench: Path
    output: Path
    fuzzy: bool = False
    mapping: Path | bool | None = None  # -lm/--mapping YAML, or True: the built-in tables only
    ranks: Sequence[int] | None = None
    steps: Sequence[int] | None = None
    workers: int = 1
    lenient: bool = False
    xlsx: bool = False
    progress: bool = True
    stamp: str = ""  # the 14-digit time in the result file names (set by run_compare)
    step_folders: bool = False  # results of several steps go to OUT/step{N}/ (set by run_compare)
    data_mapping: Path | None = None
    cell_mapping: Path | bool | None = None
    api_mapping: Path | bool | None = None
    tensor_log: bool = False  # -tensor_log: one line per compared entry
    diff_analyze: bool = False  # -da: diff_analyze_{ns}.json with each rank's first divergent entry
    postprocess: Path | None = None  # --config: tensor post-process YAML
    consistent_backend: str | None = None  # --consistent_check [--backend]: "fsdp", "megatron" or "any"
    rules: str = "noise"  # --rules: the noise-aware judge, or "msprobe" (its legend's Result column)
    noise_reference: tuple[Path, Path] | None = None  # --noise-reference: a benign (target, bench) pair
    executor: str = "local"  # --executor: where the rank jobs run (probe_core.executor)
    scheduler: str | None = None  # --scheduler: the Dask scheduler's address
    process_ends: bool = False  # the process ends after the compare (the CLI): one pair's index and facts left to it
    #: the result files written completely so far in this process (what a full disk keeps; not compared)
    written: list[str] = field(default_factory=list, compare=False, repr=False)


@record(frozen=False)
class RankResult:
    label: str
    counts: dict[str, int]
    row_counts: dict[str, int]
    unmatched: dict[str, list[str]]
    first_divergence: dict[str, Any] | None
    csv: str
    xlsx: str | None
    target: str
    bench: str
    errors: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)  # dumps of an interrupted step (header "partial": true)
    step: int = 0  # the (step, rank) and data mode the job's summary needs; not written per rank
    rank_id: int = 0
    mode: str = ""

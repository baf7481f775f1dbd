"""The pre-check run: read the dump, run each API (in this process or in worker processes), judge, write.

Workers (local processes, or a Dask cluster's) only run APIs (:func:`run_case`): inputs, the tested run and
the benchmark. Judging and writing stay in this process, in the dump's order, so
the CSVs do not depend on ``--workers`` and the standards are the ones this
process's registry holds (config.json's ``"plugins"`` section applies).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from probe_core.api import ProbeError

from probe_acc_check.backend import Options, Run, load_backend
from probe_acc_check.cases import ApiCase, dedupe, missing_files, open_dump, read_cases, select
from probe_acc_check.errors import AccCheckError, SkipApi, first_line
from probe_acc_check.inputs import TensorLoader, make_inputs
from probe_acc_check.judge import judge_run, skipped
from probe_acc_check.report import summarize
from probe_acc_check.results import ResultFiles
from probe_acc_check.standards import ERROR, WARNING


@dataclass(frozen=True)
class CheckOptions:
    """Everything ``probe acc-check`` takes (the CLI's options, by their long names)."""

    api_info: str
    out_path: str = "."
    csv_path: str | None = None
    save_error_data: bool = False
    workers: int = 1
    device: str = "cpu"
    device_ids: tuple[int, ...] = ()
    dtype: str | None = None
    filters: tuple[str, ...] = ()
    filter_api: bool = False
    seed: int = 1234
    step: int | None = None
    rank: int | None = None
    executor: str = "local"  # or "dask": the APIs run on a Dask cluster (probe_core.executor)
    scheduler: str | None = None  # the cluster's scheduler; None: a local cluster of `workers` processes
    generate_missing: bool = False  # tensor files dump.json names but the dump lacks: generate, don't refuse
    mode: str = ""  # the dump's data mode (its load_tensor reads the tensor files); set by run_check

    def backend_options(self, device: str) -> Options:
        return Options(device, self.dtype, keep_inputs=self.save_error_data)

    def devices(self) -> list[str]:
        """The device of each worker: ``--device`` alone, or one per ``-d`` id (``npu:0``, ``npu:1``, ...)."""
        if not self.device_ids:
            return [self.device]
        kind = self.device.split(":", 1)[0]
        return [f"{kind}:{index}" if kind != "cpu" else "cpu" for index in self.device_ids]


def tensor_loader(mode: str, registry: Any = None) -> TensorLoader | None:
    """How the dump's data mode reads its tensor files (``DataMode.load_tensor``); ``None`` without one."""
    if not mode:
        return None
    from probe_core.api import current_registry

    spec = (registry or current_registry()).data_modes.get(mode)
    return spec.load().load_tensor if spec is not None else None


def run_case(case: ApiCase, backend: Any, seed: int, load: TensorLoader | None = None) -> Run | str:
    """Run one case on ``backend`` (tensor files read by ``load``): its :class:`Run`, or why it was skipped.
    Never raises for the API's sake."""
    if case.skip:
        return case.skip
    try:
        inputs = make_inputs(case, seed, load)
        run = backend.run(case, inputs)
        return replace(run, note="; ".join(filter(None, (*inputs.notes, run.note)))) if inputs.notes else run
    except SkipApi as exc:
        return exc.reason
    except Exception as exc:  # an API must never take the run down: it becomes a skipped row
        return f"could not run: {type(exc).__name__}: {first_line(exc)}"


def _outcomes(cases: list[ApiCase], framework: str, options: CheckOptions, registry: Any) -> Iterator[Run | str]:
    """Each case's outcome, in order: on a Dask cluster, in worker processes, or here (the backend loaded
    first, so that a missing framework or device is reported before any file is written)."""
    if options.executor == "dask":
        from probe_acc_check.workers import on_cluster

        return on_cluster(cases, framework, options)
    if options.workers > 1 and len(cases) > 1:
        from probe_acc_check.workers import in_workers

        return in_workers(cases, framework, options)
    backend = load_backend(framework, options.backend_options(options.devices()[0]), registry)
    load = tensor_loader(options.mode, registry)
    return (run_case(case, backend, options.seed, load) for case in cases)


def _standards(registry: Any) -> list[tuple[str, Any]]:
    specs = registry.family("acc_standards")
    if not specs:
        raise AccCheckError('no precision standard is enabled (probe_acc_standards); remove "acc_check" from '
                            'config.json "plugins.disable", or install a plugin that registers standards')
    return [(name, spec.load()) for name, spec in specs.items()]


def _save_error_data(folder: Path, case: ApiCase, run: Run) -> None:
    """Inputs and both runs' outputs of a failing API, as .npy (floats in float64: exact for every float dtype)."""
    target = folder / "error_data"
    target.mkdir(parents=True, exist_ok=True)
    for name, values, _ in run.inputs:
        np.save(target / f"{name}.npy", values)
    for direction, tested, bench in (("forward", run.tested.forward, run.bench.forward),
                                     ("backward", run.tested.backward, run.bench.backward)):
        for index, (t, b) in enumerate(zip(tested, bench)):
            for side, output in (("tested", t), ("bench", b)):
                if output is not None and output.is_tensor:
                    np.save(target / f"{case.name}.{direction}.output.{index}.{side}.npy", output.value)


def run_check(options: CheckOptions, registry: Any, progress: Any = None) -> dict[str, Any]:
    """Pre-check the dump of ``options.api_info``; returns the summary (also written to summary.json).

    ``progress``: a callable ``(done, total, name)`` told after each API.
    """
    dump = open_dump(options.api_info, options.step, options.rank)
    cases = read_cases(dump)
    if options.filters:
        cases = select(cases, options.filters)
        if not cases:
            raise AccCheckError(f"--filter {' '.join(options.filters)}: no API of {dump.dump_file} matches; "
                                f"patterns match names like Functional.gelu.0, Functional.gelu or gelu")
    if options.filter_api:
        cases = dedupe(cases)
    missing = missing_files(cases)
    if missing and not options.generate_missing:
        raise AccCheckError(f"{dump.dump_file}: {len(missing)} tensor files it names are missing from "
                            f"{dump.folder / 'dump_tensor_data'} (first: {missing[0]}); copy the whole dump folder, "
                            f"or pass --generate-missing to check those APIs on values generated from their "
                            f"statistics (said in each row's Message)")
    standards = _standards(registry)
    if options.csv_path:
        files, done = ResultFiles.resume(options.csv_path)
    else:
        files, done = None, set()
    todo = [case for case in cases if case.name not in done]
    framework = dump.framework or "pytorch"
    try:
        options = replace(options, mode=dump.mode(registry).name)
    except ProbeError:  # no installed mode reads it: an API whose tensors are files is a skipped row saying so
        pass
    outcomes = _outcomes(todo, framework, options, registry)
    files = files or ResultFiles.create(options.out_path)
    total, count = len(cases), len(cases) - len(todo)
    for case, outcome in zip(todo, outcomes):
        result = skipped(case, outcome) if isinstance(outcome, str) else judge_run(case, outcome, standards)
        files.write(result)
        if options.save_error_data and not isinstance(outcome, str) and result.status in (ERROR, WARNING):
            _save_error_data(files.folder, case, outcome)
        count += 1
        if progress is not None:
            progress(count, total, case.name)
    run = {"dump": str(dump.dump_file), "framework": framework, "task": dump.task, "device": options.device,
           "dtype": options.dtype or "recorded", "seed": options.seed, "workers": options.workers,
           "executor": options.executor,
           "standards": [name for name, _ in standards], "resumed": bool(options.csv_path)}
    return summarize(files, run)


"""What a framework backend hands back, and how the pre-check finds the backend of a dump's framework.

A backend re-runs one :class:`~probe_acc_check.cases.ApiCase` twice — on the
device under test in the recorded dtype (the *tested* run) and on the CPU in
float64 (the *benchmark*) — from the same :class:`~probe_acc_check.inputs.Inputs`,
and returns both runs' outputs as numpy values. Everything after that
(metrics, standards, CSVs) is framework-neutral. A backend raises
:class:`~probe_acc_check.errors.SkipApi` for an API it cannot run.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from probe_acc_check.cases import ApiCase
from probe_acc_check.conditioning import dithered, needs_spread
from probe_acc_check.errors import AccCheckError, SkipApi
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
    ``spread``: the benchmark run again on inputs and output gradients moved by one rounding of the
    tested dtype (:mod:`probe_acc_check.conditioning`); ``None`` without a floating output.
    """

    tested: Outcome
    bench: Outcome
    backward_skip: str = ""
    note: str = ""
    inputs: tuple[tuple[str, np.ndarray, str], ...] = ()
    spread: Outcome | None = None


@dataclass(frozen=True)
class Options:
    """How to run: ``device`` under test (``cpu``, ``cuda:0``, ``npu:0``); ``dtype``: run floating inputs
    in this dtype instead of the recorded one (``None``: as recorded); ``keep_inputs`` for error data."""

    device: str = "cpu"
    dtype: str | None = None
    keep_inputs: bool = False


class Backend(Protocol):
    def run(self, case: ApiCase, inputs: Inputs) -> Run: ...


#: what a tested run raises for a kernel the device lacks (or arguments it refuses): a skipped row
RUN_ERRORS: tuple[type[BaseException], ...] = (RuntimeError, TypeError, ValueError, NotImplementedError, IndexError)


class FrameworkBackend:
    """The run both framework backends share: the recorded inputs as the framework's tensors on the device
    under test, the values they hold after that rounding as the benchmark's inputs, the tested run forward and
    backward, then the benchmark (:func:`probe_acc_check.torch_backend.benchmark`, given framework-neutral
    arrays). A backend supplies the framework's side:

    ``label``, ``operators`` (its operator table), ``tensor(Array)``, ``numpy(tensor)`` (float64 for floating
    tensors), ``typed(Typed)`` (a recorded dtype/device), ``execute(fn, args, kwargs, grads, takes_grad)``
    (``takes_grad``: per tensor argument, whether its gradient is computed; :meth:`ApiCase.takes_grad`),
    ``benchmark`` and, optionally, ``bench_call`` (the benchmark's callable and arguments, when they are
    another framework's) and ``replay`` (random ops)."""

    label = ""
    run_errors: tuple[type[BaseException], ...] = RUN_ERRORS  # a tested run's exceptions that skip the row
    operators: Callable[[str], Any]
    options: Options
    benchmark: Callable[..., tuple[Outcome, str, str]]

    def run(self, case: ApiCase, inputs: Inputs) -> Run:
        from probe_acc_check.cases import map_leaves, map_typed, tensor_leaves
        from probe_acc_check.errors import first_line
        from probe_acc_check.inputs import Array

        fn = resolve(case.api, self.operators, self.label)
        args, kwargs = map_leaves(inputs.args, self.tensor), map_leaves(inputs.kwargs, self.tensor)
        arrays = list(tensor_leaves([inputs.args, inputs.kwargs]))
        used = [Array(self.numpy(t), str(t.dtype), a.name) for t, a in zip(tensor_leaves([args, kwargs]), arrays)]
        rounded = iter(used)
        bench_args, bench_kwargs = (map_leaves(tree, lambda _: next(rounded)) for tree in (args, kwargs))
        bench_fn, bench_args, bench_kwargs = self.bench_call(case.api, fn, bench_args, bench_kwargs)
        args, kwargs = map_typed(args, self.typed), map_typed(kwargs, self.typed)
        takes_grad = case.takes_grad()
        replay = self.replay(case)
        try:
            with replay():
                tested, skip, grads = self.execute(fn, args, kwargs, inputs.grads, takes_grad)
        except SkipApi:
            raise
        except self.run_errors as exc:
            raise SkipApi(f"the tested run failed on {self.options.device}: {type(exc).__name__}: "
                          f"{first_line(exc)}") from None
        with replay():
            bench, bench_skip, note = self.benchmark(bench_fn, bench_args, bench_kwargs, grads, takes_grad)
        spread = None
        if needs_spread(tested):
            dtypes = [out.dtype if out is not None else "" for out in tested.forward]
            moved_args, moved_kwargs, moved_grads = dithered(bench_args, bench_kwargs, grads, dtypes, case.name)
            with replay():
                spread, _, _ = self.benchmark(bench_fn, moved_args, moved_kwargs, moved_grads, takes_grad)
        kept = tuple((a.name, a.data, a.dtype) for a in used) if self.options.keep_inputs else ()
        return Run(tested, bench, skip or bench_skip, note, kept, spread)

    def bench_call(self, api: str, fn: Callable, args: list, kwargs: dict) -> tuple[Callable, list, dict]:
        """The benchmark's callable and arguments: the tested one's, unless the benchmark is another
        framework's."""
        return fn, args, kwargs

    def replay(self, case: ApiCase) -> Callable[[], AbstractContextManager]:
        """What each run of ``case`` runs inside: for a random op (:attr:`ApiCase.random`), a context that
        starts the generator from one state, the same for the tested run and the benchmark, so both draw the
        same mask (the dump holds no generator state to replay); a backend that cannot do that raises
        :class:`SkipApi` saying so. Other ops: a context that does nothing."""
        if case.random:
            raise SkipApi(f"random op: the {self.label} backend cannot give the tested run and the benchmark "
                          f"the same random draws (the dump records no generator state)")
        return nullcontext

    def tensor(self, value: Any) -> Any:
        raise NotImplementedError

    def numpy(self, tensor: Any) -> np.ndarray:
        raise NotImplementedError

    def typed(self, value: Any) -> Any:
        raise NotImplementedError

    def execute(self, fn: Callable, args: list, kwargs: dict, grads: tuple,
                takes_grad: list[bool]) -> tuple[Outcome, str, tuple]:
        raise NotImplementedError


def backward_skip(outputs: int, grads: int) -> str:
    """Why no backward can be run when the API returns another number of outputs than the dump recorded."""
    return f"the API returned {outputs} outputs where the dump has {grads}" if outputs != grads else ""


def operator_table(framework: str, registry: Any = None) -> Callable[[str], Any]:
    """The operator table of ``framework``'s collector (:attr:`probe_core.specs.CollectorSpec.operators`):
    recorded API names to the callables the collector records. The pre-check calls nothing else."""
    from probe_core.api import PluginError
    from probe_core.api import current_registry

    try:
        spec = (registry or current_registry()).collector_for(framework)
    except PluginError as exc:
        raise AccCheckError(*exc.messages) from None
    if spec.operators is None:
        raise AccCheckError(f"the {framework} collector ({spec.plugin or spec.name}) has no operator table "
                            f"(CollectorSpec.operators); the pre-check re-runs only the operators a collector names")
    return spec.operators()


def resolve(api: str, operators: Callable[[str], Any], framework: str) -> Callable:
    """The callable of a recorded API name; :class:`SkipApi` (a skipped row with the reason) for a name
    that is not one of the framework's operators: ``Torch.os.system``, ``Torch.load``, an unknown API."""
    fn = operators(api)
    if fn is None:
        raise SkipApi(f"refused: {api} is not a {framework} operator the collector records (the pre-check runs "
                      f"only the framework's operators, never other callables a dump names)")
    return fn


def returned(result: Any) -> Any:
    """``result``, unless it is ``NotImplemented`` (an operator dunder given an argument it does not take:
    nothing was computed, on either side), which is a :class:`SkipApi`, never two equal outputs."""
    if result is NotImplemented:
        raise SkipApi("the API returned NotImplemented for the recorded arguments: nothing was computed")
    return result


def load_backend(framework: str, options: Options, registry: Any = None) -> Backend:
    """The backend registered for dumps of ``framework`` (``probe_acc_backends``), built on ``options``
    with the collectors' operator tables."""
    from probe_core.api import current_registry

    registry = registry or current_registry()
    specs = [spec for spec in registry.family("acc_backends").values() if spec.framework == framework]
    if not specs:
        have = sorted({spec.framework for spec in registry.family("acc_backends").values()}) or ["none"]
        raise AccCheckError(f'dump.json: "framework": {framework!r} is pre-checked by no installed backend '
                            f"(backends for: {', '.join(have)}); install the plugin that brings one")
    return specs[0].load()(options, lambda name: operator_table(name, registry))

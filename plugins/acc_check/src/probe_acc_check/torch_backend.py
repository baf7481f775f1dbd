"""The PyTorch backend: recorded names back to callables, the tested run and the float64 CPU benchmark.

Names become callables only through the torch collector's operator table
(:func:`probe_acc_check.backend.operator_table`): ``Functional.x`` is
``torch.nn.functional.x``, ``Torch.x`` is ``torch.x`` (``Torch.linalg.norm``
too), ``Tensor.x`` is the method (dunders included) called on the first
argument; anything else a dump names is refused. The benchmark
is also what MindSpore dumps are judged against (:mod:`probe_acc_check.ms_backend`),
so :func:`benchmark` takes framework-neutral arguments.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from probe_acc_check.backend import FrameworkBackend, Options, Outcome, Output, backward_skip, returned
from probe_acc_check.cases import ApiCase, Typed, flat, map_leaves, map_typed, tensor_leaves
from probe_acc_check.dtypes import canonical, is_float
from probe_acc_check.errors import AccCheckError, SkipApi, first_line
from probe_acc_check.inputs import Array

try:
    import torch
except ImportError:  # pragma: no cover - depends on the installation
    torch = None

_NO_DOUBLE = ("not implemented for 'Double'", "Double is not supported", "not supported for Double")


def torch_dtype(name: str) -> Any:
    dtype = getattr(torch, canonical(name), None)
    if not isinstance(dtype, torch.dtype):
        raise SkipApi(f"dtype {name!r} has no PyTorch equivalent")
    return dtype


def _plain(value: Any) -> Any:
    """A non-tensor output as a comparable Python value."""
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    return value


def to_output(value: Any) -> Output | None:
    if value is None:
        return None
    if not isinstance(value, torch.Tensor):
        return Output(_plain(value), type(value).__name__, is_tensor=False, floating=isinstance(value, float))
    value = value.detach()
    if value.is_complex():
        raise SkipApi("complex outputs are not pre-checked")
    if value.is_floating_point():
        return Output(value.to("cpu", torch.float64).numpy(), str(value.dtype))
    return Output(value.cpu().numpy(), str(value.dtype), floating=False)


def execute(fn: Callable, args: list, kwargs: dict, grads: tuple, takes_grad: list[bool]) -> tuple[Outcome, str, tuple]:
    """Run ``fn`` forward, then backward with ``grads`` (one per flattened output, ``None`` to leave one out).

    ``fn`` is given copies of the tensor arguments, so that an op writing into its input (``relu(inplace=True)``,
    ``add_``, BatchNorm's running statistics) leaves them alone and can be differentiated; the gradients are
    those of the floating arguments ``takes_grad`` marks, one backward output per floating argument (``None``
    for the others). Returns the outcome, why the backward was not run (``""`` when it was or when there is
    nothing to differentiate) and the gradients as given to the outputs (numpy, after rounding to each
    output's dtype: what the benchmark must be given too).
    """
    leaves = list(tensor_leaves([args, kwargs]))
    floating = [t for t in leaves if isinstance(t, torch.Tensor) and t.is_floating_point()]
    wanted = [t for t, grad in zip(leaves, takes_grad) if grad and isinstance(t, torch.Tensor) and t.is_floating_point()]
    for tensor in wanted:
        tensor.requires_grad_(True)
    with torch.enable_grad():
        copies = {id(t): t.clone() for t in leaves if isinstance(t, torch.Tensor)}
        copy = lambda t: copies.get(id(t), t)  # noqa: E731
        result = returned(fn(*map_leaves(args, copy), **map_leaves(kwargs, copy)))
    outs = list(flat(result))
    forward = [to_output(out) for out in outs]
    pairs = [(out, grad) for out, grad in zip(outs, grads)
             if isinstance(out, torch.Tensor) and out.requires_grad and grad is not None]
    if not wanted or not pairs:
        return Outcome(forward), "", grads
    if backward_skip(len(outs), len(grads)):
        return Outcome(forward), backward_skip(len(outs), len(grads)), grads
    if any(tuple(out.shape) != grad.shape for out, grad in pairs):
        return Outcome(forward), "an output's shape differs from the dump's; no gradient to give it", grads
    given = [torch.from_numpy(grad).to(out.device, out.dtype) for out, grad in pairs]
    got = dict(zip(map(id, wanted), torch.autograd.grad([out for out, _ in pairs], wanted, given, allow_unused=True)))
    rounded = iter(g.to("cpu", torch.float64).numpy() for g in given)
    used = tuple(next(rounded) if isinstance(out, torch.Tensor) and out.requires_grad and grad is not None else grad
                 for out, grad in zip(outs, grads))
    return Outcome(forward, [to_output(got.get(id(t))) for t in floating]), "", used


def _bench_value(value: Any, float_dtype: Any) -> Any:
    """A framework-neutral argument as a benchmark argument: floats in ``float_dtype``, on the CPU."""
    if isinstance(value, Array):
        return torch.as_tensor(value.data).to(float_dtype if is_float(value.dtype) else torch_dtype(value.dtype))
    return value


def _bench_typed(value: Typed, float_dtype: Any) -> Any:
    if value.kind == "device":
        return torch.device("cpu")
    dtype = torch_dtype(str(value.value))
    return float_dtype if dtype.is_floating_point else dtype


def benchmark(fn: Callable, args: list, kwargs: dict, grads: tuple, takes_grad: list[bool]) -> tuple[Outcome, str, str]:
    """The CPU benchmark: floats in float64 (float32 where the API has no float64 kernel).

    ``args``/``kwargs`` hold :class:`~probe_acc_check.inputs.Array` leaves with
    the values the tested run used. Returns ``(outcome, backward_skip, note)``.
    """
    for float_dtype in (torch.float64, torch.float32):
        bench_args, bench_kwargs = (map_typed(map_leaves(tree, lambda a, d=float_dtype: _bench_value(a, d)),
                                                lambda t, d=float_dtype: _bench_typed(t, d))
                                    for tree in (args, kwargs))
        try:
            outcome, skip, _ = execute(fn, bench_args, bench_kwargs, grads, takes_grad)
        except (RuntimeError, NotImplementedError) as exc:
            if float_dtype is torch.float64 and any(text in str(exc) for text in _NO_DOUBLE):
                continue
            raise SkipApi(f"the benchmark run failed: {type(exc).__name__}: {first_line(exc)}") from None
        return outcome, skip, "" if float_dtype is torch.float64 else "benchmark in float32: no float64 kernel"
    raise AssertionError("unreachable")


class TorchBackend(FrameworkBackend):
    """Runs PyTorch dumps: tested on ``options.device``, benchmark on the CPU in float64."""

    label = "PyTorch"

    def __init__(self, options: Options, operators: Callable[[str], Callable[[str], Any]]) -> None:
        if torch is None:
            raise AccCheckError("this dump is a PyTorch dump: install torch to pre-check it (pip install torch)")
        self.options, self.operators = options, operators("pytorch")
        if options.device.startswith("npu"):
            try:
                import torch_npu  # noqa: F401
            except ImportError:
                raise AccCheckError(f"--device {options.device}: torch_npu is not installed; use --device cpu "
                                    f"or install torch_npu") from None
        try:
            self.device = torch.device(options.device)
            torch.empty(1, device=self.device)
        except (RuntimeError, AssertionError) as exc:
            raise AccCheckError(f"--device {options.device}: {first_line(exc)}; use --device cpu") from None
        self.override = torch_dtype(options.dtype) if options.dtype else None

    benchmark = staticmethod(benchmark)
    execute = staticmethod(execute)

    def replay(self, case: ApiCase) -> Callable[[], AbstractContextManager]:
        """A random op on the CPU: each run starts the CPU generator from the same seed (the API's name), so
        the float32 run and the float64 benchmark draw the same mask. Another device's generator draws other
        numbers than the CPU's: skipped, saying so."""
        if not case.random:
            return nullcontext
        if self.device.type != "cpu":
            raise SkipApi(f"random op: the dump records no generator state, and {self.device.type}'s generator "
                          f"cannot be replayed by the CPU benchmark; pre-check it with --device cpu")
        seed = zlib.crc32(case.name.encode())

        @contextmanager
        def seeded() -> Iterator[None]:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                yield

        return seeded

    def tensor(self, value: Array) -> Any:
        dtype = torch_dtype(value.dtype)
        if self.override is not None and dtype.is_floating_point:
            dtype = self.override
        return torch.as_tensor(value.data).to(self.device, dtype)

    def numpy(self, tensor: Any) -> Any:
        return tensor.to("cpu", torch.float64 if tensor.is_floating_point() else tensor.dtype).numpy().copy()

    def typed(self, value: Typed) -> Any:
        return self.device if value.kind == "device" else torch_dtype(str(value.value))

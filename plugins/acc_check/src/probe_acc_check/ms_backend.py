"""The MindSpore backend: the tested run in MindSpore PyNative, the benchmark its PyTorch twin in float64.

``Mint.x`` is ``mindspore.mint.x``, ``MintFunctional.x`` is
``mindspore.mint.nn.functional.x``, ``Functional.x`` is ``mindspore.ops.x``
and ``Tensor.x`` the method, each only as the MindSpore collector's operator
table names it (anything else a dump names is refused). The PyTorch twin's name comes from the project's
MindSpore→PyTorch map (:func:`probe_compare.mapping.builtin_map`), the
argument conventions that differ are adapted per API (:data:`ADAPTERS`), and
the benchmark runs through :func:`probe_acc_check.torch_backend.benchmark`.
Gradients come from :func:`mindspore.vjp` with the same output gradients the
benchmark is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from probe_acc_check.backend import FrameworkBackend, Options, Outcome, Output, backward_skip, resolve, returned
from probe_acc_check.cases import Typed, flat, map_leaves, tensor_leaves
from probe_acc_check.dtypes import canonical, is_float, is_int
from probe_acc_check.errors import AccCheckError, SkipApi
from probe_acc_check.inputs import Array

_DEVICES = {"cpu": "CPU", "npu": "Ascend", "ascend": "Ascend", "cuda": "GPU", "gpu": "GPU"}
_RENAMED = {"axis": "dim", "keep_dims": "keepdim", "keepdims": "keepdim"}


def _transpose(args: list, kwargs: dict) -> tuple[str, list, dict]:
    """MindSpore's ``Tensor.transpose(*axes)`` is a permutation: PyTorch's ``permute``."""
    axes = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
    return "Tensor.permute", [args[0], axes or list(reversed(range(len(args[0].data.shape))))], kwargs


def _cross_entropy(args: list, kwargs: dict) -> tuple[str, list, dict]:
    """``ops.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)``: PyTorch has
    ``size_average`` third, so everything after the target goes by keyword; class indices must be int64."""
    names = ("weight", "ignore_index", "reduction", "label_smoothing")
    target = args[1]
    if isinstance(target, Array) and is_int(target.dtype):
        target = replace(target, data=target.data.astype(np.int64), dtype="int64")
    return "Functional.cross_entropy", [args[0], target], {**dict(zip(names, args[2:])), **kwargs}


#: MindSpore APIs whose PyTorch twin takes its arguments differently: ``(args, kwargs) -> (torch api, args, kwargs)``.
ADAPTERS: dict[str, Callable[[list, dict], tuple[str, list, dict]]] = {
    "Tensor.transpose": _transpose,
    "Functional.cross_entropy": _cross_entropy,
    "MintFunctional.cross_entropy": _cross_entropy,
    "Functional.shape": lambda args, kwargs: ("Tensor.size", args, kwargs),
}


def torch_twin(api: str, names: Any, args: list, kwargs: dict) -> tuple[str, list, dict]:
    """The PyTorch API and arguments that compute what ``api`` computed."""
    if api in ADAPTERS:
        return ADAPTERS[api](args, kwargs)
    return names.api_base(api), args, {_RENAMED.get(key, key): value for key, value in kwargs.items()}


class MindSporeBackend(FrameworkBackend):
    """Runs MindSpore dumps: tested in PyNative on ``options.device``, benchmark in PyTorch on the CPU."""

    label = "MindSpore"
    run_errors = (Exception,)  # MindSpore raises TypeError/RuntimeError/ValueError for unsupported kernels

    def __init__(self, options: Options, operators: Callable[[str], Callable[[str], Any]]) -> None:
        try:
            import mindspore
        except ImportError:
            raise AccCheckError("this dump is a MindSpore dump: install mindspore to pre-check it") from None
        from probe_compare.api import builtin_map

        from probe_acc_check import torch_backend

        if torch_backend.torch is None:
            raise AccCheckError("MindSpore APIs are benchmarked against PyTorch on the CPU: install torch")
        self.ms, self.benchmark, self.options = mindspore, torch_backend.benchmark, options
        self.operators, self.torch_operators = operators("mindspore"), operators("pytorch")
        #: twins that are no recorded operator (metadata reads), named here, never by a dump
        self.fixed_twins = {"Tensor.size": torch_backend.torch.Tensor.size}
        self.names = builtin_map("mindspore", "pytorch")
        kind, _, index = options.device.partition(":")
        if kind not in _DEVICES:
            raise AccCheckError(f"--device {options.device}: MindSpore runs on cpu, npu:N or cuda:N")
        try:
            mindspore.set_device(_DEVICES[kind], int(index or 0))
        except (RuntimeError, ValueError) as exc:
            if mindspore.get_context("device_target") != _DEVICES[kind]:
                raise AccCheckError(f"--device {options.device}: {exc}") from None
        mindspore.runtime.launch_blocking()
        self.override = self.ms_dtype(options.dtype) if options.dtype else None

    def ms_dtype(self, name: str) -> Any:
        dtype = getattr(self.ms, canonical(name), None)
        if not isinstance(dtype, type(self.ms.float32).__mro__[1]):  # mindspore's Number dtypes
            raise SkipApi(f"dtype {name!r} has no MindSpore equivalent")
        return dtype

    # -- values ----------------------------------------------------------------

    def _floating(self, tensor: Any) -> bool:
        return tensor.dtype in (self.ms.float16, self.ms.bfloat16, self.ms.float32, self.ms.float64)

    def numpy(self, tensor: Any) -> np.ndarray:
        if self._floating(tensor):
            wide = self.ms.float64 if tensor.dtype == self.ms.float64 else self.ms.float32
            return tensor.astype(wide).asnumpy().astype(np.float64)
        return np.array(tensor.asnumpy())

    def tensor(self, value: Array) -> Any:
        dtype = self.ms_dtype(value.dtype)
        if self.override is not None and is_float(value.dtype):
            dtype = self.override
        if is_float(value.dtype) and dtype != self.ms.float64:  # cast through float32, as PyTorch does
            return self.ms.Tensor(value.data.astype(np.float32)).astype(dtype)
        return self.ms.Tensor(value.data).astype(dtype)

    def _output(self, value: Any) -> Output | None:
        if value is None:
            return None
        if not isinstance(value, self.ms.Tensor):
            return Output(value, type(value).__name__, is_tensor=False, floating=isinstance(value, float))
        return Output(self.numpy(value), str(value.dtype), floating=self._floating(value))

    # -- runs ------------------------------------------------------------------

    def typed(self, value: Typed) -> Any:
        return self.ms_dtype(str(value.value)) if value.kind == "dtype" else value.value

    def execute(self, fn: Callable, args: list, kwargs: dict, grads: tuple, takes_grad: list[bool]) -> tuple[
            Outcome, str, tuple]:
        ms = self.ms
        leaves = list(tensor_leaves([args, kwargs]))
        floating = [t for t in leaves if isinstance(t, ms.Tensor) and self._floating(t)]
        wanted = [t for t, grad in zip(leaves, takes_grad) if grad and isinstance(t, ms.Tensor) and self._floating(t)]

        def call(*diff: Any) -> Any:
            subs = {id(t): d for t, d in zip(wanted, diff)}
            return returned(fn(*map_leaves(args, lambda t: subs.get(id(t), t)),
                               **map_leaves(kwargs, lambda t: subs.get(id(t), t))))

        if not wanted:
            return Outcome([self._output(out) for out in flat(call())]), "", grads
        result, vjp = ms.vjp(call, *wanted)
        outs = list(flat(result))
        forward = [self._output(out) for out in outs]
        if not all(isinstance(out, ms.Tensor) for out in outs) or isinstance(result, list):
            return Outcome(forward), "", grads
        if backward_skip(len(outs), len(grads)):
            return Outcome(forward), backward_skip(len(outs), len(grads)), grads
        if not any(g is not None and self._floating(o) for o, g in zip(outs, grads)):
            return Outcome(forward), "", grads
        given = [ms.Tensor(g.astype(np.float32)).astype(o.dtype) if g is not None and self._floating(o)
                 else ms.ops.zeros_like(o) for o, g in zip(outs, grads)]
        got = vjp(tuple(given) if isinstance(result, tuple) else given[0])
        got = dict(zip(map(id, wanted), got if isinstance(got, tuple) else (got,)))
        used = tuple(self.numpy(s) if g is not None and self._floating(o) else g
                     for o, g, s in zip(outs, grads, given))
        return Outcome(forward, [self._output(got.get(id(t))) for t in floating]), "", used

    def bench_call(self, api: str, fn: Callable, args: list, kwargs: dict) -> tuple[Callable, list, dict]:
        """The PyTorch twin of a MindSpore API and its arguments (the benchmark is PyTorch's)."""
        torch_api, args, kwargs = torch_twin(api, self.names, args, kwargs)
        return self.fixed_twins.get(torch_api) or resolve(torch_api, self.torch_operators, "PyTorch"), args, kwargs

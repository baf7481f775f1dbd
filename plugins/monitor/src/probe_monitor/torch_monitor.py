"""The monitor on PyTorch: hooks feeding the framework-neutral :class:`~probe_monitor.engine.MonitorEngine`.

* unreduced weight gradients: ``register_post_accumulate_grad_hook`` per parameter — it runs right
  after the local gradient is accumulated, before a data-parallel reducer's hook sees it; the last
  call of a step (all micro-steps accumulated) is kept;
* ``param_origin``, reduced gradients (``main_grad`` when ``params_have_main_grad`` and present) and the
  optimizer's moments (any ``exp_avg``/``exp_avg_sq``/``square_avg`` in ``optimizer.state``, so Adam, AdamW,
  NAdam, RAdam, Adamax, RMSprop... are found by themselves; as msprobe, the moments the step starts from):
  the optimizer's step pre-hook; with ``step(closure)`` the closure is wrapped, so the gradients are
  read after it ran;
* ``param_updated``: the step post-hook, which then ends the step;
* activations: forward hooks and full backward hooks on the targeted modules (micro-step = how many
  times the root model ran in this step);
* collectives: ``torch.distributed`` functions wrapped while the monitor lives.
"""

from __future__ import annotations

import array
import functools
import math
import sys
import warnings
from typing import Any

import torch
import torch.distributed as dist

from probe_core.api import KINDS, host_stats, process_rank

from probe_monitor.adapter import ModelMonitor
from probe_monitor.engine import MonitorEngine
from probe_monitor.errors import MonitorError
from probe_monitor.trainer import TrainerMonBase

#: Optimizer state keys read as each moment, first found wins.
MOMENTS = {"exp_avg": ("exp_avg",), "exp_avg_sq": ("exp_avg_sq", "square_avg")}
#: The dtypes whose dense CPU tensors get the fused statistics kernel (one pass for min, max, mean and norm).
FUSED = {getattr(torch, name): kind for name, kind in KINDS.items()}
#: The statistics the fused kernel gives, at their index in its result.
FUSED_OPS = {"max": 0, "min": 1, "mean": 2, "norm": 3}
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "reduce", "all_to_all", "all_to_all_single")


def current_rank() -> int:
    return process_rank("pytorch")[0]


class TorchBackend:
    """Statistics as one float32 vector on the tensor's device; one transfer per device per step.

    A dense float tensor on the CPU has its min, max, mean and norm from one pass over its memory (the fused
    kernel, :func:`probe_core.api.host_stats`, summing in float64) instead of three of torch's reductions: a
    list of host floats, which :meth:`fetch` rounds to float32 with the step's other lists at once. The kernel
    declines NaN, infinity and subnormal norms, which keep torch's reductions and their semantics.

    A DTensor (FSDP2's parameters, gradients and optimizer moments; tensor parallelism's) gives the
    statistics of this rank's shard, or with ``full_dtensor`` (``"dtensor": "full"``) those of the whole
    tensor (its global norm across shards), gathered by one all-gather on every rank.
    """

    framework = "pytorch"
    extra: dict[str, Any] = {}  # statistics plugins add: name -> fn(tensor, eps) (set by the engine)
    full_dtensor = False  # set by the engine from the config's "dtensor"

    def _values(self, tensor: torch.Tensor) -> torch.Tensor:
        if not _is_dtensor(tensor):
            return tensor.detach()
        with torch.no_grad():
            return tensor.full_tensor() if self.full_dtensor else tensor.to_local()

    def stats(self, tensor: torch.Tensor, ops: tuple[str, ...], eps: float) -> torch.Tensor | list[float]:
        x = self._values(tensor)
        if x.numel() == 0:
            return torch.full((len(ops),), math.nan, dtype=torch.float32, device=x.device)
        values: dict[str, Any] = _fused_values(x, ops)
        if len(values) == len(ops):
            return [values[op] for op in ops]
        if not x.is_floating_point():
            x = x.float()
        if any(op in ("min", "max") and op not in values for op in ops):
            values["min"], values["max"] = torch.aminmax(x)
        for op in ops:
            if op in values:
                continue
            if op == "mean":
                values[op] = x.mean(dtype=torch.float32)
            elif op == "norm":
                values[op] = torch.linalg.vector_norm(x, dtype=torch.float32)
            elif op == "zeros":
                values[op] = (x.abs() < eps).sum() / x.numel()
            elif op == "nans":
                values[op] = torch.isnan(x).sum()
            else:
                values[op] = self.extra[op](x, eps)
        return torch.stack([torch.as_tensor(values[op], dtype=torch.float32) for op in ops])

    def fetch(self, vectors: list[torch.Tensor | list[float]]) -> list[list[float]]:
        by_device: dict[torch.device, list[int]] = {}
        host: list[int] = []
        for i, vector in enumerate(vectors):
            if isinstance(vector, list):
                host.append(i)
            else:
                by_device.setdefault(vector.device, []).append(i)
        out: list[list[float]] = [[] for _ in vectors]
        rounded = array.array("f", [value for i in host for value in vectors[i]]).tolist()  # float32, as torch's
        start = 0
        for i in host:
            out[i], start = rounded[start:start + len(vectors[i])], start + len(vectors[i])
        for indices in by_device.values():
            for i, values in zip(indices, torch.stack([vectors[i] for i in indices]).cpu().tolist()):
                out[i] = values
        return out

    def describe(self, tensor: torch.Tensor) -> tuple[tuple[int, ...], str]:
        shape = tensor.to_local().shape if _is_dtensor(tensor) and not self.full_dtensor else tensor.shape
        return tuple(shape), str(tensor.dtype)


def _fused_values(x: torch.Tensor, ops: tuple[str, ...]) -> dict[str, float]:
    """The ops among min, max, mean and norm from one pass of the fused kernel over a dense float CPU tensor;
    {} for any other tensor, or when the kernel declines (not built, NaN or infinity, a subnormal norm)."""
    kind = FUSED.get(x.dtype)
    if (kind is None or not x.is_cpu or x.layout != torch.strided or type(x) is not torch.Tensor
            or not x.is_contiguous() or x.is_neg() or not FUSED_OPS.keys() & set(ops)):
        return {}
    values = host_stats(x.data_ptr(), x.numel(), kind)
    return {} if values is None else {op: values[FUSED_OPS[op]] for op in ops if op in FUSED_OPS}


def _is_dtensor(tensor: Any) -> bool:
    """Whether ``tensor`` is a DTensor (torch.distributed.tensor not imported: there is none)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


class TorchMonitor(ModelMonitor):
    """The PyTorch calls of :class:`~probe_monitor.adapter.ModelMonitor`, the optimizer hooks and collectives."""

    tensor_type = torch.Tensor

    def __init__(self, engine: MonitorEngine, *, params_have_main_grad: bool = True) -> None:
        super().__init__(engine, params_have_main_grad=params_have_main_grad)
        self._patched: list[tuple[Any, str, Any]] = []
        self._calls: dict[str, int] = {}
        if self.config.cc_distribution and dist.is_available():
            self._wrap_collectives()

    def named_parameters(self, model: torch.nn.Module) -> Any:
        return model.named_parameters()

    def named_modules(self, model: torch.nn.Module) -> Any:
        return model.named_modules()

    def local_parameter_names(self, module: torch.nn.Module) -> list[str]:
        return [name for name, _ in module.named_parameters(recurse=False)]

    def hook_grad(self, param: torch.Tensor, name: str, vpp: int) -> Any:
        def hook(param: torch.Tensor) -> None:
            if self.engine.active:
                grad = param.grad if param.grad is not None else getattr(param, "main_grad", None)
                self.engine.record("grad_unreduced", name, grad, vpp_stage=vpp)

        return param.register_post_accumulate_grad_hook(hook)

    def hook_forward(self, module: torch.nn.Module, hook: Any, *, pre: bool = False) -> Any:
        if pre:
            return module.register_forward_pre_hook(hook)
        return module.register_forward_hook(hook, always_call=True)

    def hook_backward(self, module: torch.nn.Module, hook: Any) -> Any:
        warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed with "
                                "respect to module outputs")  # inputs needing no grad: their rows read nan
        return module.register_full_backward_hook(hook)

    # -- optimizer ----------------------------------------------------------------------------------

    def bind_optimizer(self, optimizer: Any, *, hooks: bool = True) -> None:
        """Watch ``optimizer`` (unwrapping DeepSpeed/accelerate-style wrappers); its step ends a training step."""
        while not hasattr(optimizer, "param_groups") and hasattr(optimizer, "optimizer"):
            optimizer = optimizer.optimizer
        if not hasattr(optimizer, "param_groups") or not hasattr(optimizer, "state"):
            raise MonitorError(f"set_monitor: {type(optimizer).__name__} is not a torch optimizer (no param_groups/"
                               "state); pass the torch.optim.Optimizer whose step() ends a training step")
        self.optimizer = optimizer
        if hooks:
            self._handles.append(optimizer.register_step_pre_hook(self.before_step))
            self._handles.append(optimizer.register_step_post_hook(self.after_step))

    def _params(self) -> list[tuple[torch.Tensor, Any, int]]:
        """The optimizer's (targeted) parameters with their names; a parameter of a model not seen yet
        (``step(closure)`` before the first forward under ``probe run``) is named when the step ends."""
        out = []
        for index, param in enumerate(p for group in self.optimizer.param_groups for p in group["params"]):
            name, vpp = self.names.get(id(param), (None, 0))
            if name is None:
                out.append((param, functools.partial(self._late_name, param, index), vpp))
            elif self.config.targeted(name):
                out.append((param, name, vpp))
        return out

    def _late_name(self, param: torch.Tensor, index: int) -> str:
        return self.names.get(id(param), (f"param{index}", 0))[0]

    def before_step(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        engine, config = self.engine, self.config
        if not engine.active:
            return None
        if config.param_distribution or config.mv_distribution:
            for param, name, vpp in self._params():
                if config.param_distribution:
                    engine.record("param_origin", name, param, vpp_stage=vpp)
                self._record_moments(param, name, vpp)
        if not config.wg_distribution:
            return None
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)  # args[0] is the optimizer
        if closure is None:
            self._record_reduced()
            return None

        def closure_then_record() -> Any:
            loss = closure()
            self._record_reduced()
            return loss

        if "closure" in kwargs:
            return args, {**kwargs, "closure": closure_then_record}
        return (args[0], closure_then_record, *args[2:]), kwargs

    def _record_moments(self, param: torch.Tensor, name: str, vpp: int) -> None:
        """The moments as the step finds them (msprobe's convention: step N shows the moments step N-1 left; none
        before the optimizer's first step creates them)."""
        state = self.optimizer.state.get(param, {}) if self.config.mv_distribution else {}
        for tag, keys in MOMENTS.items():
            key = next((k for k in keys if isinstance(state.get(k), torch.Tensor)), None)
            if key is not None:
                self.engine.record(tag, name, state[key], vpp_stage=vpp)

    def _record_reduced(self) -> None:
        for param, name, vpp in self._params():
            grad = getattr(param, "main_grad", None) if self.main_grad else None
            grad = param.grad if grad is None else grad
            if grad is not None:
                self.engine.record("grad_reduced", name, grad, vpp_stage=vpp)

    def after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        engine, config = self.engine, self.config
        if engine.active and config.param_distribution:
            for param, name, vpp in self._params():
                engine.record("param_updated", name, param, vpp_stage=vpp)
        self.end_step()
        self._calls.clear()

    # -- collectives --------------------------------------------------------------------------------

    def _wrap_collectives(self) -> None:
        for op in COLLECTIVES:
            original = getattr(dist, op, None)
            if original is not None:
                wrapper = self._collective(op, original)
                for owner in (dist, dist.distributed_c10d):
                    if getattr(owner, op, None) is original:
                        self._patched.append((owner, op, original))
                        setattr(owner, op, wrapper)

    def _collective(self, op: str, original: Any) -> Any:
        engine = self.engine

        @functools.wraps(original)
        def collective(*args: Any, **kwargs: Any) -> Any:
            if not engine.active:
                return original(*args, **kwargs)
            index = self._calls[op] = self._calls.get(op, -1) + 1
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            for i, tensor in enumerate(tensors):
                engine.record("comm", f"{op}.{index}.input.{i}", tensor, micro_step=engine.micro_step)
            result = original(*args, **kwargs)
            if not kwargs.get("async_op"):
                for i, tensor in enumerate(tensors):
                    engine.record("comm", f"{op}.{index}.output.{i}", tensor, micro_step=engine.micro_step)
            return result

        return collective

    def close(self) -> None:
        for owner, op, original in self._patched:
            setattr(owner, op, original)
        self._patched.clear()
        super().close()


class TrainerMon(TrainerMonBase):
    """msprobe's ``TrainerMon`` for PyTorch (see :class:`~probe_monitor.trainer.TrainerMonBase`)."""

    backend, monitor_class, rank = TorchBackend, TorchMonitor, staticmethod(current_rank)

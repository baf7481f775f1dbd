"""Checker ``random``: who draws random numbers, how often, from where.

``ConfigChecker.apply_patches(fmk)`` calls :func:`prepare`, which wraps the
RNG functions of python ``random``, ``numpy.random`` and (for ``pytorch``)
torch. Each call is counted under ``api @ location``, the location being the
first three frames outside the RNG libraries and probe (file name, line,
function), so stacks compare across machines with different install paths.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections import Counter
from typing import Any

from probe_core.api import CheckContext, CheckRow

from probe_config_check.common import diff_rows

PYTHON_RANDOM = ("random", "uniform", "randint", "randrange", "choice", "choices", "shuffle", "sample", "gauss",
                 "normalvariate", "getrandbits", "seed", "triangular", "betavariate", "expovariate")
NUMPY_RANDOM = ("rand", "randn", "randint", "random", "random_sample", "shuffle", "permutation", "choice", "seed",
                "normal", "uniform", "standard_normal", "binomial", "poisson", "beta", "gamma")
TORCH_FUNCTIONS = ("manual_seed", "seed", "rand", "randn", "randint", "randperm", "normal", "bernoulli",
                   "multinomial", "rand_like", "randn_like", "randint_like", "poisson")
TORCH_TENSOR_METHODS = ("uniform_", "normal_", "random_", "bernoulli_", "exponential_", "geometric_", "cauchy_",
                        "log_normal_")
STACK_DEPTH = 3

_calls: Counter[str] = Counter()
_lock = threading.Lock()
_busy = threading.local()
_patched: set[str] = set()
_skip_dirs: list[str] = []


def _library_dirs() -> list[str]:
    dirs = [os.path.dirname(__file__), os.path.dirname(functools.__file__)]
    for name in ("torch", "numpy", "mindspore"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            dirs.append(os.path.dirname(module.__file__))
    return [d + os.sep for d in dirs]


def _location() -> str:
    frames, frame = [], sys._getframe(2)
    while frame is not None and len(frames) < STACK_DEPTH:
        file = frame.f_code.co_filename
        if not any(file.startswith(d) for d in _skip_dirs) and not file.startswith("<frozen"):
            frames.append(f"{os.path.basename(file)}:{frame.f_lineno}({frame.f_code.co_name})")
        frame = frame.f_back
    return " < ".join(frames) or "?"


def _wrap(api: str, function: Any) -> Any:
    @functools.wraps(function)
    def counted(*args: Any, **kwargs: Any) -> Any:
        if not getattr(_busy, "on", False):
            _busy.on = True
            try:
                key = f"{api} @ {_location()}"
                with _lock:
                    _calls[key] += 1
            finally:
                _busy.on = False
        return function(*args, **kwargs)

    counted.__probe_rng_original__ = function
    return counted


def _patch(owner: Any, names: tuple[str, ...], prefix: str) -> None:
    for name in names:
        function = getattr(owner, name, None)
        if function is None or hasattr(function, "__probe_rng_original__"):
            continue
        setattr(owner, name, _wrap(f"{prefix}.{name}", function))


def prepare(framework: str | None) -> None:
    """Wrap the RNG functions (once per library); torch only when the framework is pytorch."""
    import random

    if "random" not in _patched:
        _patch(random, PYTHON_RANDOM, "random")
        _patched.add("random")
    if "numpy" not in _patched:
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            _patch(numpy.random, NUMPY_RANDOM, "numpy.random")
            _patched.add("numpy")
    if framework == "pytorch" and "torch" not in _patched:
        import torch

        _patch(torch, TORCH_FUNCTIONS, "torch")
        _patch(torch.Tensor, TORCH_TENSOR_METHODS, "torch.Tensor")
        _patched.add("torch")
    _skip_dirs[:] = _library_dirs()


class RandomCalls:
    """A live collection: the counters kept since :func:`prepare`."""

    def snapshot(self) -> dict[str, Any]:
        with _lock:
            return {"calls": dict(sorted(_calls.items())), "patched": sorted(_patched)}


def collect(ctx: CheckContext) -> RandomCalls | None:
    return RandomCalls() if _patched else None


def compare(bench: dict[str, Any], target: dict[str, Any]) -> list[CheckRow]:
    rows = diff_rows(bench.get("calls", {}), target.get("calls", {}), lambda a, b: a == b)
    return [CheckRow(r.item, r.bench or 0, r.target or 0, r.passed,
                     r.note.replace("missing", "never called") if r.note else "") for r in rows]

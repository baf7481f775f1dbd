"""The one-pass statistics kernel (probe_core.collect.fused) against float64 references, and both collectors'
use of it: the same four numbers as the frameworks' own reductions, for every float type and layout."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from probe_core.collect import fused

LENGTHS = [*range(1, 40), 63, 64, 65, 255, 256, 257, 511, 1000, 4097, 100_003]
#: The kernel's builds this CPU runs: the portable loops, and the AVX2 ones where the CPU has AVX2 and FMA.
DEFAULT_LOOPS = fused.loops()
LOOPS = sorted({"generic", DEFAULT_LOOPS or "generic"})


@pytest.fixture(autouse=True, params=LOOPS)
def loops(request):
    """Every test runs on each build of the kernel (the default one is put back afterwards)."""
    from probe_core.collect import _fused

    default = _fused.which()
    _fused.use(request.param)
    yield request.param
    _fused.use(default)


def reference(values: np.ndarray) -> tuple[float, float, float, float, float]:
    """(max, min, mean, norm, mean of |x|) in float64."""
    wide = values.astype(np.float64)
    return wide.max(), wide.min(), wide.mean(), math.sqrt(float(np.dot(wide, wide))), float(np.abs(wide).mean())


def check(got, values: np.ndarray) -> None:
    high, low, mean, norm, scale = reference(values)
    if got is None:  # float32 squares in the subnormal range: the framework's reductions take over
        assert 0 < norm < 2.0 ** -47 and values.dtype != np.float64
        return
    assert got[0] == high and got[1] == low  # exact: max and min are values of the data
    assert abs(got[2] - mean) <= 1e-6 * scale + 1e-300
    assert abs(got[3] - norm) <= 1e-6 * norm + 1e-300


def stats_of(array: np.ndarray):
    return fused.host_stats(array.ctypes.data, array.size, fused.KINDS[array.dtype.name])


def test_the_extension_is_built():
    """probe-core builds its C kernel on install (setup.py); a machine without a compiler falls back, which
    this suite would otherwise never notice."""
    assert fused.available(), "probe_core.collect._fused is missing: reinstall probe-core with a C compiler"


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_every_length_and_float_type_matches_float64(dtype):
    rng = np.random.default_rng(7)
    for n in LENGTHS:
        values = (rng.standard_normal(n) * 3 + 0.5).astype(dtype)
        check(stats_of(values), values)
        check(stats_of(-np.abs(values)), -np.abs(values))  # all negative: max below zero


def test_bfloat16_matches_float64():
    for n in LENGTHS:
        t = (torch.randn(n, generator=torch.Generator().manual_seed(n)) * 100).bfloat16()
        got = fused.host_stats(t.data_ptr(), n, fused.KINDS["bfloat16"])
        check(got, t.float().numpy())


def test_every_float16_bit_pattern_converts_exactly():
    """All finite halves, subnormals and both zeros included, in runs of every length up to 9 (the tails)."""
    patterns = np.arange(65536, dtype=np.uint16).view(np.float16)
    finite = patterns[np.isfinite(patterns)]
    for width in range(1, 10):
        for start in range(0, finite.size - width, 997):
            run = np.ascontiguousarray(finite[start:start + width])
            check(stats_of(run), run)
    subnormals = np.arange(1, 1024, dtype=np.uint16).view(np.float16)
    assert stats_of(subnormals)[:2] == (float(subnormals.max()), float(subnormals.min()))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_evenly_spaced_rows(dtype):
    """rows × count elements, row_stride bytes apart: the columns between the rows are never read."""
    rng = np.random.default_rng(5)
    for rows, count, gap in [(1, 100, 0), (3, 64, 1), (7, 65, 13), (50, 256, 512)]:
        block = rng.standard_normal((rows, count + gap)).astype(dtype)
        block[:, count:] = 1e4  # outside the rows: would show in max and mean
        got = fused.host_stats(block.ctypes.data, count, fused.KINDS[dtype], rows, block.strides[0])
        check(got, np.ascontiguousarray(block[:, :count]).ravel())


def test_all_zeros_and_tiny_values():
    zeros = np.zeros(300, dtype=np.float32)
    assert stats_of(zeros) == (0.0, 0.0, 0.0, 0.0)
    assert stats_of(np.full(300, 1e-25, dtype=np.float32)) is None  # squares underflow in float32
    check(stats_of(np.full(300, 1e-25, dtype=np.float64)), np.full(300, 1e-25))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_or_infinity_anywhere_leaves_it_to_the_framework(bad):
    for n in (1, 7, 8, 9, 300, 1000):
        for where in {0, n // 2, n - 1}:
            values = np.ones(n, dtype=np.float32)
            values[where] = bad
            assert stats_of(values) is None, (n, where)


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(arrays(np.float32, st.integers(1, 700), elements=st.floats(-2.0**50, 2.0**50, width=32)))
def test_any_finite_float32_data(values):
    check(stats_of(values), values)


@pytest.mark.parametrize("switch, shown", [("0", "False None"), ("generic", "True generic"),
                                           ("1", f"True {DEFAULT_LOOPS}")])
def test_the_switch(switch, shown):
    code = "from probe_core.collect import fused; print(fused.available(), fused.loops())"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PROBE_FUSED_STATS=switch))
    assert run.stdout.strip() == shown


def test_the_avx2_build_runs_where_the_cpu_has_it():
    """x86-64 Linux with AVX2 and FMA (every CI machine here) must not fall back to the portable loops."""
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text().split() if cpuinfo.exists() else []
    if "avx2" in flags and "fma" in flags:
        assert DEFAULT_LOOPS == "avx2"
    else:
        assert LOOPS == ["generic"]


def torch_stats(tensor: torch.Tensor, use_kernel: bool, monkeypatch) -> tuple:
    from probe_torch import ops

    monkeypatch.setattr(fused, "_ENABLED", use_kernel)
    handle = ops._launch_stats(tensor)
    return handle[0], ops.TorchTensorOps().fetch_stats([handle])[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_torch_tensors_get_the_frameworks_numbers_in_one_pass(dtype, monkeypatch):
    """Contiguous, transposed and offset tensors take the kernel; a strided slice keeps torch's reductions;
    both give the same four numbers."""
    base = (torch.randn(64, 192, generator=torch.Generator().manual_seed(3)) * 5).to(dtype)
    cases = {"contiguous": (base, "h"), "transposed": (base.t(), "h"), "offset": (base[5:], "h"),
             "3-d permuted": (base.view(8, 8, 192).permute(2, 0, 1), "h"),
             "chunk of the last dimension": (base.chunk(3, -1)[1], "h"),
             "heads split off a chunk": (base.chunk(3, -1)[2].reshape(8, 8, 64).transpose(0, 1), "h"),
             "strided slice": (base[:, ::2], "n"), "short rows": (base[:, :32], "n"),
             "expanded": (base[0].expand(4, 192), "n")}
    for name, (tensor, path) in cases.items():
        kind, got = torch_stats(tensor, True, monkeypatch)
        assert kind == path, name
        _, expected = torch_stats(tensor, False, monkeypatch)
        assert got[:2] == pytest.approx(expected[:2], rel=0, abs=0), name
        scale = tensor.double().abs().mean().item()
        assert abs(got[2] - expected[2]) <= 1e-5 * scale, name
        assert got[3] == pytest.approx(expected[3], rel=1e-5), name
        assert got[3] == pytest.approx(torch.linalg.vector_norm(tensor.double()).item(), rel=1e-6), name


def test_torch_nan_and_subclasses_keep_torchs_own_semantics(monkeypatch):
    t = torch.tensor([1.0, float("nan"), 3.0])
    kind, got = torch_stats(t, True, monkeypatch)
    assert kind == "n" and all(math.isnan(v) for v in got)
    parameter = torch.nn.Parameter(torch.ones(10))  # detached to a plain tensor: the kernel
    assert torch_stats(parameter, True, monkeypatch) == ("h", (1.0, 1.0, 1.0, math.sqrt(10)))


def test_mindspore_host_stats_take_the_kernel_for_dense_floats(monkeypatch):
    from probe_mindspore import ops

    values = np.random.default_rng(1).standard_normal((33, 17)).astype(np.float32)
    for array in (values, values.T, values[:, ::2]):
        monkeypatch.setattr(fused, "_ENABLED", True)
        got = ops.host_stats(array)
        monkeypatch.setattr(fused, "_ENABLED", False)
        expected = ops.host_stats(array)
        assert got[:2] == expected[:2]
        assert got[2] == pytest.approx(expected[2], abs=1e-7) and got[3] == pytest.approx(expected[3], rel=1e-7)

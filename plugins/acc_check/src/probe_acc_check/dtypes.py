"""Dtype names across frameworks and what the precision standards need to know about each.

Dumps spell dtypes their framework's way (``torch.bfloat16``, ``BFloat16``);
:func:`canonical` turns both into one name (``bfloat16``) that the
framework-neutral parts (input generation, metrics, standards) use.
"""

from __future__ import annotations

from typing import NamedTuple

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "long": "int64", "int": "int32",
            "short": "int16", "bool_": "bool", "complex64": "complex64", "complex128": "complex128"}


def canonical(name: str | None) -> str:
    """``torch.float32`` / ``Float32`` / ``float32`` -> ``float32``; ``""`` for ``None``."""
    if not name:
        return ""
    short = str(name).rsplit(".", 1)[-1].lower()
    return _ALIASES.get(short, short)


def is_float(name: str) -> bool:
    return canonical(name) in FLOATS


def is_int(name: str) -> bool:
    return canonical(name) in INTS


class FloatInfo(NamedTuple):
    """What the standards need of a floating dtype.

    ``mantissa``: explicit mantissa bits; ``min_exp``: the smallest normal
    exponent (ULP of subnormals); ``small``: below this magnitude a value is
    judged by absolute error (msprobe's small-value domain); ``small_atol``:
    the absolute error allowed there; ``rtol``: the relative error the
    absolute-threshold standard allows elsewhere.
    """

    mantissa: int
    min_exp: int
    small: float
    small_atol: float
    rtol: float


FLOAT_INFO = {
    "float16": FloatInfo(10, -14, 1e-3, 1e-5, 1e-3),
    "bfloat16": FloatInfo(7, -126, 1e-3, 1e-5, 4e-3),
    "float32": FloatInfo(23, -126, 1e-6, 1e-9, 1e-6),
    "float64": FloatInfo(52, -1022, 1e-15, 1e-18, 1e-15),
}


def float_info(name: str) -> FloatInfo:
    """The :class:`FloatInfo` of a floating dtype (float32's for anything else)."""
    return FLOAT_INFO.get(canonical(name), FLOAT_INFO["float32"])

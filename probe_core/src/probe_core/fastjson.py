"""msgspec where it gives exactly what the standard library gives, the standard library everywhere else.

The one home of probe's fast JSON paths (decoding dump entries, formatting
floats as text). Each function returns what its :mod:`json`/:func:`repr`
counterpart returns, bit for bit; msgspec only makes it 4-5x faster:

- :func:`decode` is :func:`json.loads`. msgspec parses numbers exactly as
  :mod:`json` does (integers of any size, floats correctly rounded) but
  refuses ``NaN``/``Infinity``, numbers beyond the float range, lone
  surrogates and a UTF-8 BOM: text it refuses is decoded by :mod:`json`,
  which also reports any error.
- :func:`float_texts` is ``[repr(v) for v in values]``. msgspec's shortest
  round-trip digits are ``repr``'s, but it writes ``nan``/``inf`` as ``null``,
  magnitudes below 1e-4 in positional notation and exponents without
  ``+``/leading zero (``1e16``, ``1e-5``): those values, and only those, go
  through ``repr``.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

MISS = object()  # what try_decode returns for text it leaves to json
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def try_decode(text: str | bytes) -> Any:
    """The value of ``text`` when msgspec decodes it (then exactly as :func:`json.loads` would), else
    :data:`MISS`."""
    try:
        return _decode(text)
    except (msgspec.DecodeError, RecursionError):  # NaN/Infinity, 1e400, a lone surrogate, deep, or not JSON
        return MISS


def decode(text: str | bytes) -> Any:
    """:func:`json.loads` of ``text``, faster (the same value, the same errors)."""
    value = try_decode(text)
    return json.loads(text) if value is MISS else value


def float_texts(values: list[float]) -> list[str]:
    """``repr`` of each float in ``values`` (only floats: ints and bools are written otherwise)."""
    tokens = _encode(values)[1:-1].decode().split(",") if values else []
    return [token if "e" not in token and "l" not in token and not token.startswith(("0.0000", "-0.0000"))
            else repr(value) for token, value in zip(tokens, values)]

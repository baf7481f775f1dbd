"""msgspec where it gives exactly what the standard library gives, the standard library everywhere else.

The one home of probe's fast JSON paths (decoding dump entries, writing
graph columns, formatting floats as text). Each function returns what its
:mod:`json`/:func:`repr` counterpart returns, bit for bit; msgspec only
makes it 4-5x faster:

- :func:`decode` is :func:`json.loads`. msgspec parses numbers exactly as
  :mod:`json` does (integers of any size, floats correctly rounded) but
  refuses ``NaN``/``Infinity``, numbers beyond the float range, lone
  surrogates and a UTF-8 BOM: text it refuses is decoded by :mod:`json`,
  which also reports any error.
- :func:`dumps` writes what :func:`json.loads` reads back as the same value.
- :func:`value_text` is ``json.dumps(value, ensure_ascii=False)`` up to spelling (no spaces, ``0.00001`` for
  ``1e-05``): :func:`json.loads` reads either back as the same value. Values msgspec would write
  otherwise (NaN and infinity as ``null``, integers beyond 64 bits, float keys) go through :mod:`json`.
- :func:`float_texts` is ``[repr(v) for v in values]``. msgspec's shortest
  round-trip digits are ``repr``'s, but it writes ``nan``/``inf`` as ``null``,
  magnitudes below 1e-4 in positional notation and exponents without
  ``+``/leading zero (``1e16``, ``1e-5``): the C helper ``probe_core._reprs``
  writes each token again in repr's notation; without it those values go
  through ``repr`` (every value, when they are most of the list).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec

try:
    from probe_core import _reprs
except ImportError:  # built without a C compiler
    _reprs = None

#: the C writer of the graph viewer's input/output columns (``probe_core._reprs.tables_json``: each table's
#: JSON text); ``None`` when probe-core was built without a C compiler
tables_json = _reprs.tables_json if _reprs is not None else None
#: the C joiner of CSV rows from columns of cells (``native_join_rows``: the compare's CSV) and the C
#: flattener of an entry's input/output tables (``native_flatten_entry``: the graph's nodes); ``None`` likewise
native_join_rows = _reprs.join_rows if _reprs is not None else None
native_flatten_entry = _reprs.flatten_entry if _reprs is not None else None

MISS = object()  # what try_decode returns for text it leaves to json
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode
_UNLIKE_REPR = ("e", "l", "0.0000")  # in a token that repr writes otherwise: 1e-5, null, 0.00001


def try_decode(text: str | bytes) -> Any:
    """The value of ``text`` when msgspec decodes it (then exactly as :func:`json.loads` would), else
    :data:`MISS`."""
    try:
        return _decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):  # NaN, 1e400, bad UTF-8, deep, not JSON
        return MISS


def decode(text: str | bytes) -> Any:
    """:func:`json.loads` of ``text``, faster (the same value, the same errors)."""
    value = try_decode(text)
    return json.loads(text) if value is MISS else value


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (strings, ints, lists and dicts of them; no floats: msgspec writes NaN
    as ``null``) that :func:`json.loads` reads back as ``value``; non-ASCII characters as they are."""
    try:
        return _encode(value).decode()
    except UnicodeEncodeError:  # a lone surrogate: json escapes it
        return json.dumps(value, separators=(",", ":"))


def value_text(value: Any) -> str:
    """JSON text of ``value`` (a dump entry: dicts, lists, strings, numbers, None) that :func:`json.loads` reads
    back as ``value``; about 10x faster than :func:`json.dumps`. A value neither can write raises json's
    error (a few that json refuses, as sets and bytes, msgspec writes as lists and base64 text)."""
    try:
        text = _encode(value)
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError):  # json names the problem (or copes)
        return json.dumps(value, ensure_ascii=False)
    if b"null" in text:  # None, or NaN/infinity written as null: json tells them apart
        return json.dumps(value, ensure_ascii=False)
    return text.decode()


def numbers_json(values: list[float]) -> bytes:
    """msgspec's JSON array of ``values`` (floats and ints), the text :mod:`probe_core._reprs` reads numbers
    from; raises TypeError/OverflowError for anything else (ints beyond 64 bits)."""
    return _encode(values)


def float_texts(values: list[float], suffix: str = "", zero: str | None = None) -> list[str]:
    """``repr`` of each number in ``values`` (floats and ints, no bools), for a list at once; with ``suffix``
    after each (``12.5%``), and ``zero`` instead for a value equal to zero when given."""
    if not values:
        return []
    if _reprs is not None:  # msgspec's digits in repr's notation, token by token in C
        try:
            return _reprs.reprs(_encode(values), values, suffix, zero)
        except (TypeError, ValueError, OverflowError):  # not numbers only, or ints beyond 64 bits
            pass
    texts = _repr_texts(values)
    if suffix or zero is not None:
        return [zero if zero is not None and value == 0 else text + suffix for value, text in zip(values, texts)]
    return texts


def _repr_texts(values: list[float]) -> list[str]:
    try:
        text = _encode(values)[1:-1].decode()
    except (TypeError, ValueError, OverflowError):
        return [repr(value) for value in values]
    unlike = sum(text.count(needle) for needle in _UNLIKE_REPR)
    if 4 * unlike > len(values):  # mostly numbers repr writes otherwise (tiny differences): repr is faster
        return [repr(value) for value in values]
    tokens = text.split(",")
    if unlike:  # the tokens that differ from repr: theirs instead
        token, counted = 0, 0
        for at in sorted(_unlike_repr(text)):
            token += text.count(",", counted, at)
            counted = at
            tokens[token] = repr(values[token])
    return tokens


def _unlike_repr(text: str) -> Iterator[int]:
    """Where ``text`` holds something repr writes otherwise (an exponent, ``null``, ``0.0000``); a token
    may be named more than once. ``str.find`` scans far faster than a regular expression would."""
    for needle in _UNLIKE_REPR:
        at = text.find(needle)
        while at >= 0:
            yield at
            at = text.find(needle, at + 1)

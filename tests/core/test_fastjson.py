"""probe_core.fastjson gives what json and repr give, bit for bit, and the streamed reader's fast path with it."""

from __future__ import annotations

import json
import math
import random
import struct
import sys

import pytest

import probe_core.dump.jsonstream as jsonstream
from probe_core.dump.jsonstream import iter_object
from probe_core.fastjson import MISS, decode, float_texts, try_decode, value_text


def _same(a, b) -> bool:
    """Equal with the same types all the way down (json's 1 is not 1.0), NaN equal to NaN, -0.0 not 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b) or (a != a and b != b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


TRICKY = [
    "18446744073709551616", "-9223372036854775809", "123456789012345678901234567890",  # beyond 64 bits
    "18446744073709551615", "-9223372036854775808", "-0", "-0.0", "-0e0", "1e5", "1E400", "-1e400", "1e-400",
    "NaN", "[Infinity, -Infinity]", '"\\ud800"', '"\\u00e9\\ud83d\\ude00"', '{"a": 1, "a": 2}',
    "2.2250738585072011e-308", "4.9406564584124654e-324", "0.1000000000000000055511151231257827",
    '{"shape": [8, 64], "Max": 2.5, "requires_grad": true, "value": null}', "  1  ",
]
BAD = ["1 2", '{"a":1}x', "[1,]", "01", "1.", '"a\tb"', "\ufeff1", "", "-", '"\\x"', "[" * 5000 + "]" * 5000]


@pytest.mark.parametrize("text", TRICKY)
def test_decode_gives_json_loads_value(text):
    assert _same(decode(text), json.loads(text))
    assert _same(decode(text.encode()), json.loads(text.encode()))


@pytest.mark.parametrize("text", BAD)
def test_decode_raises_what_json_loads_raises(text):
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # Python's default: the 5,000-deep text is too deep whatever the suite set
    try:
        with pytest.raises(Exception) as ours:
            decode(text)
        with pytest.raises(Exception) as theirs:
            json.loads(text)
    finally:
        sys.setrecursionlimit(limit)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


def test_decode_of_bytes_with_a_bom_or_in_utf16_is_json_loads():
    for raw in (b"\xef\xbb\xbf[1.5]", "[1.5, \"\u00e9\"]".encode("utf-16")):
        assert try_decode(raw) is MISS and decode(raw) == json.loads(raw)


def _random_doubles(count: int, seed: int) -> list[float]:
    rnd = random.Random(seed)
    values = [struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0] for _ in range(count)]
    values += [rnd.random() * 10.0 ** e * rnd.choice((1, -1)) for e in range(-320, 305) for _ in range(20)]
    values += [0.0, -0.0, 1.0, 1e16, 1e15, 9999999999999998.0, 1e-4, 9.999999999999999e-05, 1e-5, 1e-10,
               5e-324, 1.7976931348623157e308, math.inf, -math.inf, math.nan]
    return values


def test_floats_decode_as_json_decodes_them():
    values = [v for v in _random_doubles(20_000, 1) if math.isfinite(v)]
    texts = [repr(v) for v in values] + ["%.25g" % v for v in values] + ["%.17e" % v for v in values]
    decoded = decode("[" + ",".join(texts) + "]")
    assert all(_same(a, b) for a, b in zip(decoded, json.loads("[" + ",".join(texts) + "]")))


@pytest.mark.parametrize("native", [True, False], ids=["C helper", "without it"])
def test_float_texts_are_repr(monkeypatch, native):
    """repr() of every number, with the C helper that writes msgspec's tokens in repr's notation (built by
    probe-core's setup.py: the test fails where it was not built) and without it."""
    from probe_core import fastjson

    if native:
        assert fastjson._reprs is not None, "probe_core._reprs was not built (no C compiler?)"
    else:
        monkeypatch.setattr(fastjson, "_reprs", None)
    values = _random_doubles(50_000, 2)  # mostly numbers whose msgspec token is not their repr
    assert float_texts(values) == [repr(v) for v in values]
    rnd = random.Random(4)
    for _ in range(200):  # mostly numbers whose token is their repr, a few that are not, anywhere in the list
        values = [rnd.uniform(-100, 100) for _ in range(rnd.randint(1, 60))]
        for _ in range(rnd.randint(0, len(values) // 5)):
            values[rnd.randrange(len(values))] = rnd.choice((1e-5, -3.5e-7, 1e17, math.nan, -math.inf, 0.00012, 7))
        assert float_texts(values) == [repr(v) for v in values], values
    assert float_texts([]) == []
    edges = [0.0, -0.0, 1e16, 9999999999999998.0, 1e-4, 9.999999999999999e-05, 5e-324, -1.7976931348623157e308,
             1e100, 1e-100, 100.0, 12345678901234567.0, 0, -7, 2**63 - 1, 2**70, math.nan, math.inf]
    assert float_texts(edges) == [repr(v) for v in edges]
    values += edges
    assert float_texts(values, "%") == [f"{v}%" for v in values]  # a percent column
    assert float_texts(values, "%", "0%") == ["0%" if v == 0 else f"{v}%" for v in values]



def test_float_texts_are_repr_at_every_magnitude():
    """Numbers of every magnitude with few and many digits: the tokens msgspec writes as repr does (copied as they
    are) and those it writes otherwise (0.00001, 1e16, 1.50) on either side of repr's notation change."""
    rnd = random.Random(9)
    values = []
    for _ in range(20_000):
        value = rnd.choice((1, -1)) * 10 ** rnd.uniform(-8, 19)
        values += [value, round(value, rnd.randint(0, 12)), float(round(value))]
    values += [0.0001, 0.00010000000000000002, 9.999999999999999e-05, 0.001, 0.1, 1.5, 1e15, 1e16 - 2, 1e16, -0.0]
    assert float_texts(values) == [repr(v) for v in values]

def test_value_text_reads_back_as_json_dumps_reads_back():
    """Entry-like values with every double (NaN and infinities too), None, big integers, non-ASCII text and
    lone surrogates: the text reads back as json.dumps's text does, and refuses what json refuses."""
    rnd = random.Random(6)
    doubles = _random_doubles(3000, 5)
    leaves = [None, True, 0, -7, 2**64, -(2**63) - 1, 10**30, "\u00e9\U0001f600", "\ud800", "null", ""]
    for _ in range(400):
        tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [rnd.randint(0, 9)],
                  **{key: rnd.choice(doubles) for key in ("Max", "Min", "Mean", "Norm")},
                  "requires_grad": rnd.random() < 0.5}
        value = {"input_args": [tensor, {"type": "int", "value": rnd.choice(leaves)}, [rnd.choice(leaves)]],
                 "input_kwargs": {"eps": {"type": "float", "value": rnd.choice(doubles)}, 3: "int key"},
                 "output": [tensor]}
        expected = json.loads(json.dumps(value, ensure_ascii=False))
        assert _same(json.loads(value_text(value)), expected)
    for bad in ({"x": object()}, {(1, 2): 3}):
        with pytest.raises(TypeError) as ours:
            value_text(bad)
        with pytest.raises(TypeError) as theirs:
            json.dumps(bad)
        assert str(ours.value) == str(theirs.value)


def _indented_dump(entries: dict[str, str]) -> str:
    """A dump.json as json.dump(indent=1) lays it out, with each member's value text given as is."""
    members = ",\n".join(f'  "{name}": {text}' for name, text in entries.items())
    return '{\n "task": "statistics",\n "data": {\n' + members + '\n }\n}'


def test_streamed_members_of_an_indented_file_are_json_loads_members(tmp_path, monkeypatch):
    """The fast path cuts each member at the next key line at the members' indent: members it must leave to
    json (NaN, 1e400, big integers, lone surrogates), and members whose inner lines sit at that indent, are
    decoded as json decodes them, at every window size."""
    tensor = '{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": %s, "Min": -1.5}'
    entries = {
        "a.0": tensor % "2.5",
        "nan.0": tensor % "NaN",
        "huge.0": tensor % "1e400",
        "bigint.0": '{"type": "int", "value": 123456789012345678901234567890}',
        "surrogate.0": '{"type": "str", "value": "\\ud800"}',
        "inner_lines.0": '{\n  "x": [1,\n  2],\n  "y": {"z": 3}\n  }',
        "inner_list.0": '[1,\n  "x", 2]',
        "spaced.0": tensor % "3.0" + "   \n\t",
        "b.0": '[\n   1,\n   2.0\n  ]',
        "last.0": tensor % "-0.0",
    }
    path = tmp_path / "dump.json"
    path.write_text(_indented_dump(entries))
    reference = json.loads(path.read_text())["data"]
    with monkeypatch.context() as patch:  # the token-by-token path alone: the spans to give
        patch.setattr(jsonstream, "try_decode", lambda text: MISS)
        spans = [(m.start, m.end) for m in iter_object(path)]
    for chunk in (13, 97, 1 << 22):
        monkeypatch.setattr(jsonstream, "CHUNK", chunk)
        members = list(iter_object(path))
        assert [m.key for m in members] == list(reference)
        assert all(_same(m.value, reference[m.key]) for m in members)
        assert [(m.start, m.end) for m in members] == spans


def test_the_fast_path_decodes_most_members_of_an_indented_file(tmp_path, monkeypatch):
    path = tmp_path / "dump.json"
    path.write_text(_indented_dump({f"Torch.add.{i}.forward": '{"output": [{"Max": %d.5}]}' % i for i in range(50)}))
    decoded: list[int] = []
    real = jsonstream.try_decode
    monkeypatch.setattr(jsonstream, "try_decode", lambda text: decoded.append(1) or real(text))
    for chunk in (97, 1 << 22):  # a value the window cuts reads on, and still takes the fast path
        monkeypatch.setattr(jsonstream, "CHUNK", chunk)
        decoded.clear()
        assert len(list(iter_object(path))) == 50
        # all but the first members (until one's key line shows the indent) and the last
        assert len(decoded) >= 47, chunk

"""The dump scanner (``probe_core.dump._scan``) reads flat entries as json reads them.

A member the scanner reads comes without its value: its statistics and the signature its skeleton maps to.
Every test here holds that to what decoding the member gives (the compact form of :class:`Forms`), the byte
spans and the errors to those of the token path, at several window sizes, and the compare's output to the
one written with the scanner switched off (``PROBE_SCAN=0``, the path of a build without a C compiler).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probe_compare.columnar import Forms
from probe_compare.engine import CompareOptions, run_compare
from probe_core.dump import jsonstream
from probe_core.dump.jsonstream import JsonStreamError, iter_object, scanning
from probe_core.plugins import load_registry

pytestmark = pytest.mark.skipif(jsonstream._scan is None, reason="the scanner is not built (no C compiler)")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DUMPS = sorted(p.parent for p in FIXTURES.glob("msprobe_*_stat*/**/dump.json"))


def tensor(dtype="torch.float32", shape=(2, 3), stats=("1.5", "-0.25", "0.125", "3.0"), grad="true"):
    shown = ", ".join(map(str, shape))
    text = (f'{{"type": "torch.Tensor", "dtype": "{dtype}", "shape": [{shown}], "Max": {stats[0]}, '
            f'"Min": {stats[1]}, "Mean": {stats[2]}, "Norm": {stats[3]}')
    return text + (f', "requires_grad": {grad}}}' if grad is not None else "}")


LONG = "1." + "1" * 80
QUOTED = '"x"'
ENTRIES = {  # every kind of entry: flat ones of each form, and every way to be no flat entry
    "Functional.linear.{i}.forward": f'{{"input_args": [{tensor()}, {tensor(shape=(3,))}], "input_kwargs": {{}}, '
                                     f'"output": [{tensor(stats=("{i}.5", "-1e-05", "1E+2", "0"))}]}}',
    "Torch.ints.{i}.forward": f'{{"input_args": [{tensor("torch.int64", (), ("7", "-3", "1.0", "12345678901234567890123"))}]}}',
    "Torch.specials.{i}.forward": f'{{"output": [{tensor(stats=("NaN", "-Infinity", "Infinity", "1e400"))}]}}',
    "Torch.zeros.{i}.forward": f'{{"output": [{tensor(stats=("-0.0", "0.0", "-0", "0e0"))}]}}',
    "Tensor.args.{i}.forward": '{"input_args": [{"type": "int", "value": {i}}, {"type": "float", "value": 1e-3}], '
                               '"output": []}',
    "Cell.ms.{i}.forward": f'{{"input_args": [{tensor("Float32", (4,), grad=None)}], "output": [{tensor(grad=None)}]}}',
    "Functional.kw.{i}.forward": f'{{"input_kwargs": {{"x": {tensor()}, "y": {tensor(grad="null")}}}}}',
    "Functional.dup_kw.{i}.forward": f'{{"input_kwargs": {{"x": {tensor()}, "x": {tensor(grad="false")}}}}}',
    "Functional.order.{i}.forward": f'{{"output": [{tensor()}], "input_args": [{tensor()}]}}',
    "Functional.unknown.{i}.forward": f'{{"input_args": [{tensor()}], "is_inplace": true}}',
    "Functional.nested.{i}.forward": f'{{"input_args": [[{tensor()}, {{"type": "int", "value": 2}}]]}}',
    "Functional.empty.{i}.forward": "{}",
    "Functional.escaped_dtype.{i}.forward": '{"output": [' + tensor(dtype="torch.\\u0066loat32") + "]}",
    "Functional.\\u0065scaped_key.{i}.forward": f'{{"output": [{tensor()}]}}',
    "Functional.nan_arg.{i}.forward": '{"input_args": [{"type": "float", "value": NaN}]}',
    "Functional.bool_stat.{i}.forward": f'{{"output": [{tensor("torch.bool", (2,), ("true", "false", "null", "1"))}]}}',
    "Functional.long_number.{i}.forward": f'{{"output": [{tensor(stats=(LONG, "1", "1", "1"))}]}}',
    "Functional.negative_shape.{i}.forward": f'{{"output": [{tensor(shape=(-1,))}]}}',
    "Functional.data_name.{i}.forward": '{"output": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [], '
                                        '"Max": 1.0, "Min": 1.0, "Mean": 1.0, "Norm": 1.0, "requires_grad": true, '
                                        '"data_name": "x.pt"}]}',
    "Functional.stat_is_text.{i}.forward": f'{{"output": [{tensor(stats=(QUOTED, "1", "1", "1"))}]}}',
    "Module.fc.Linear.forward.{i}.debug": f'{{"output": [{tensor()}]}}',
    "Module.fc.weight.{i}.parameters_grad": f'{{"weight": {tensor()}}}',
}


def write_dump(path: Path, repeats: int = 3, indent: bool = False, unicode: bool = False) -> str:
    """A dump of ENTRIES, ``repeats`` times over; with ``unicode``, a non-ASCII name among them (the scanner
    reads ASCII windows only: the token path reads the window around it)."""
    entries = {**ENTRIES, "Module.ünicode.{i}.forward": f'{{"output": [{tensor()}]}}'} if unicode else ENTRIES
    members = [f'"{name.replace("{i}", str(i))}": {entry.replace("{i}", str(i))}'
               for i in range(repeats) for name, entry in entries.items()]
    separator = ",\n  " if indent else ", "
    text = '{"task": "statistics", "level": "mix", "data": {\n  ' + separator.join(members) + '\n }, "end": 1}'
    path.write_text(text, encoding="utf-8")
    return text


def read(path: Path, scan: bool, monkeypatch) -> tuple[list, list, dict]:
    """(members as (key, start, end), each member's compact form, the header) with the scanner on or off."""
    monkeypatch.setenv("PROBE_SCAN", "1" if scan else "0")
    forms, header = Forms(), {}
    spans, found = [], []
    for member in iter_object(path, "data", header, forms.known):
        spans.append((member.key, member.start, member.end))
        found.append(forms(member.key, member.value, member.flat))
    return spans, found, header


def same(a, b) -> bool:
    """Equal values of equal types, NaN equal to NaN."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("chunk", [61, 257, 4096, 1 << 22])
@pytest.mark.parametrize("indent", [False, True])
@pytest.mark.parametrize("unicode", [False, True])
def test_scanned_members_are_read_as_decoded_members(tmp_path, monkeypatch, chunk, indent, unicode):
    path = tmp_path / "dump.json"
    text = write_dump(path, indent=indent, unicode=unicode)
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    spans, forms, header = read(path, False, monkeypatch)
    scanned_spans, scanned_forms, scanned_header = read(path, True, monkeypatch)
    assert scanned_spans == spans
    assert scanned_header == header == {"task": "statistics", "level": "mix", "end": 1}
    assert all(same(a, b) for a, b in zip(forms, scanned_forms)), [
        (s[0], a, b) for s, a, b in zip(spans, forms, scanned_forms) if not same(a, b)]
    data = json.loads(text)["data"]
    raw = path.read_bytes()
    for name, start, end in spans:  # each span holds its value
        assert json.dumps(json.loads(raw[start:end])) == json.dumps(data[name])


def test_the_scanner_takes_the_flat_members(tmp_path, monkeypatch):
    """After the first sight of a skeleton, its members are read without decoding them. The statistics are
    no part of a skeleton (Torch.zeros has Torch.specials' one, as does the .debug entry, which has no form
    and is read back by its span when it is compared); an argument's value is (Tensor.args: a new one each
    time)."""
    path = tmp_path / "dump.json"
    write_dump(path, repeats=4)
    monkeypatch.setenv("PROBE_SCAN", "1")
    forms = Forms()
    flat = []
    for member in iter_object(path, "data", None, forms.known):
        found = forms(member.key, member.value, member.flat)
        if member.value is None:
            flat.append(member.key.split(".")[1])
            assert (found is None) == member.key.endswith(".debug")
    counts = {kind: flat.count(kind) for kind in flat}
    assert counts == {"linear": 3, "ints": 3, "specials": 3, "zeros": 4, "ms": 3, "kw": 3, "empty": 3,
                      "escaped_dtype": 3, "fc": 4}


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.95])
@pytest.mark.parametrize("chunk", [61, 1 << 22])
def test_a_broken_file_fails_as_on_the_token_path(tmp_path, monkeypatch, cut, chunk):
    """A truncated or corrupted file yields the same members before the fault and the same error, which
    names the line, column and byte of the fault (also where the window was read on at the end of the file)."""
    path = tmp_path / "dump.json"
    text = write_dump(path)
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    at = int(len(text) * cut)
    bad_number = text.index('"Max": ', at) + len('"Max": ')
    for broken in (text[:at], text[:bad_number] + "@" + text[bad_number:]):
        path.write_text(broken, encoding="utf-8")
        results = []
        for scan in (False, True):
            monkeypatch.setenv("PROBE_SCAN", "1" if scan else "0")
            forms, keys = Forms(), []
            with pytest.raises(JsonStreamError) as caught:
                for member in iter_object(path, "data", None, forms.known):
                    keys.append((member.key, member.start, member.end))
            results.append((keys, str(caught.value), caught.value.offset, caught.value.truncated))
        assert results[0] == results[1]
        error = caught.value  # its line and column are those of its byte, wherever the window began
        assert error.offset <= len(broken)
        assert (error.line, error.column) == (broken.count("\n", 0, error.offset) + 1,
                                              error.offset - broken.rfind("\n", 0, error.offset))


def test_the_switch(monkeypatch):
    monkeypatch.setenv("PROBE_SCAN", "0")
    assert not scanning()
    monkeypatch.setenv("PROBE_SCAN", "1")
    assert scanning()


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=-10**30, max_value=10**30))
leaves = st.one_of(
    st.builds(lambda dtype, shape, stats, grad: {"type": "torch.Tensor", "dtype": dtype, "shape": shape,
                                                 "Max": stats[0], "Min": stats[1], "Mean": stats[2], "Norm": stats[3],
                                                 **({} if grad == "absent" else {"requires_grad": grad})},
              st.sampled_from(["torch.float32", "torch.bfloat16", "Float16"]),
              st.lists(st.integers(min_value=0, max_value=9), max_size=3), st.tuples(numbers, numbers, numbers, numbers),
              st.sampled_from([True, False, None, "absent"])),
    st.builds(lambda value: {"type": "int" if isinstance(value, int) else "float", "value": value}, numbers))
entries = st.dictionaries(st.sampled_from(["input_args", "input_kwargs", "output", "parameters"]),
                          st.lists(leaves, max_size=3), min_size=1)


@settings(max_examples=60, deadline=None)
@given(st.lists(entries, min_size=1, max_size=6), st.integers(min_value=1, max_value=4), st.booleans())
def test_random_entries_read_the_same_both_ways(tmp_path_factory, values, repeats, indent):
    """Random statistics entries (every float, big integers; sections in any order), each written several times
    so that the scanner meets its skeleton again: the same spans and forms with and without the scanner."""
    path = tmp_path_factory.mktemp("random") / "dump.json"
    members = {f"Functional.f{k}.{i}.forward": value for i in range(repeats) for k, value in enumerate(values)}
    path.write_text(json.dumps({"task": "statistics", "data": members}, indent=1 if indent else None))
    with pytest.MonkeyPatch.context() as patch:
        plain = read(path, False, patch)
        scanned = read(path, True, patch)
    assert scanned[0] == plain[0]
    assert all(same(a, b) for a, b in zip(plain[1], scanned[1]))


def _compare(target: Path, bench: Path, out: Path) -> tuple[str, dict]:
    summary = run_compare(CompareOptions(target, bench, out, progress=False, stamp="20260101000000"), load_registry())
    csv = "".join(Path(r["csv"]).read_text() for r in summary["ranks"])
    return csv, dict(summary, output=None, ranks=[dict(r, csv=None) for r in summary["ranks"]])


@pytest.mark.parametrize("dump", DUMPS, ids=[p.relative_to(FIXTURES).parts[0] for p in DUMPS])
def test_a_compare_writes_the_same_with_and_without_the_scanner(tmp_path, monkeypatch, dump):
    """msprobe's dumps (indented) against a compact copy with some statistics changed."""
    bench = tmp_path / "bench" / "rank0"
    shutil.copytree(dump, bench)
    target = tmp_path / "target" / "rank0"
    shutil.copytree(dump, target)
    data = json.loads((dump / "dump.json").read_text())
    for i, entry in enumerate(data["data"].values()):
        for leaf in entry.get("output", []) if isinstance(entry, dict) else []:
            if isinstance(leaf, dict) and isinstance(leaf.get("Norm"), float) and i % 3 == 0:
                leaf["Norm"] *= 1.0 + 2.0 ** -20 * i
    (target / "dump.json").write_text(json.dumps(data))
    results = []
    for scan in ("0", "1"):
        monkeypatch.setenv("PROBE_SCAN", scan)
        results.append(_compare(target, bench, tmp_path / f"out{scan}"))
    assert results[0] == results[1]


def _number_tokens(rnd) -> list[str]:
    """Float tokens of every spelling json writes or reads: repr of doubles of any bit pattern, 1 to 25
    significant digits with and without exponents, leading and trailing zeros, and decimals within a digit
    of the halfway points between neighbouring doubles (where rounding twice would differ from once)."""
    import struct
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    tokens = []
    for _ in range(6000):
        bits = rnd.getrandbits(64)
        value = struct.unpack("<d", struct.pack("<Q", bits))[0]
        if math.isfinite(value):
            tokens.append(repr(value))
        digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 25)))
        point = rnd.randint(0, len(digits))
        body = (digits[:point].lstrip("0") or "0") + ("." + digits[point:] if point < len(digits) else "")
        exponent = rnd.choice(["", f"e{rnd.randint(-40, 40)}", f"E+{rnd.randint(0, 30)}", f"e-{rnd.randint(0, 30)}"])
        if "." not in body and not exponent:
            body += ".0"  # an integer token is an int, as json reads it
        tokens.append(rnd.choice(["", "-"]) + body + exponent)
        low = rnd.uniform(-1e6, 1e6) * 10.0 ** rnd.randint(-20, 20)
        middle = (Decimal(low) + Decimal(math.nextafter(low, math.inf))) / 2  # exact
        shown = f"{middle:.18e}"  # 19 significant digits, within a digit of the halfway point
        mantissa, exp = shown.split("e")
        last = int(mantissa[-1]) + rnd.choice([-1, 0, 1])
        if 0 <= last <= 9:
            tokens.append(f"{mantissa[:-1]}{last}e{int(exp)}")
    return tokens


def test_the_scanner_reads_every_number_as_float_does():
    """The scanner's statistics are float() of their tokens, bit for bit (the sign of zero too), whichever
    way it parses them (one extended-precision step where that is exact, else as float() does)."""
    import random
    import struct

    from probe_core.dump import _scan

    tokens = _number_tokens(random.Random(3))
    leaves = [tokens[i:i + 4] for i in range(0, len(tokens) - 3, 4)]
    text = '"k": {"output": [' + ", ".join(tensor(stats=tuple(leaf)) for leaf in leaves) + "]}}"
    members, _, state = _scan.scan(text, 0, 0, {})
    assert state == _scan.CLOSED and len(members) == 1
    read = members[0][4][1]
    wanted = [float(token) for leaf in leaves for token in leaf]
    assert len(read) == len(wanted)
    bad = [(token, got, want) for token, got, want in zip((t for leaf in leaves for t in leaf), read, wanted)
           if struct.pack("<d", got) != struct.pack("<d", want)]
    assert not bad, bad[:5]


def test_the_scanner_reads_every_integer_as_json_does():
    """Integer statistics (an integer tensor's Max, Min) are json's int() of their tokens, at every length: up to
    18 digits the scanner's own reading, longer ones as json reads them."""
    import json
    import random

    from probe_core.dump import _scan

    rnd = random.Random(5)
    tokens = ["0", "-0", "9" * 18, "-" + "9" * 18, "1" + "0" * 18, "-9223372036854775808", "18446744073709551616"]
    for _ in range(2000):
        digits = str(rnd.randint(1, 9)) + "".join(rnd.choice("0123456789") for _ in range(rnd.randint(0, 24)))
        tokens.append(rnd.choice(["", "-"]) + digits)
    tokens += ["0"] * (-len(tokens) % 4)
    leaves = [tokens[i:i + 4] for i in range(0, len(tokens), 4)]
    text = '"k": {"output": [' + ", ".join(tensor(stats=tuple(leaf)) for leaf in leaves) + "]}}"
    members, _, state = _scan.scan(text, 0, 0, {})
    assert state == _scan.CLOSED and len(members) == 1
    read = members[0][4][1]
    wanted = [json.loads(token) for token in tokens]
    assert [(type(v), v) for v in read] == [(type(v), v) for v in wanted]

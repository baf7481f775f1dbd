"""Fuzz target of ``probe check collect -d``'s YAML reader (issue 32, item 5): whatever the YAML — alias bombs,
recursive aliases, deep nesting, huge scalars, damaged bytes — reading it (and normalising what it read) returns or
raises a :class:`~probe_core.errors.ProbeError`, within the bounds of :mod:`probe_core.safeyaml`.

Picked up by ``tests/robustness/test_fuzz.py`` (``TARGETS``/``EXAMPLES``, as in ``fuzz_targets.py``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.robustness.fuzz_targets import _allowed, json_values, mutated

BASE = (b"train:\n  lr: &lr 1e-4\n  min_lr: *lr\n  seed: 1234\nmodel: &m {hidden: 64, heads: [8, 8]}\n"
        b"copy: *m\ncmd: 'python t.py --api-key=x'\n")


@st.composite
def alias_bomb(draw: st.DrawFn) -> bytes:
    """``levels`` anchors, each a list of ``width`` aliases of the one before (width**levels values): a small
    one that is read, or one far over the bound that is refused (one near it would only cost time)."""
    small = draw(st.booleans())
    levels = draw(st.integers(1, 6) if small else st.integers(6, 12))
    width = draw(st.integers(1, 3) if small else st.integers(20, 40))
    lines = ["a0: &a0 [x, y]"] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return ("\n".join(lines) + "\n").encode()


@st.composite
def deep(draw: st.DrawFn) -> bytes:
    depth = draw(st.integers(50, 600))
    kind = draw(st.sampled_from(["flow list", "flow map", "block"]))
    if kind == "flow list":
        return b"x: " + b"[" * depth + b"]" * depth
    if kind == "flow map":
        return b"x: " + b"{a: " * depth + b"1" + b"}" * depth
    return "".join(" " * i + f"k{i}:\n" for i in range(min(depth, 400))).encode() + b" " * 400 + b"1\n"


huge_scalar = st.sampled_from(["x: " + "9" * 5000, "x: !!int " + "1" * 4400, "x: !!float 1e99999",
                               "x: " + "a" * 5_000, "x: !!binary " + "QUJD" * 500 + "=",
                               "x: !!binary not-base64", "x: 2001-13-45", "? " + "k" * 2_000 + "\n: 1",
                               "x: &r [*r]", "a: &a\n  b: *a", "x: !!python/object:os.system ls"]).map(str.encode)

yaml_bytes = (mutated(BASE) | alias_bomb() | deep() | huge_scalar
              | json_values.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=64))


def check_yaml(settings: Any) -> Callable[[], None]:
    @settings
    @given(yaml_bytes)
    def prop(data: bytes) -> None:
        from probe_config_check.hyperparameters import normalise, parse_file

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "config.yaml"
            path.write_bytes(data)

            def run() -> None:
                raw = parse_file(str(path))
                assert len(raw) <= 1_000_000
                normalise([("config.yaml", raw)], {})

            _allowed(run)

    return prop


TARGETS: dict[str, Callable[[Any], Callable[[], None]]] = {"check YAML": check_yaml}
EXAMPLES = {"check YAML": 200}

"""Every mint/ops function the MindSpore collector hooks is recorded under the public attribute it is reached by.

``mindspore.mint.flatten`` is a wrapper (``@jit_view_unsupported``) of a function that calls ``flatten_ext``,
which ``mindspore.mint`` imports beside it: the entry is ``Mint.flatten``, as msprobe names it, never
``Mint.flatten_ext``. The table test installs a stand-in for every hooked function and calls each public
attribute: the first name it records is the one the user reached.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

import mindspore as ms
import numpy as np
import pytest

from probe_mindspore.apis import NAMESPACES, namespace_functions

from .conftest import dump_ms, read_json

#: What the table test calls through: the namespaces of functions (collectives are not called here).
CALLED = {prefix: module for prefix, module in NAMESPACES if prefix != "Distributed"}


class _Reached(Exception):
    pass


def first_recorded(names: Iterable[tuple[str, str]]) -> dict[str, str | None]:
    """``{"Mint.flatten": the first entry name calling mint.flatten records}`` for each ``(prefix, attribute)``,
    with every function the collector hooks replaced by a stand-in that records its entry name and stops."""
    hooked = list(namespace_functions())
    seen: list[str] = []

    def stand_in(api: str):
        def record(*args, **kwargs):
            seen.append(api)
            raise _Reached

        return record

    originals = [(module, attr, getattr(module, attr)) for module, attr, _ in hooked]
    x = ms.Tensor(np.ones((2, 3), np.float32))
    found: dict[str, str | None] = {}
    try:
        for module, attr, api in hooked:
            setattr(module, attr, stand_in(api))
        for prefix, attr in names:
            seen.clear()
            try:
                getattr(importlib.import_module(CALLED[prefix]), attr)(x)
            except _Reached:
                pass
            except Exception:  # noqa: BLE001 - a real call with a dummy argument: only what it recorded counts
                pass
            found[f"{prefix}.{attr}"] = seen[0] if seen else None
    finally:
        for module, attr, original in originals:
            setattr(module, attr, original)
    return found


def hooked_names() -> list[tuple[str, str]]:
    return [(api.partition(".")[0], attr) for _, attr, api in namespace_functions()
            if api.partition(".")[0] in CALLED]


#: MindSpore's public functions behind a ``@jit_view_unsupported`` wrapper.
VIEW_WRAPPED = [("Mint", name) for name in ("flatten", "reshape", "squeeze", "t")]


def test_every_hooked_function_records_the_name_it_was_reached_by():
    names = sorted(set(hooked_names()) | set(VIEW_WRAPPED))
    assert len(names) > 900
    found = first_recorded(names)
    assert {name: got for name, got in found.items() if got != name} == {}


def test_no_implementation_import_is_an_entry_name():
    """A namespace's import of the implementation of one of its public functions is no entry of its own."""
    for prefix, module_name in CALLED.items():
        module = importlib.import_module(module_name)
        public = set(module.__all__)
        for _, attr in (n for n in hooked_names() if n[0] == prefix):
            for end in ("_ext", "_op", "_func", "_"):
                assert not (attr not in public and attr.endswith(end) and attr[:-len(end)] in public), \
                    f"{prefix}.{attr} is the implementation of {prefix}.{attr[:-len(end)]}"
    assert ("Mint", "flatten_ext") not in hooked_names() and ("Mint", "softmax_ext") not in hooked_names()


@pytest.mark.parametrize("call, name", [
    (lambda x: ms.mint.flatten(x, 1), "Mint.flatten"),
    (lambda x: ms.mint.reshape(x, (4, 6)), "Mint.reshape"),
    (lambda x: ms.mint.squeeze(x, 0), "Mint.squeeze"),
    (lambda x: ms.mint.softmax(x, dim=-1), "Mint.softmax"),
])
def test_public_name_in_a_real_dump(tmp_path, call, name):
    x = ms.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    rank = dump_ms(tmp_path / "dump", lambda: call(x), level="L1")
    assert list(read_json(rank / "dump.json")["data"]) == [f"{name}.0.forward"]

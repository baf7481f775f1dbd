"""The MindSpore API names probe records are msprobe's: every function msprobe 26.2.0's support list hooks in
``mint``, ``mint.nn.functional`` and ``ops`` records, under probe, the entry name msprobe gives it
(``Mint.flatten``, not the ``Mint.flatten_ext`` it calls), save the few probe never records."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from tests.interop.msprobe_env import run_msprobe_python
from tests.mindspore.test_api_names import CALLED, first_recorded

#: msprobe's support-list sections -> probe's entry prefixes.
SECTIONS = {"mint.ops": "Mint", "mint.nn.functional": "MintFunctional", "ops": "Functional"}
#: What msprobe hooks and probe records under no name, and why.
NEVER_RECORDED = {
    "Mint.item": "reads a value out (metadata)", "Functional.numel": "reads metadata",
    "Functional.is_complex": "reads metadata", "Functional.is_nonzero": "reads a value out",
    "Functional.is_tensor": "a type test", "Functional.derivative": "an autograd transform",
    "Functional.jet": "an autograd transform", "Functional.index_add": "updates a Parameter in place",
}


def _support_list(msprobe: str) -> dict[str, list[str]]:
    done = run_msprobe_python(msprobe, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    assert done.returncode == 0, done.stderr
    path = (Path(done.stdout.strip()) / "msprobe" / "mindspore" / "dump" / "dump_processor" / "hook_cell"
            / "support_wrap_ops.yaml")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_msprobe_support_list_names_are_probes(msprobe):
    listed = _support_list(msprobe)
    names = []
    for section, prefix in SECTIONS.items():
        module = importlib.import_module(CALLED[prefix])
        for attr in listed[section]:
            value = getattr(module, attr, None)  # msprobe hooks the names the installed MindSpore has
            if callable(value) and not isinstance(value, type) and f"{prefix}.{attr}" not in NEVER_RECORDED:
                names.append((prefix, attr))
    assert len(names) > 600 and ("Mint", "flatten") in names
    found = first_recorded(names)
    assert {name: got for name, got in found.items() if got != name} == {}

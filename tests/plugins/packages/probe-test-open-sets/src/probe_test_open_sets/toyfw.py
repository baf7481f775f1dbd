"""A framework probe does not know: ``toyfw``, whose operators are numpy functions.

Its collector registers an operator table (what ``probe acc-check`` may call) and the pre-check gets a
backend for its dumps: the tested run in float32, the benchmark in float64. A name map turns its dumps'
names into PyTorch's (``Toy.plus`` -> ``Torch.add``, ``Dense`` -> ``Linear``, ``kernel`` -> ``weight``), so
that ``probe compare -lm`` pairs a toyfw dump with a PyTorch dump.
"""

from __future__ import annotations

from typing import Any

from probe_compare.api import NameMap
from probe_core.api import AccBackendSpec, CollectorSpec, NameMapSpec, hookimpl


def _operators():
    import numpy as np

    table = {"Toy.add": np.add, "Toy.tanh": np.tanh}
    return table.get


def _collector():
    raise RuntimeError("toyfw has no collector in this test package: it brings dumps and their operators")


class ToyBackend:
    def __init__(self, options: Any, operators: Any) -> None:
        self.operators = operators("toyfw")

    def run(self, case: Any, inputs: Any) -> Any:
        import numpy as np

        from probe_acc_check.backend import Outcome, Output, Run, resolve

        fn = resolve(case.api, self.operators, "toyfw")
        tested = fn(*(np.asarray(a.data, np.float32) for a in inputs.args))
        bench = fn(*(np.asarray(a.data, np.float64) for a in inputs.args))
        return Run(Outcome([Output(tested.astype(np.float64), "float32")]), Outcome([Output(bench, "float64")]))


@hookimpl
def probe_collectors() -> list[CollectorSpec]:
    return [CollectorSpec("toyfw", "toyfw", "a toy framework", _collector, operators=_operators)]


@hookimpl
def probe_acc_backends() -> list[AccBackendSpec]:
    return [AccBackendSpec("toyfw", "toyfw dumps, in float32 against float64", lambda: ToyBackend,
                           framework="toyfw")]


def toy_to_torch() -> NameMap:
    return NameMap(prefix={"Toy": "Torch"}, api={"Toy.plus": "Torch.add"}, classes={"Dense": "Linear"},
                   params={"kernel": "weight"})


@hookimpl
def probe_name_maps() -> list[NameMapSpec]:
    return [NameMapSpec("toyfw", "pytorch", "toyfw -> PyTorch API names, classes, parameters", toy_to_torch)]

"""A dump's API calls as test cases: what each API was called with, read back from dump.json.

Framework-neutral. An :class:`ApiCase` holds the recorded arguments as a tree
(lists, dicts, plain values) whose tensors are :class:`TensorSpec` leaves —
dtype, shape, the recorded Max/Min and, in tensor mode, the file holding the
real tensor — plus the specs of the forward outputs and of their recorded
gradients (the ``backward`` entry's inputs). Module/Cell entries, parameter
gradients and ``debug`` saves are not APIs and are left out; an API that can
be seen from the dump alone not to be re-runnable (a random op, a
collective, a MindSpore primitive, an argument type probe cannot rebuild)
keeps its case with ``skip`` set to the reason.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from probe_core.api import discover, DumpEntry, DumpError, RankDump, TensorMeta, writes_in_place

from probe_acc_check.errors import AccCheckError, SkipApi

#: Random ops whose draws a backend can replay: the same generator state on both runs gives the same mask
#: (see :attr:`ApiCase.random`); ``scaled_dot_product_attention`` is one when its ``dropout_p`` is above 0.
REPLAYABLE_RANDOM_OPS = frozenset({
    "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu", "rrelu_",
})
#: APIs whose output depends on the random generator only: nothing to compare.
RANDOM_OPS = frozenset({
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "normal", "normal_",
    "uniform", "uniform_", "bernoulli", "bernoulli_", "multinomial", "random_", "exponential_", "geometric_",
    "cauchy_", "log_normal_", "poisson", "gumbel_softmax", "standard_normal", "kaiming_uniform_",
    "kaiming_normal_", "xavier_uniform_", "xavier_normal_", "trunc_normal_", "orthogonal_", "sparse_",
})
#: APIs returning uninitialised memory.
UNINITIALISED_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
#: Collective communication (the ``Distributed`` prefix covers msprobe's names; these catch the rest).
COLLECTIVE_OPS = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "broadcast",
    "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv", "barrier", "reduce", "gather", "scatter",
})
#: Plain values msprobe and probe record, by their dump.json ``type``.
_TYPED = {"torch.dtype": "dtype", "mindspore.dtype": "dtype", "torch.device": "device"}


@dataclass(frozen=True)
class TensorSpec:
    """A recorded tensor: what it takes to rebuild it (dtype and shape as recorded, Max/Min, real data).

    ``missing``: dump.json names a tensor file that is not there (``path`` is then ``None``);
    ``requires_grad``: as recorded (``None``: not recorded)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    min: Any
    max: Any
    path: str | None = None
    missing: bool = False
    requires_grad: bool | None = None


@dataclass(frozen=True)
class Typed:
    """A recorded non-tensor value a framework must interpret: ``dtype`` or ``device``."""

    kind: str
    value: Any


@dataclass(frozen=True)
class ApiCase:
    """One API call of the dump, as a unit test.

    ``name``: ``Functional.gelu.0``; ``api``: ``Functional.gelu``; ``args``
    and ``kwargs``: the recorded arguments (trees with :class:`TensorSpec` and
    :class:`Typed` leaves); ``outputs``: the recorded forward outputs' tensor
    specs and values, flattened in order; ``grads``: the recorded gradients of
    those outputs, flattened alike (the backward entry's inputs), or ``None``;
    ``skip``: why it cannot be re-run.
    """

    name: str
    api: str
    framework: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    outputs: tuple = ()
    grads: tuple | None = None
    skip: str = ""

    @property
    def op(self) -> str:
        return op_of(self.api)

    @property
    def inplace(self) -> bool:
        """``add_``, ``__iadd__``, ``__setitem__``: writes into its input (no backward through it)."""
        return writes_in_place(self.op)

    @property
    def random(self) -> bool:
        """A random op whose draws a backend replays (dropout, SDPA with ``dropout_p`` > 0): the tested run
        and the benchmark start from the same generator state."""
        if self.op in REPLAYABLE_RANDOM_OPS:
            return True
        dropout_p = self.kwargs.get("dropout_p", self.args[4] if len(self.args) > 4 else 0.0)
        return self.op == "scaled_dot_product_attention" and isinstance(dropout_p, float) and dropout_p > 0.0

    def takes_grad(self) -> list[bool]:
        """For each tensor argument (in :func:`tensor_leaves` order): whether its gradient is computed — as
        the recorded run did (``requires_grad``; BatchNorm's running statistics take none), every floating
        one where the dump did not record it."""
        return [not isinstance(leaf, TensorSpec) or leaf.requires_grad is not False
                for leaf in tensor_leaves([self.args, self.kwargs])]


def _plain(value: Any) -> bool:
    return value is None or value is Ellipsis or isinstance(value, (int, float, str, bool, slice, Typed))


def flat(tree: Any) -> Iterator[Any]:
    """Every leaf of an argument/output tree in order, plain values and ``None`` included."""
    if isinstance(tree, (list, tuple)):
        for item in tree:
            yield from flat(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from flat(item)
    else:
        yield tree


def tensor_leaves(tree: Any) -> Iterator[Any]:
    """The tensor leaves of a tree (:class:`TensorSpec`, or whatever stands in their place), in order."""
    return (leaf for leaf in flat(tree) if not _plain(leaf))


def map_leaves(tree: Any, fn) -> Any:
    """``tree`` with every tensor leaf replaced by ``fn(leaf)``; containers and plain values kept."""
    if isinstance(tree, list):
        return [map_leaves(item, fn) for item in tree]
    if isinstance(tree, tuple):
        return tuple(map_leaves(item, fn) for item in tree)
    if isinstance(tree, dict):
        return {key: map_leaves(item, fn) for key, item in tree.items()}
    return tree if _plain(tree) else fn(tree)


def map_typed(tree: Any, fn) -> Any:
    """``tree`` with every :class:`Typed` value replaced by ``fn(value)`` (a framework's dtype or device)."""
    if isinstance(tree, Typed):
        return fn(tree)
    if isinstance(tree, (list, tuple)):
        return type(tree)(map_typed(item, fn) for item in tree)
    if isinstance(tree, dict):
        return {key: map_typed(item, fn) for key, item in tree.items()}
    return tree


def op_of(api: str) -> str:
    """The operator's own name: ``gelu`` for ``Functional.gelu``."""
    return api.rsplit(".", 1)[-1]


def skip_reason(api: str) -> str:
    """Why ``api`` cannot be re-run, seen from its name alone (``""`` when it can)."""
    prefix, op = api.split(".", 1)[0], op_of(api)
    if prefix == "Primitive":
        return "MindSpore primitive: no public API to call (mint, ops and Tensor APIs are pre-checked)"
    if prefix == "Distributed" or op in COLLECTIVE_OPS:
        return "collective communication: needs a process group; nothing to compare on one device"
    if op in RANDOM_OPS:
        return "random op: its output depends on the random generator, not on its inputs"
    if op in UNINITIALISED_OPS:
        return "returns uninitialised memory: nothing to compare"
    return ""


# -- reading ------------------------------------------------------------------


def _value(entry: DumpEntry, leaf: TensorMeta) -> Any:
    """One dump.json leaf as an argument: a TensorSpec, a Typed value, or the plain value."""
    if leaf.raw is None and leaf.type is None:
        return None
    if leaf.is_tensor:
        if leaf.problem:
            raise SkipApi(f"{leaf.name}: {leaf.problem}")
        if leaf.shape is None:
            raise SkipApi(f"{leaf.name}: no shape recorded")
        try:
            path = entry.tensor_path(leaf)
        except DumpError as exc:
            raise SkipApi(exc.messages[0]) from None
        found = path is not None and path.is_file()
        return TensorSpec(leaf.name, str(leaf.dtype or ""), tuple(int(n) for n in leaf.shape), leaf.min, leaf.max,
                          str(path) if found else None, missing=path is not None and not found,
                          requires_grad=leaf.requires_grad)
    kind, value = leaf.type, leaf.value
    if kind in ("int", "float", "bool", "str"):
        return value
    if kind in _TYPED:
        return Typed(_TYPED[kind], value)
    if kind == "slice" and isinstance(value, list) and len(value) == 3:
        return slice(*value)
    if kind == "ellipsis":
        return Ellipsis
    if kind in ("torch.Size", "tuple") and isinstance(value, list):
        return tuple(value)
    if kind in (None, "NoneType") and value is None:
        return None
    raise SkipApi(f"{leaf.name}: argument of type {kind!r} cannot be rebuilt")


def _build(node: Any, entry: DumpEntry, leaves: Iterator[TensorMeta]) -> Any:
    """Rebuild a dump.json subtree, taking its leaves from ``leaves`` (the core's leaf order)."""
    if node is None:
        next(leaves)
        return None
    if type(node) is list:
        return [_build(item, entry, leaves) for item in node]
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            return _value(entry, next(leaves))
        return {key: _build(item, entry, leaves) for key, item in node.items()}
    return node


def _forward_case(entry: DumpEntry, framework: str) -> ApiCase:
    parsed = entry.parsed
    case = ApiCase(f"{parsed.base}.{parsed.count}", parsed.base, framework)
    data = entry.data if isinstance(entry.data, dict) else {}
    leaves = iter(entry.leaves())
    try:
        args = _build(data.get("input_args", []), entry, leaves)
        kwargs = _build(data.get("input_kwargs", {}), entry, leaves)
        outputs = _build(data.get("output", []), entry, leaves)
    except SkipApi as exc:
        return replace(case, skip=exc.reason)
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return replace(case, skip="input_args/input_kwargs are not a list/object in dump.json")
    if case.op in ("__getitem__", "__setitem__") and len(args) > 1 and isinstance(args[1], list):
        args[1] = tuple(args[1])  # x[0, 1:3]: JSON keeps the index tuple as a list, which indexes differently
    return replace(case, args=args, kwargs=kwargs, outputs=tuple(flat(outputs)), skip=skip_reason(parsed.base))


def _gradients(entry: DumpEntry) -> tuple | None:
    data = entry.data if isinstance(entry.data, dict) else {}
    try:
        grads = _build(data.get("input", []), entry, iter(entry.leaves()))
    except SkipApi:
        return None
    return tuple(flat(grads))


def open_dump(path: str | Path, step: int | None = None, rank: int | None = None) -> RankDump:
    """The one rank dump under ``path`` (a dump.json or a folder), narrowed by ``step``/``rank``."""
    try:
        dumps = discover(path, steps=None if step is None else [step], ranks=None if rank is None else [rank])
    except DumpError as exc:
        raise AccCheckError(*exc.messages) from None
    if len(dumps) > 1:
        found = ", ".join(str(d.dump_file.parent) for d in dumps[:4]) + (", ..." if len(dumps) > 4 else "")
        raise AccCheckError(f"{path}: {len(dumps)} dumps found ({found}); pass one dump.json with -api_info, "
                            f"or choose one with --step N --rank R")
    return dumps[0]


def read_cases(dump: RankDump) -> list[ApiCase]:
    """Every API call of ``dump`` in execution order (forward entries), with their recorded gradients."""
    try:
        framework = dump.framework or "pytorch"
        forward: list[DumpEntry] = []
        grads: dict[str, tuple | None] = {}
        for entry in dump.entries():
            parsed = entry.parsed
            if parsed.kind != "api":
                continue
            if parsed.direction == "forward":
                forward.append(entry)
            elif parsed.direction == "backward":
                grads[f"{parsed.base}.{parsed.count}"] = _gradients(entry)
        cases = [_forward_case(entry, framework) for entry in forward]
    except DumpError as exc:
        raise AccCheckError(*exc.messages) from None
    if not cases:
        raise AccCheckError(f"{dump.dump_file}: no API entries (level {dump.level or '?'}); the pre-check needs a "
                            f'dump with "level": "L1" or "mix"')
    return [replace(case, grads=grads.get(case.name)) for case in cases]


def missing_files(cases: Iterable[ApiCase]) -> list[str]:
    """The tensors whose file dump.json names but the dump lacks (arguments and recorded gradients)."""
    return [leaf.name for case in cases for leaf in tensor_leaves([case.args, case.kwargs, case.grads or ()])
            if isinstance(leaf, TensorSpec) and leaf.missing]


# -- choosing -----------------------------------------------------------------


def select(cases: Iterable[ApiCase], patterns: Iterable[str]) -> list[ApiCase]:
    """The cases whose name (``Functional.gelu.0``), API (``Functional.gelu``) or operator (``gelu``)
    matches one of the shell-style ``patterns``."""
    patterns = list(patterns)
    return [case for case in cases if any(fnmatch.fnmatchcase(text, pattern) for pattern in patterns
                                          for text in (case.name, case.api, case.op))]


def _signature(tree: Any) -> Any:
    if isinstance(tree, TensorSpec):
        return ("tensor", tree.dtype, tree.shape)
    if isinstance(tree, (list, tuple)):
        return tuple(_signature(item) for item in tree)
    if isinstance(tree, dict):
        return tuple((key, _signature(item)) for key, item in tree.items())
    return repr(tree)


def dedupe(cases: Iterable[ApiCase]) -> list[ApiCase]:
    """msprobe's ``-f/--filter_api``: keep the first of the calls of one API that differ only in Max/Min."""
    seen: set = set()
    kept = []
    for case in cases:
        key = (case.api, _signature(case.args), _signature(case.kwargs))
        if key not in seen:
            seen.add(key)
            kept.append(case)
    return kept

"""Property-based fuzz targets, one per reader: whatever the bytes, the reader returns or raises a
:class:`~probe_core.errors.ProbeError` (one clear line), never anything else.

Used by ``tests/robustness/test_fuzz.py`` (a few hundred examples per reader in CI) and by
``scripts/fuzz_readers.py --minutes N`` (long runs). Each target is a hypothesis test function
factory: ``TARGETS[name](settings)`` returns a callable that runs the property under those settings.
"""

from __future__ import annotations

import atexit
import io
import json
import shutil
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from probe_core.errors import ProbeError
from tests.compare.dumps import tiny_model_entries, write_dump

# -- strategies ------------------------------------------------------------------------------------------

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
           | st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
#: values a leaf field may hold in a damaged dump: the usual types plus nesting and huge numbers
field_values = json_values | st.just(float("inf")) | st.just(10**5000).map(lambda _: "HUGE")


def nested_text(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@st.composite
def mutated(draw: st.DrawFn, base: bytes) -> bytes:
    """``base`` with a few random edits: truncation, byte changes, insertions (bad UTF-8, deep nesting,
    huge integers), deletions, duplicated spans."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "set", "insert", "delete", "dup", "special"]))
        at = draw(st.integers(0, max(len(data), 1) - 1)) if data else 0
        if op == "cut":
            del data[at:]
        elif op == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        elif op == "dup":
            span = bytes(data[at:at + draw(st.integers(1, 64))])
            data[at:at] = span
        else:
            data[at:at] = draw(st.sampled_from([b"\xff\xfe", "é".encode()[:1], nested_text(3000),
                                                b"9" * 5000, b'"Max": "abc"', b"NaN", b"-Infinity", b"\x00"]))
    return bytes(data)


def _allowed(run: Callable[[], Any]) -> None:
    """Run ``run``; a ProbeError is a clear, expected outcome; anything else fails the property."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run()
        except ProbeError as exc:
            assert exc.messages and all(isinstance(m, str) and m for m in exc.messages)


# -- shared fixtures (built once per process) ------------------------------------------------------------

_CACHE: dict[str, Any] = {}


def _base(mode: str = "statistics") -> Path:
    if mode not in _CACHE:
        root = Path(tempfile.mkdtemp(prefix=f"probe-fuzz-{mode}-"))
        atexit.register(shutil.rmtree, root, True)  # removed when the process ends
        write_dump(root / "bench", tiny_model_entries(), mode)
        write_dump(root / "target", tiny_model_entries(), mode)
        _CACHE[mode] = root
    return _CACHE[mode]


def _registry() -> Any:
    from probe_core.plugins import current_registry

    return current_registry()


def _compare(target: Path, bench: Path, out: Path, lenient: bool) -> None:
    from probe_compare.engine import CompareOptions, run_compare

    run_compare(CompareOptions(target=target, bench=bench, output=out, lenient=lenient, xlsx=False,
                               progress=False), _registry())


def _graph(folder: Path) -> None:
    from probe_graph.source import RankFolder, load_graph

    load_graph(RankFolder(0, 0, folder / "dump.json"), registry=_registry())


def _copy_side(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)


def _check_dump_folder(target: Path, bench: Path) -> None:
    with tempfile.TemporaryDirectory() as out:
        for lenient in (False, True):
            _allowed(lambda lenient=lenient: _compare(target, bench, Path(out) / str(lenient), lenient))
        _allowed(lambda: _graph(target))


# -- targets ------------------------------------------------------------------------------------------------


def dump_bytes(settings: Any) -> Callable[[], None]:
    base = (_base() / "target" / "dump.json").read_bytes()

    @settings
    @given(mutated(base))
    def prop(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "target"
            _copy_side(_base() / "target", target)
            (target / "dump.json").write_bytes(data)
            _check_dump_folder(target, _base() / "bench")

    return prop


@st.composite
def damaged_dump(draw: st.DrawFn) -> dict[str, Any]:
    dump = json.loads((_base() / "target" / "dump.json").read_text())
    names = list(dump["data"])
    header = {}
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(names))
        where = draw(st.sampled_from(["entry", "section", "leaf", "leaf", "header"]))
        entry = dump["data"][name]
        if where == "entry":
            dump["data"][name] = draw(json_values)
        elif where == "header":
            header[draw(st.sampled_from(["task", "level", "framework", "dump_data_dir", "data"]))] = draw(json_values)
        elif isinstance(entry, dict):
            section = draw(st.sampled_from(["input_args", "input_kwargs", "output", "parameters", "input"]))
            if where == "section" or not isinstance(entry.get(section), list) or not entry[section]:
                entry[section] = draw(json_values)
            else:
                leaf = entry[section][0]
                if isinstance(leaf, dict):
                    key = draw(st.sampled_from(["Max", "Min", "Mean", "Norm", "shape", "type", "dtype",
                                                "data_name", "value", "requires_grad", "md5"]))
                    value = draw(field_values)
                    leaf[key] = 10**5000 if value == "HUGE" else value
    dump.update(header)
    return dump


def dump_structure(settings: Any) -> Callable[[], None]:
    @settings
    @given(damaged_dump(), st.sampled_from(["statistics", "tensor"]))
    def prop(dump: dict[str, Any], mode: str) -> None:
        import sys

        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "target"
            _copy_side(_base(mode) / "target", target)
            limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
            if limit:
                sys.set_int_max_str_digits(0)  # let json write the 5,000-digit literal the reader must refuse
            try:
                text = json.dumps(dump)
            finally:
                if limit:
                    sys.set_int_max_str_digits(limit)
            (target / "dump.json").write_text(text)
            _check_dump_folder(target, _base(mode) / "bench")

    return prop


def side_files(settings: Any) -> Callable[[], None]:
    @settings
    @given(st.sampled_from(["construct.json", "stack.json"]),
           json_values.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=64)
           | mutated((_base() / "target" / "construct.json").read_bytes())
           | mutated((_base() / "target" / "stack.json").read_bytes()))
    def prop(name: str, data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "target"
            _copy_side(_base() / "target", target)
            (target / name).write_bytes(data)
            _check_dump_folder(target, _base() / "bench")

    return prop


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def tensor_files(settings: Any) -> Callable[[], None]:
    good = (_base("tensor") / "target" / "dump_tensor_data" / "Functional.relu.0.forward.output.0.npy").read_bytes()
    arrays = st.sampled_from([np.zeros(3), np.zeros((4, 16), np.float32), np.array(["a"]), np.zeros(0),
                              np.array(1.0), np.zeros((16, 4), np.int8), np.full((4, 16), np.nan)]).map(_npy)

    @settings
    @given(mutated(good) | arrays | st.binary(max_size=200))
    def prop(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "target"
            _copy_side(_base("tensor") / "target", target)
            (target / "dump_tensor_data" / "Functional.relu.0.forward.output.0.npy").write_bytes(data)
            _check_dump_folder(target, _base("tensor") / "bench")

    return prop


def journal(settings: Any) -> Callable[[], None]:
    lines = [json.dumps(["H", {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None}]),
             json.dumps(["S", 0, ["File a.py, line 1, in f, \n x()"]])]
    dump = json.loads((_base() / "target" / "dump.json").read_text())["data"]
    for name, value in dump.items():
        lines.append(json.dumps(["e", name, 0, value]))
        lines.append(json.dumps(["c", name, None]))
    base = ("\n".join(lines) + "\n").encode()
    records = st.lists(json_values.map(lambda v: json.dumps(v).encode()), max_size=4)

    @settings
    @given(mutated(base) | records.map(lambda r: base + b"\n".join(r) + b"\n"))
    def prop(data: bytes) -> None:
        from probe_recover.command import recover

        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "killed" / "step0" / "rank0"
            target.mkdir(parents=True)
            (target / ".journal.jsonl").write_bytes(data)
            _check_dump_folder(target, _base() / "bench")
            _allowed(lambda: recover(Path(tmp) / "killed"))
            if (target / "dump.json").exists():
                _check_dump_folder(target, _base() / "bench")

    return prop


def _pack_bytes(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are the point
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name, data in members:
                archive.writestr(name, data)
    return buffer.getvalue()


def packs(settings: Any) -> Callable[[], None]:
    manifest = {"format": "probe-config-check", "version": 1, "ranks": [0], "checkers": {}}
    good = _pack_bytes([("manifest.json", json.dumps(manifest).encode()),
                        ("rank0/env.json", b'{"variables": {"OMP_NUM_THREADS": "1"}}'),
                        ("rank0/pip.json", b'{"packages": {"torch": "2.1"}, "compared": ["torch"]}')])
    names = st.sampled_from(["manifest.json", "rank0/env.json", "rank0/pip.json", "rank1/hyperparameters.json",
                             "rank0/weights.json", "../x.json", "rank0/", "a/b/c.json"])
    contents = (json_values.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=40)
                | st.just(nested_text(3000)) | st.just(json.dumps(manifest).encode()))
    built = st.lists(st.tuples(names, contents), max_size=5).map(_pack_bytes)

    @settings
    @given(mutated(good) | built)
    def prop(data: bytes) -> None:
        from probe_config_check.report import compare_packs

        with tempfile.TemporaryDirectory() as tmp:
            bench, target = Path(tmp) / "bench.zip", Path(tmp) / "target.zip"
            bench.write_bytes(good)
            target.write_bytes(data)
            _allowed(lambda: compare_packs(_registry(), bench, target, Path(tmp) / "out"))

    return prop


@st.composite
def safetensors_files(draw: st.DrawFn) -> bytes:
    import struct

    count = draw(st.integers(0, 3))
    header: dict[str, Any] = {}
    data = b""
    for i in range(count):
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        dtype = draw(st.sampled_from(["F32", "F16", "BF16", "I64", "BOOL", "X9"]))
        size = int(np.prod(shape)) * {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "BOOL": 1, "X9": 1}[dtype]
        meta: Any = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + size]}
        data += bytes(size)
        if draw(st.booleans()):
            key = draw(st.sampled_from(["dtype", "shape", "data_offsets", "meta"]))
            value = draw(field_values)
            meta = value if key == "meta" else {**meta, key: (2**62 if value == "HUGE" else value)}
        header[f"t{i}"] = meta
    if draw(st.booleans()):
        header = draw(json_values)
    text = json.dumps(header).encode()
    raw = struct.pack("<Q", len(text)) + text + data
    return draw(st.just(raw) | mutated(raw))


def _checkpoint_prop(settings: Any, files: st.SearchStrategy[bytes], name: str) -> Callable[[], None]:
    """The property of a checkpoint reader: ``files`` written as ``name``, loaded by ``probe check ckpt``'s loader."""
    @settings
    @given(files)
    def prop(data: bytes) -> None:
        from probe_config_check.ckpt_loaders import load_checkpoint

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_bytes(data)
            _allowed(lambda: load_checkpoint(path))

    return prop


def safetensors(settings: Any) -> Callable[[], None]:
    return _checkpoint_prop(settings, safetensors_files(), "model.safetensors")


def torch_checkpoints(settings: Any) -> Callable[[], None]:
    import torch

    buffer = io.BytesIO()
    torch.save({"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(2)}, buffer)
    return _checkpoint_prop(settings, mutated(buffer.getvalue()) | st.binary(max_size=100), "model.pt")


def configs(settings: Any) -> Callable[[], None]:
    base = json.dumps({"task": "statistics", "dump_path": "./d", "rank": [0], "step": [0, "2-4"], "level": "mix",
                       "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"},
                       "plugins": {"disable": [], "enable": []}}).encode()
    top = st.dictionaries(st.sampled_from(["task", "dump_path", "rank", "step", "level", "async_dump", "seed",
                                           "statistics", "tensor", "plugins", "framework", "overwrite", "x"]),
                          field_values, max_size=5)

    @settings
    @given(mutated(base) | top.map(lambda v: json.dumps(v).replace('"HUGE"', "9" * 5000).encode()))
    def prop(data: bytes) -> None:
        from probe_core.config import load_config

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "config.json"
            path.write_bytes(data)

            def run() -> None:
                config, _ = load_config(path)
                _ = 7 in config.step, 3 in config.rank, len(config.step)

            _allowed(run)

    return prop


def mappings(settings: Any) -> Callable[[], None]:
    base = b"api:\n  Mint.matmul: Torch.matmul\nmodule:\n  fc1: dense\nParallelTransformerLayer:\n  input_norm: ln\n"

    @settings
    @given(mutated(base) | json_values.map(lambda v: json.dumps(v).encode()))
    def prop(data: bytes) -> None:
        from probe_compare.mapping import load_mapping
        from probe_graph.match import load_layer_mapping

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "map.yaml"
            path.write_bytes(data)
            _allowed(lambda: load_mapping(path))
            _allowed(lambda: load_layer_mapping(path))

    return prop


TARGETS: dict[str, Callable[[Any], Callable[[], None]]] = {
    "dump.json bytes": dump_bytes,
    "dump.json structure": dump_structure,
    "stack.json/construct.json": side_files,
    "tensor files": tensor_files,
    "journal": journal,
    "config_check packs": packs,
    "safetensors": safetensors,
    "torch checkpoints": torch_checkpoints,
    "config.json": configs,
    "mapping YAML": mappings,
}

#: examples per reader per CI run (``tests/robustness/test_fuzz.py``)
EXAMPLES = {"dump.json bytes": 150, "dump.json structure": 150, "stack.json/construct.json": 120,
            "tensor files": 120, "journal": 120, "config_check packs": 200, "safetensors": 300,
            "torch checkpoints": 150, "config.json": 300, "mapping YAML": 300}


def all_targets() -> tuple[dict[str, Callable[[Any], Callable[[], None]]], dict[str, int]]:
    """Every reader's target and CI example count: this module's and those of each
    ``tests/robustness/fuzz_*.py`` module (each defines ``TARGETS`` and ``EXAMPLES`` the same way)."""
    import importlib
    import pkgutil

    import tests.robustness as package

    targets, examples = dict(TARGETS), dict(EXAMPLES)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("fuzz_") and info.name != "fuzz_targets":
            module = importlib.import_module(f"tests.robustness.{info.name}")
            clash = set(module.TARGETS) & set(targets)
            assert not clash, f"{info.name}: fuzz target names already taken: {sorted(clash)}"
            targets.update(module.TARGETS)
            examples.update(module.EXAMPLES)
    return targets, examples

"""Name maps between two dumps: the cross-framework tables plugins register and msprobe's mapping files.

* registered: a plugin's :class:`~probe_core.specs.NameMapSpec` (hook ``probe_name_maps``) for a
  pair of frameworks — API prefixes, an API table, module classes, parameter names (probe-mindspore
  registers MindSpore<->PyTorch: ``Mint`` -> ``Torch``, ``Dense`` -> ``Linear``, ``gamma`` -> ``weight``);
  :func:`builtin_map` looks them up;
* ``-lm``/``--mapping``: the layer-mapping YAML (below); ``-cm``: cell names; ``-am``: API names with
  argument positions; ``-dm``: entry/tensor names; ``--consistent_check``: train/infer module names.

The layer-mapping YAML is msprobe's format — ``{ClassName: {attribute in the
target's code: attribute path in the bench's code}}`` — plus two optional
probe sections::

    api:      {Mint.some_op: Torch.other_op}      # API names (without count/direction)
    module:   {encoder.layers: decoder.blocks}    # module path prefixes

A :class:`NameMap` turns a target entry's API base / module path into the
bench's naming, so that matching can compare keys directly.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probe_core.api import CompareError, PluginError

if TYPE_CHECKING:
    from probe_core.api import Registry

#: Module names a training backend and an inference engine give the same layer (``--consistent_check``).
TRAIN_TO_INFER_MODULES = {
    "megatron": {"word_embeddings": "embed_tokens", "self_attention": "self_attn", "linear_qkv": "qkv_proj",
                 "q_layernorm": "q_norm", "k_layernorm": "k_norm", "core_attention": "attn",
                 "linear_proj": "o_proj", "router": "gate", "linear_fc1": "gate_up_proj", "linear_fc2": "down_proj"},
    "fsdp": {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
             "up_proj": "gate_up_proj"},
}
#: Where an entry name ends inside a tensor name (``Functional.linear.0.forward`` | ``.input.0``).
_ENTRY_END = re.compile(r"^(.*?\.(?:forward|backward)(?:\.\d+)?|.*?\.parameters_grad\.\d+)(\..+)?$")


def split_tensor_name(name: str) -> tuple[str, str]:
    """``Functional.linear.0.forward.input.0`` -> (``Functional.linear.0.forward``, ``.input.0``)."""
    found = _ENTRY_END.match(name)
    return (found.group(1), found.group(2) or "") if found else (name, "")


@dataclass
class NameMap:
    """How to rename target names into the bench's naming.

    ``api``: ``{target API base: bench API base}``; ``prefix``: ``{target
    prefix: bench prefix}`` (``Mint`` -> ``Torch``); ``layers``: the YAML's
    class-keyed attribute maps; ``modules``: path-prefix maps.
    """

    api: dict[str, str] = field(default_factory=dict)
    prefix: dict[str, str] = field(default_factory=dict)
    layers: dict[str, dict[str, str]] = field(default_factory=dict)
    modules: dict[str, str] = field(default_factory=dict)
    classes: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)  # parameter names: gamma -> weight
    cells: dict[str, str] = field(default_factory=dict)  # -cm: {target "path.Class": bench "path.Class"}
    segments: dict[str, str] = field(default_factory=dict)  # module path segments (--consistent_check)
    entries: dict[str, str] = field(default_factory=dict)  # -dm: {target entry: bench entry}
    tensors: dict[str, str] = field(default_factory=dict)  # -dm: {target tensor name: bench tensor name}
    arguments: dict[str, dict[str, str]] = field(default_factory=dict)  # -am: {target API: {".input.0": ...}}

    @property
    def active(self) -> bool:
        return any((self.api, self.prefix, self.layers, self.modules, self.classes, self.params, self.cells,
                    self.segments, self.entries, self.tensors, self.arguments))

    def cell_name(self, path: str, cls: str) -> tuple[str, str]:
        """-cm: the target module's ``path.Class`` renamed whole, else by the first fragment that occurs in it."""
        if not self.cells:
            return path, cls
        text = f"{path}.{cls}"
        if text in self.cells:
            text = self.cells[text]
        else:
            for old, new in self.cells.items():
                if old in text:
                    text = text.replace(old, new, 1)
        head, _, tail = text.rpartition(".")
        return (head, tail) if head else (path, cls)

    def tensor_suffix(self, target_entry: str, bench_entry: str, suffix: str) -> str | None:
        """The bench tensor suffix (``.input.1``) for the target's ``suffix`` of a matched entry; ``None``
        where an -am argument map leaves the tensor out."""
        mapped = self.tensors.get(target_entry + suffix)
        if mapped is not None:
            entry, tail = split_tensor_name(mapped)
            return tail if entry == bench_entry else None
        api = target_entry.rsplit(".", 2)[0]
        if api in self.arguments:
            return self.arguments[api].get(suffix)
        if self.params:
            head, _, last = suffix.rpartition(".")
            if last in self.params:
                return f"{head}.{self.params[last]}"
        return suffix

    def api_base(self, base: str) -> str:
        """Map an API base (``Mint.matmul``) into the bench's naming (``Torch.matmul``)."""
        if base in self.api:
            return self.api[base]
        head, _, rest = base.partition(".")
        return f"{self.prefix.get(head, head)}.{rest}" if rest else base

    def module_prefix(self, prefix: str) -> str:
        return self.prefix.get(prefix, prefix)

    def module_path(self, path: str, class_of: Mapping[str, str]) -> str:
        """Map a module path through the path-prefix map and the class-keyed layer map.

        ``class_of`` gives the class of each target module path (from the
        dump's names); the root's class is unknown, so a top-level attribute
        is looked up in every class of the YAML that no known path has.
        """
        for old, new in sorted(self.modules.items(), key=lambda kv: -len(kv[0])):
            if path == old or path.startswith(old + "."):
                path = new + path[len(old):]
                break
        if not (self.layers or self.segments) or not path:
            return path
        parts = path.split(".")
        mapped: list[str] = []
        for i, part in enumerate(parts):
            owner = ".".join(parts[:i])
            classes = [class_of[owner]] if owner in class_of else self._root_classes(class_of)
            replacement = next((self.layers[c][part] for c in classes if part in self.layers.get(c, {})), part)
            mapped.append(self.segments.get(replacement, replacement))
        return ".".join(mapped)

    def _root_classes(self, class_of: Mapping[str, str]) -> list[str]:
        known = set(class_of.values())
        return [c for c in self.layers if c not in known] or list(self.layers)

    def module_class(self, name: str) -> str:
        return self.classes.get(name, name)


def builtin_map(target_framework: str, bench_framework: str, registry: Registry | None = None) -> NameMap:
    """The registered name map for a cross-framework compare (hook ``probe_name_maps``), a copy the caller
    may extend; empty for the same framework, an unknown one, or a pair no installed plugin maps.

    ``registry``: where to look (default: :func:`probe_core.plugins.current_registry`).
    """
    if target_framework == bench_framework or not target_framework or not bench_framework:
        return NameMap()
    if registry is None:
        from probe_core.api import current_registry

        registry = current_registry()
    spec = next((s for s in registry.name_maps.values()
                 if (s.target, s.bench) == (target_framework, bench_framework)), None)
    if spec is None:
        return NameMap()
    name_map = spec.load()
    if not isinstance(name_map, NameMap):
        raise PluginError(f"plugin {spec.plugin!r}: the name map {spec.name!r} must load a NameMap, "
                          f"got {type(name_map).__name__}")
    return copy.deepcopy(name_map)


def _read_yaml(path: Path, flag: str, shape: str) -> Any:
    """A mapping file's YAML (bounded: size, alias expansion, depth); one clear error naming the flag, the
    file and the expected shape."""
    from probe_core.api import load_yaml

    return load_yaml(path, flag=flag, error=CompareError, hint=f"expected {shape}")


def _name_pairs(data: Any, path: Path, flag: str, shape: str) -> dict[str, str]:
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise CompareError(f"{flag} {path}: expected {shape}")
    return dict(data)


def load_cell_mapping(path: Path, base: NameMap) -> NameMap:
    """-cm: ``{target cell "path.Class" (or a fragment of it): bench module "path.Class"}``."""
    shape = "{target cell name: bench module name}, e.g. 'fc1.Dense: fc1.Linear'"
    base.cells.update(_name_pairs(_read_yaml(path, "-cm", shape), path, "-cm", shape))
    return base


def load_data_mapping(path: Path, base: NameMap) -> NameMap:
    """-dm: ``{target tensor or entry name: bench tensor or entry name}``."""
    shape = "{target name: bench name}, e.g. 'Functional.linear.0.forward.input.0: Functional.linear.1.forward.input.0'"
    for target, bench in _name_pairs(_read_yaml(path, "-dm", shape), path, "-dm", shape).items():
        (t_entry, t_tail), (b_entry, b_tail) = split_tensor_name(target), split_tensor_name(bench)
        base.entries[t_entry] = b_entry
        if t_tail or b_tail:
            base.tensors[target] = bench
    return base


#: -am keys: (target list, bench list, tensor name part).
_ARGUMENT_KEYS = (("ms_args", "pt_args", "input"), ("ms_outputs", "pt_outputs", "output"),
                  ("ms_parameters", "pt_parameters", "parameters"))


def load_api_mapping(path: Path, base: NameMap) -> NameMap:
    """-am FILE: a list of ``{ms_api, pt_api, ms_args, pt_args, ms_outputs, pt_outputs}``; the argument lists
    pair tensors by position (a target tensor in no list is left unmatched)."""
    shape = "a list of {ms_api: Functional.x, pt_api: Torch.y, ms_args: [0, 1], pt_args: [1, 0], ...}"
    data = _read_yaml(path, "-am", shape)
    if data is None:
        return base
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise CompareError(f"-am {path}: expected {shape}")
    for i, item in enumerate(data):
        ms_api, pt_api = item.get("ms_api"), item.get("pt_api")
        if not isinstance(ms_api, str) or not isinstance(pt_api, str):
            raise CompareError(f"-am {path}: item {i} needs 'ms_api' and 'pt_api' names; expected {shape}")
        base.api[ms_api] = pt_api
        suffixes: dict[str, str] = {}
        for ms_key, pt_key, part in _ARGUMENT_KEYS:
            ms_list, pt_list = item.get(ms_key) or [], item.get(pt_key) or []
            if not isinstance(ms_list, list) or not isinstance(pt_list, list) or len(ms_list) != len(pt_list):
                raise CompareError(f"-am {path}: item {i} ({ms_api}): '{ms_key}' and '{pt_key}' must be lists of "
                                   "the same length")
            suffixes.update({f".{part}.{a}": f".{part}.{b}" for a, b in zip(ms_list, pt_list)})
        if suffixes:
            base.arguments[ms_api] = suffixes
    return base


def consistent_check_map(backend: str, base: NameMap) -> NameMap:
    """--consistent_check: the training backend's module names become the inference engine's."""
    for name in TRAIN_TO_INFER_MODULES if backend == "any" else (backend,):
        base.segments.update(TRAIN_TO_INFER_MODULES[name])
    return base


def load_mapping(path: str | Path, base: NameMap | None = None) -> NameMap:
    """Read a mapping YAML (``yaml.safe_load``) on top of ``base`` (the built-in table)."""
    path = Path(path)
    data = _read_yaml(path, "--mapping", "a layer-mapping YAML ({ClassName: {target_attr: bench_attr}})") or {}
    if not isinstance(data, dict):
        raise CompareError(f"--mapping {path}: the top level must be a mapping of class names "
                           f"(or 'api'/'module'), got {type(data).__name__}")
    result = base or NameMap()
    for key, value in data.items():
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise CompareError(f"--mapping {path}: key {key!r} must map names to names "
                               f"(e.g. {key}: {{linear_fc1: dense_h_to_4h}})")
        if key == "api":
            result.api.update(value)
        elif key == "module":
            result.modules.update(value)
        else:
            result.layers[str(key)] = dict(value)
    return result

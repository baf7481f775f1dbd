"""Name maps between two dumps: the layer-mapping YAML and the built-in MindSpore<->PyTorch API table.

The YAML is msprobe's layer-mapping format — ``{ClassName: {attribute in the
target's code: attribute path in the bench's code}}`` — plus two optional
probe sections::

    api:      {Mint.some_op: Torch.other_op}      # API names (without count/direction)
    module:   {encoder.layers: decoder.blocks}    # module path prefixes

A :class:`NameMap` turns a target entry's API base / module path into the
bench's naming, so that matching can compare keys directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from probe_core.errors import CompareError

#: MindSpore API prefixes and their PyTorch counterparts.
MS_TO_PT_PREFIX = {"Mint": "Torch", "MintFunctional": "Functional", "Tensor": "Tensor", "Cell": "Module",
                   "Functional": "Functional", "Distributed": "Distributed", "Torch": "Torch"}
#: MindSpore APIs whose PyTorch twin has another name (after the prefix map).
MS_TO_PT_API = {
    "Functional.dense": "Functional.linear",
    "Functional.matmul": "Torch.matmul",
    "Functional.softmax": "Torch.softmax",
    "Mint.nn.functional.linear": "Functional.linear",
    "Tensor.__matmul__": "Tensor.__matmul__",
}
#: MindSpore cell classes and their PyTorch module twins.
MS_TO_PT_CLASS = {"Dense": "Linear", "SequentialCell": "Sequential", "CellList": "ModuleList"}


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

    @property
    def active(self) -> bool:
        return bool(self.api or self.prefix or self.layers or self.modules or self.classes)

    def api_base(self, base: str) -> str:
        """Map an API base (``Mint.matmul``) into the bench's naming (``Torch.matmul``)."""
        if base in self.api:
            return self.api[base]
        head, _, rest = base.partition(".")
        mapped = f"{self.prefix.get(head, head)}.{rest}" if rest else base
        return self.api.get(mapped, mapped)

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
        if not self.layers or not path:
            return path
        parts = path.split(".")
        mapped: list[str] = []
        for i, part in enumerate(parts):
            owner = ".".join(parts[:i])
            classes = [class_of[owner]] if owner in class_of else self._root_classes(class_of)
            replacement = next((self.layers[c][part] for c in classes if part in self.layers.get(c, {})), part)
            mapped.append(replacement)
        return ".".join(mapped)

    def _root_classes(self, class_of: Mapping[str, str]) -> list[str]:
        known = set(class_of.values())
        return [c for c in self.layers if c not in known] or list(self.layers)

    def module_class(self, name: str) -> str:
        return self.classes.get(name, name)


def builtin_map(target_framework: str, bench_framework: str) -> NameMap:
    """The built-in API table for a cross-framework compare (empty for the same framework)."""
    if target_framework == bench_framework or not target_framework or not bench_framework:
        return NameMap()
    if (target_framework, bench_framework) == ("mindspore", "pytorch"):
        return NameMap(api=dict(MS_TO_PT_API), prefix=dict(MS_TO_PT_PREFIX), classes=dict(MS_TO_PT_CLASS))
    if (target_framework, bench_framework) == ("pytorch", "mindspore"):
        inverse_prefix = {"Torch": "Mint", "Module": "Cell", "Functional": "Functional", "Tensor": "Tensor"}
        inverse_api = {"Functional.linear": "Functional.dense"}
        return NameMap(api=inverse_api, prefix=inverse_prefix, classes={v: k for k, v in MS_TO_PT_CLASS.items()})
    return NameMap()


def load_mapping(path: str | Path, base: NameMap | None = None) -> NameMap:
    """Read a mapping YAML (``yaml.safe_load``) on top of ``base`` (the built-in table)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise CompareError(f"--mapping {path}: no such file; give a layer-mapping YAML "
                           f"({{ClassName: {{target_attr: bench_attr}}}})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise CompareError(f"--mapping {path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except UnicodeDecodeError as exc:
        raise CompareError(f"--mapping {path}: invalid UTF-8 byte at byte {exc.start}; save the mapping as UTF-8"
                           ) from None
    except (RecursionError, OSError, ValueError) as exc:  # ValueError: an integer of over 4,300 digits
        why = ("nested too deeply" if isinstance(exc, RecursionError) else
               f"unreadable ({exc.strerror})" if isinstance(exc, OSError) else f"not a usable value ({exc})"[:160])
        raise CompareError(f"--mapping {path}: {why}; a mapping is {{ClassName: {{target_attr: bench_attr}}}}"
                           ) from None
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

"""Parse dump entry names into their parts.

Names follow msprobe's scheme:

* APIs: ``{Prefix}.{api}.{count}.{forward|backward}``, e.g.
  ``Functional.linear.0.forward`` or ``Primitive.layer_norm.LayerNorm.0.forward``;
* modules / cells: ``{Module|Cell}.{path}.{Class}.{forward|backward}.{count}``;
* parameter gradients: ``{Module|Cell}.{path}.{Class}.parameters_grad.{count}``;
* single-variable saves: ``{name}.{count}.debug``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

DIRECTIONS = ("forward", "backward")
MODULE_PREFIXES = ("Module", "Cell")


@dataclass(frozen=True)
class EntryName:
    """The parts of one entry name.

    ``kind``: ``"api"``, ``"module"``, ``"parameters_grad"``, ``"debug"`` or
    ``"other"``; ``base``: the name without count and direction (the API name
    ``Functional.linear`` or the module ``Module.blocks.0.ln1.LayerNorm``);
    ``direction``: ``"forward"``, ``"backward"`` or ``""``; ``count``: the
    call count (``-1`` when the name has none).
    """

    full: str
    kind: str
    base: str
    direction: str
    count: int

    @property
    def prefix(self) -> str:
        """``Functional``, ``Torch``, ``Tensor``, ``Mint``, ``Module``, ``Cell``, ..."""
        return self.base.split(".", 1)[0]

    @property
    def module_path(self) -> str:
        """For modules: the attribute path (``blocks.0.ln1``); ``""`` otherwise."""
        if self.kind not in ("module", "parameters_grad"):
            return ""
        parts = self.base.split(".")
        return ".".join(parts[1:-1])

    @property
    def module_class(self) -> str:
        """For modules: the class name (``LayerNorm``); ``""`` otherwise."""
        return self.base.rsplit(".", 1)[-1] if self.kind in ("module", "parameters_grad") else ""

    def with_count(self, count: int) -> str:
        """The same name with another call count."""
        if self.kind == "api":
            return f"{self.base}.{count}.{self.direction}"
        if self.kind == "module":
            return f"{self.base}.{self.direction}.{count}"
        if self.kind == "parameters_grad":
            return f"{self.base}.parameters_grad.{count}"
        if self.kind == "debug":
            return f"{self.base}.{count}.debug"
        return self.full


def common_api_name(name: str) -> tuple[str, str, int] | None:
    """(base, direction, count) of an API name as :func:`parse_entry_name` reads it
    (``Functional.linear.0.forward``), by one split and without its record; ``None`` for any other name."""
    parts = name.rsplit(".", 2)
    if len(parts) == 3 and parts[2] in DIRECTIONS and parts[1].isdigit():
        return parts[0], parts[2], int(parts[1])
    return None


@lru_cache(maxsize=1 << 16)
def parse_entry_name(name: str) -> EntryName:
    """Split ``name`` into an :class:`EntryName` (unknown shapes get kind ``"other"``)."""
    parts = name.split(".")
    if len(parts) >= 3:
        last, before = parts[-1], parts[-2]
        if last in DIRECTIONS and before.isdigit():
            return EntryName(name, "api", ".".join(parts[:-2]), last, int(before))
        if last == "debug" and before.isdigit():
            return EntryName(name, "debug", ".".join(parts[:-2]), "", int(before))
        if last.isdigit() and before in DIRECTIONS:
            kind = "module" if parts[0] in MODULE_PREFIXES else "api"
            return EntryName(name, kind, ".".join(parts[:-2]), before, int(last))
        if last.isdigit() and before == "parameters_grad":
            return EntryName(name, "parameters_grad", ".".join(parts[:-2]), "", int(last))
    return EntryName(name, "other", name, "", -1)

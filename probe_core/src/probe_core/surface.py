"""A public surface over private modules, imported on first use: ``probe_core.api`` is one, and a plugin
distribution that others build on gives its own the same way (``probe_compare.api``, ``probe_graph.api``)::

    __getattr__, __dir__, __all__, WHERE = lazy_surface(__name__, {"my_plugin.engine": ("run", "Options")})

Names resolve when first read, so importing the surface imports none of the modules behind it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_surface(surface: str, exports: Mapping[str, tuple[str, ...]], moved: Mapping[str, str] | None = None,
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str], dict[str, str]]:
    """The module ``__getattr__``/``__dir__``, ``__all__`` and public name -> defining module of ``surface``, whose
    ``exports`` map each private module to the names it gives; ``moved`` maps a name that left the surface to
    the surface that has it now (its error says where)."""
    where = {name: module for module, names in exports.items() for name in names}
    public = sorted(where)

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            if moved and name in moved:
                raise AttributeError(f"{surface}.{name} moved to {moved[name]}: import it from there (its "
                                     f"distribution is {moved[name].split('.')[0].replace('_', '-')})")
            raise AttributeError(f"{surface} has no {name!r}; its public names are listed in docs/plugins.md")
        value = getattr(import_module(module), name)
        setattr(sys.modules[surface], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return public

    return __getattr__, __dir__, public, where

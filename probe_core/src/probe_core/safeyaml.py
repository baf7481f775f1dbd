"""YAML and config files a user hands over, read safely whatever they hold.

* :func:`read_capped` reads a file of at most ``limit`` bytes (64 MiB by default), never more: a bigger
  file (or an endless stream such as ``/dev/zero``) is one error naming the file, its size and the cap;
* :func:`parse_yaml` is ``yaml.safe_load`` with bounds: nesting deeper than ``max_depth`` levels, aliases
  that would expand the document past ``max_values`` values ("billion laughs": ten lines that grow past
  2 GB when walked), and an alias inside its own anchor (a cycle) are refused before any value is built;
* :func:`load_yaml` is both, for a file.

Every failure is one :class:`~probe_core.errors.ProbeError` line (of the class the caller gives) naming
the flag and file, where in the file, and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from probe_core.errors import ProbeError

#: the largest YAML/JSON/shell config file read (configs are kilobytes; a bigger one is not a config)
MAX_FILE_BYTES = 64 << 20
#: the most values (scalars, lists, mappings) a document may hold once its aliases are expanded
MAX_VALUES = 1_000_000
#: the deepest nesting of lists and mappings
MAX_DEPTH = 100


def _label(path: str | os.PathLike, flag: str) -> str:
    return f"{flag} {path}" if flag else str(path)


def read_capped(path: str | os.PathLike, *, flag: str = "", limit: int = MAX_FILE_BYTES,
                error: type[ProbeError] = ProbeError) -> bytes:
    """The bytes of ``path``, refused with one line when it holds more than ``limit`` bytes."""
    label = _label(path, flag)
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = b"" if size > limit else handle.read(limit + 1)  # a stream (/dev/zero) has no size: read 1 more
    except OSError as exc:
        raise error(f"{label}: cannot be read ({exc.strerror or exc}); check the path") from None
    if size > limit or len(data) > limit:
        cap = f"the {limit / (1 << 20):g} MiB cap for config files"
        held = f"is {size:,} bytes, over {cap}" if size > limit else f"holds more than {cap}"
        raise error(f"{label}: {held}; give the config file itself, not a data file")
    return data


def _loader(max_depth: int):
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """``SafeLoader`` that refuses nesting deeper than ``max_depth`` while composing."""

        depth = 0

        def compose_node(self, parent, index):
            self.depth += 1
            try:
                if self.depth > max_depth:
                    mark = self.peek_event().start_mark
                    raise _Refused(f"nested deeper than {max_depth} levels at line {mark.line + 1}", "flatten it")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


class _Refused(Exception):
    """A bound was crossed: (what, fix)."""


def _children(node: Any) -> list[tuple[str | None, Any]]:
    """(key, child) of a mapping's keys and values or a list's items; key: a value's key when it is text."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [(label, part) for key, value in node.value
                for label, part in ((None, key), (key.value if isinstance(key, yaml.ScalarNode) else None, value))]
    return [(None, child) for child in node.value] if isinstance(node, yaml.SequenceNode) else []


def _measure(root: Any, max_values: int, max_depth: int) -> None:
    """Refuse ``root`` when, with every alias written out, it holds more than ``max_values`` values or nests
    deeper than ``max_depth``, or when an alias sits inside its own anchor. Each shared node is measured
    once (no expansion happens), without recursion."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) once expanded
    open_nodes: set[int] = set()  # the nodes being measured: an alias to one of them is a cycle
    keys: dict[int, str] = {}  # id(node) -> the key it is the value of, for messages
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        nid = id(node)
        where = (f"key {keys[nid]!r}, " if nid in keys else "") + f"line {node.start_mark.line + 1}"
        if children_done:
            open_nodes.discard(nid)
            parts = [measured[id(child)] for _, child in _children(node)]
            values, depth = 1 + sum(v for v, _ in parts), 1 + max((d for _, d in parts), default=0)
            if values > max_values:
                raise _Refused(f"its aliases expand to more than {max_values:,} values ({where})",
                               "write the values out or use fewer nested aliases")
            if depth > max_depth:
                raise _Refused(f"its aliases nest deeper than {max_depth} levels ({where})", "flatten it")
            measured[nid] = (values, depth)
        elif nid not in measured:
            if nid in open_nodes:
                raise _Refused(f"the anchored value ({where}) contains an alias to itself",
                               "remove the recursive anchor/alias")
            open_nodes.add(nid)
            stack.append((node, True))
            for key, child in _children(node):
                if key is not None:
                    keys.setdefault(id(child), key[:60])
                stack.append((child, False))


def parse_yaml(text: str | bytes, *, where: str, error: type[ProbeError] = ProbeError, hint: str = "",
               max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH) -> Any:
    """The single YAML document ``text`` as ``yaml.safe_load`` builds it, within the bounds; ``where`` names
    the source in messages, ``hint`` (e.g. the expected shape) ends them."""
    import yaml

    tail = f"; {hint}" if hint else ""
    loader = None
    try:
        loader = _loader(max_depth)(text.decode("utf-8-sig") if isinstance(text, bytes) else text)
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node, max_values, max_depth)
        return loader.construct_document(node)
    except _Refused as exc:
        what, fix = exc.args
        raise error(f"{where}: refused: {what}; {fix}{tail}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = str(getattr(exc, "problem", None) or exc).replace("\n", " ")[:160]
        raise error(f"{where}: not valid YAML{at}: {problem}; fix the file{tail}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{where}: invalid UTF-8 byte at byte {exc.start}; save the file as UTF-8{tail}") from None
    except (ValueError, OverflowError, RecursionError) as exc:
        why = str(exc).replace("\n", " ").split(";")[0][:160]
        raise error(f"{where}: holds a value YAML cannot build ({type(exc).__name__}: {why}); fix the file"
                    f"{tail}") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(path: str | os.PathLike, *, flag: str = "", error: type[ProbeError] = ProbeError, hint: str = "",
              limit: int = MAX_FILE_BYTES) -> Any:
    """The YAML file ``path`` read with :func:`read_capped` and :func:`parse_yaml`."""
    if not Path(path).is_file():
        raise error(f"{_label(path, flag)}: no such file; give a YAML file" + (f": {hint}" if hint else ""))
    return parse_yaml(read_capped(path, flag=flag, limit=limit, error=error), where=_label(path, flag),
                      error=error, hint=hint)

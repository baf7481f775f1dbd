"""Write graphs to the SQLite ``.vis.db`` file the tb-graph-ascend TensorBoard plugin reads.

Three tables: ``tb_nodes`` (one row per node per graph, keyed by step, rank
and data source ``NPU``/``Bench``), ``tb_stack`` (one row per distinct call
stack) and ``tb_config`` (one row: graph type, task, colours, ranks, steps).
What the viewer insists on: the root's ``up_node`` is ``''``, every
``stack_id`` has a ``tb_stack`` row, the file is in WAL journal mode, files
are 640 and folders 750, and no symlinks. The file is written under a
temporary name and renamed into place when complete.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

from probe_core.api import GraphError, dumps, float_texts, tables_json
from probe_graph.api import Graph, Node, NodeKind, TensorTable

NODE_COLUMNS = (
    ("id", "TEXT PRIMARY KEY"), ("graph_id", "TEXT NOT NULL"), ("node_order", "INTEGER NOT NULL"),
    ("node_name", "TEXT NOT NULL"), ("node_type", "TEXT NOT NULL"), ("up_node", "TEXT"), ("sub_nodes", "TEXT"),
    ("precision_index", "INTEGER"), ("overflow_level", "TEXT"), ("micro_step_id", "INTEGER NOT NULL"),
    ("matched_node_link", "TEXT"), ("stack_id", "TEXT"), ("parallel_merge_info", "TEXT"),
    ("matched_distributed", "TEXT"), ("modified", "INTEGER NOT NULL"), ("input_data", "TEXT"),
    ("output_data", "TEXT"), ("data_source", "TEXT"), ("dump_data_dir", "TEXT"), ("step", "INTEGER NOT NULL"),
    ("rank", "INTEGER NOT NULL"), ("is_distributed", "INTEGER"),
)
STACK_COLUMNS = (("id", "TEXT PRIMARY KEY"), ("stack_info", "TEXT"))
CONFIG_COLUMNS = (
    ("id", "TEXT PRIMARY KEY"), ("graph_type", "TEXT NOT NULL"), ("task", "TEXT"), ("tool_tip", "TEXT"),
    ("micro_steps", "INTEGER"), ("overflow_check", "INTEGER"), ("node_colors", "TEXT NOT NULL"),
    ("rank_list", "TEXT NOT NULL"), ("step_list", "TEXT NOT NULL"),
)
INDEXES = {
    "index1": ("step", "rank", "data_source", "up_node", "node_order"),
    "index2": ("step", "rank", "data_source", "node_name"),
    "index3": ("step", "rank", "data_source", "node_order"),
    "index4": ("step", "rank", "node_order"),
    "index5": ("step", "rank", "micro_step_id", "node_order"),
    "index6": ("step", "rank", "modified", "matched_node_link"),
    "index7": ("is_distributed",),
}
FILE_MODE, DIR_MODE = 0o640, 0o750


#: a shown column (``DataMode.shown_columns``): its texts, or ``(fmt, floats)``: each float ``x`` shown as
#: ``fmt % x`` where finite and ``repr(x)`` where not (fmt ``"%r"``, or ``"%.<1-17>g"`` and literal text)
ShownColumn = list[str] | tuple[str, list[float]]
#: a table's shown metrics: {tensor key: {metric: text}}, or (metric names, {tensor key: row}, shown columns):
#: each tensor's metrics the cells of its row of the columns, as a mode's ``shown_columns`` gives a chunk's
TableMetrics = dict[str, dict[str, Any]] | tuple[tuple[str, ...], dict[str, int], list[ShownColumn]]


def column_texts(column: ShownColumn) -> list[str]:
    """The texts of a shown column (what ``tables_json`` writes in C)."""
    if column.__class__ is list:
        return column  # type: ignore[return-value]
    fmt, values = column
    if fmt == "%r":
        return float_texts(values)
    return [fmt % value if value - value == 0.0 else repr(value) for value in values]


def format_value(value: dict[str, Any], floats: Iterator[str] | None = None) -> dict[str, str]:
    """One tensor/scalar description with every field as text (what the viewer displays); ``floats``: the
    text of each float field, in order, formatted in bulk (:func:`table_floats`)."""
    if floats is None:
        floats = iter(table_floats([{"": value}]))
    shown = {key: next(floats) if item.__class__ is float else str(item)  # str(): 'True', '[4, 8]', 'None'
             for key, item in value.items()}
    if None in value.values():
        shown.update({key: "null" for key, item in value.items() if item is None})
    if "Max" not in value:
        if len(value) == 1 and value.get("value", 0) is None:
            return shown
        scalar = value.get("value")
        if isinstance(scalar, (int, float)) and not isinstance(scalar, bool):
            text = shown["value"]
            shown.update(Max=text, Min=text, Mean=text, Norm=text, dtype=f"<class {value.get('type')}>", shape="[]")
    if "requires_grad" not in shown:
        shown["requires_grad"] = "null"
    if "data_name" not in shown:
        shown["data_name"] = "-1"
    return shown


def table_floats(tables: Iterable[TensorTable]) -> list[str]:
    """The text of every float field of ``tables``' descriptions, in order (``repr``: 'nan', 'inf', '1e-05')."""
    return float_texts([item for table in tables for value in table.values() for item in value.values()
                        if item.__class__ is float])


def format_table(table: TensorTable, metrics: TableMetrics | None = None, floats: Iterator[str] | None = None) -> str:
    """The JSON text of a node's input or output column (with compare metrics, already text, merged in);
    ``floats``: as :func:`format_value` takes them."""
    if not table:
        return "{}"
    if metrics.__class__ is tuple:
        metrics = _metric_dicts(metrics)  # type: ignore[arg-type]
    if floats is None:
        floats = iter(table_floats([table]))
    out: dict[str, dict[str, str]] = {}
    for key, value in table.items():
        shown = format_value(value, floats)
        if metrics:
            extra = metrics.get(key)
            if extra:
                shown.update(extra)
        out[key] = shown
    return dumps(out)


def format_tables(tables: list[TensorTable], metrics: list[TableMetrics | None]) -> list[str]:
    """:func:`format_table` of each table with its metrics, in one C call where the extension is built (which
    writes each float's repr, and each shown column given as floats, itself)."""
    if tables_json is not None:
        try:
            return tables_json(tables, metrics)
        except ValueError:  # non-ASCII text, or keys that are not str: the tables as format_table writes them
            pass
    texts, texts_of = iter(table_floats(tables)), {}
    return [format_table(table, _metric_dicts(extra, texts_of) if extra.__class__ is tuple else extra, texts)
            for table, extra in zip(tables, metrics)]


def _metric_dicts(metrics: tuple[tuple[str, ...], dict[str, int], list[ShownColumn]],
                  texts_of: dict[int, list[list[str]]] | None = None) -> dict[str, dict[str, str]]:
    """Metrics given as (names, {tensor key: row}, columns) as {tensor key: {metric: text}}; ``texts_of``: the
    texts of the columns lists met already, by id (tables share them)."""
    names, rows, columns = metrics
    texts = texts_of.get(id(columns)) if texts_of is not None else None
    if texts is None:
        texts = [column_texts(column) for column in columns]
        if texts_of is not None:
            texts_of[id(columns)] = texts
    return {key: dict(zip(names, [column[row] for column in texts])) for key, row in rows.items()}


class MetricValues:
    """A node's leaf metrics as values, shown as text (``DataMode.shown_rows``, a chunk of nodes at once) only
    when its row is made: ``names`` the metric names, ``keys`` each leaf's tensor key, ``values`` each leaf's
    values in ``names`` order. Far smaller than the text while the job's other graphs are built."""

    __slots__ = ("names", "keys", "values")

    def __init__(self, names: tuple[str, ...], keys: list[str], values: list[tuple]) -> None:
        self.names, self.keys, self.values = names, keys, values


#: a node's shown metrics: {tensor key: {metric: text}}, shown columns (:data:`TableMetrics`' tuple), or its
#: values to format when its row is made
NodeMetrics = dict[str, dict[str, Any]] | tuple[tuple[str, ...], dict[str, int], list[ShownColumn]] | MetricValues
ShowRows = Callable[[Sequence[str], Sequence[Sequence[Any]]], list[dict[str, str]]]
ShowColumns = Callable[[Sequence[str], Sequence[Sequence[Any]]], tuple[tuple[str, ...], list[ShownColumn]] | None]
ROWS_CHUNK = 1024  # nodes whose rows are made at once


#: the ``tb_nodes`` columns that hold one value for all of a graph's rows: the writer puts them in its INSERT
#: once per graph (binding them per row, a NULL above all, costs more than making the rest of the row)
GRAPH_COLUMNS = ("graph_id", "matched_distributed", "modified", "data_source", "dump_data_dir", "step", "rank")
#: the other columns, in ``NODE_COLUMNS``' order: what :meth:`GraphRows.rows` gives per node
ROW_COLUMNS = tuple(name for name, _ in NODE_COLUMNS if name not in GRAPH_COLUMNS)
_NAME_AT, _INDEX_AT = ROW_COLUMNS.index("node_name"), ROW_COLUMNS.index("precision_index")
_ROW_AT = [ROW_COLUMNS.index(name) if name in ROW_COLUMNS else None for name, _ in NODE_COLUMNS]
_GRAPH_AT = [GRAPH_COLUMNS.index(name) if name in GRAPH_COLUMNS else None for name, _ in NODE_COLUMNS]


class GraphRows:
    """What one graph contributes to the file: its ``tb_nodes`` rows (:meth:`rows`, the columns of
    :data:`ROW_COLUMNS`, with :attr:`constants` for those of :data:`GRAPH_COLUMNS`; :meth:`node_rows`, whole)
    and ``tb_stack`` rows (:attr:`stacks`, complete once the node rows are made).

    The rows are made from the graph as the file is written, a chunk of nodes at a time, so a big graph's rows
    never sit in memory all at once. Pickled (to leave a worker process), they are made first and the graph
    is dropped. :meth:`flag` names the nodes the job's verdicts turn red."""

    def __init__(self, graph: Graph, metrics: dict[str, NodeMetrics] | None = None,
                 show: ShowRows | None = None, columns: ShowColumns | None = None) -> None:
        self._graph: Graph | None = graph
        self._metrics = metrics or {}
        self._show, self._columns = show, columns
        self._made: list[tuple] | None = None
        self.constants = (graph.graph_id, "{}", 0, graph.source, graph.dump_dir, graph.step, graph.rank)
        self.stacks: list[tuple[str, str]] = []
        self.flags: dict[str, float] = {}

    def flag(self, indexes: Mapping[str, float]) -> None:
        """Show each node ``indexes`` names with its precision index there (the job's verdicts)."""
        self.flags = dict(indexes)

    def rows(self) -> Iterator[tuple]:
        """Every node's :data:`ROW_COLUMNS`, in the viewer's node order, with the flags."""
        flags = self.flags
        if self._made is None:
            return chain.from_iterable(self._make(flags))
        name_at, index_at = _NAME_AT, _INDEX_AT
        return (row[:index_at] + (flags[row[name_at]],) + row[index_at + 1:] if row[name_at] in flags else row
                for row in self._made)

    def node_rows(self) -> Iterator[tuple]:
        """Every node's whole ``tb_nodes`` row (``NODE_COLUMNS``), as :meth:`rows` with the :attr:`constants`."""
        constants = self.constants
        return (tuple(row[at] if at is not None else constants[graph_at] for at, graph_at in zip(_ROW_AT, _GRAPH_AT))
                for row in self.rows())

    def indexes(self) -> Iterator[tuple[str, float | None]]:
        """(node name, precision index before the flags) of every node."""
        if self._made is not None:
            return ((row[_NAME_AT], row[_INDEX_AT]) for row in self._made)
        return ((node.name, node.precision_index) for node in self._graph.walk())  # type: ignore[union-attr]

    def release(self) -> None:
        """Drop the graph (unlinked: reference counting frees it at once), once the rows are made."""
        if self._graph is not None:
            self._graph.release()
        self._graph, self._metrics = None, {}

    def __getstate__(self) -> dict[str, Any]:
        if self._made is None:
            self._made = [row for rows in self._make({}) for row in rows]
            self._graph, self._metrics = None, {}  # the graph stays with the worker that built it
        return {"made": self._made, "constants": self.constants, "stacks": self.stacks, "flags": self.flags}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._graph, self._metrics, self._show, self._columns = None, {}, None, None
        self._made, self.constants, self.stacks = state["made"], state["constants"], state["stacks"]
        self.flags = state["flags"]

    def _make(self, flags: Mapping[str, float]) -> Iterator[Iterator[tuple]]:
        """The rows a chunk of nodes at a time, each node ``flags`` names shown with its precision index there:
        a chunk's columns made one at a time, zipped into rows."""
        graph = self._graph
        if graph is None:
            raise GraphError("the graph's rows were made already and the graph released")
        id_prefix = f"{graph.graph_id}_"
        stack_ids: dict[tuple[str, ...], str] = {}
        self.stacks = []
        links_above: dict[Node | None, str] = {None: "["}  # a partner's link up to its name, by its parent
        kinds = {kind: str(int(kind)) for kind in NodeKind}
        nodes = list(graph.walk())
        for start in range(0, len(nodes), ROWS_CHUNK):
            chunk = nodes[start:start + ROWS_CHUNK]
            node_metrics = self._shown(chunk)
            texts = format_tables(_interleaved([node.inputs for node in chunk], [node.outputs for node in chunk]),
                                  _interleaved(node_metrics, node_metrics))
            names = [node.name for node in chunk]
            chunk_stacks = []
            for node in chunk:
                stack = node.stack
                stack_id = stack_ids.get(stack)
                if stack_id is None:
                    stack_id = stack_ids[stack] = f"{id_prefix}{len(stack_ids)}"
                    self.stacks.append((stack_id, dumps(list(stack))))
                chunk_stacks.append(stack_id)
            links = []
            for node in chunk:
                matched = node.matched
                if matched is None:
                    links.append("[]")
                    continue
                above = links_above.get(matched.parent)  # '["root",...,"parent",': the JSON list's head
                if above is None:
                    above = links_above[matched.parent] = dumps(matched.ancestors())[:-1] + ","
                links.append(f"{above}{dumps(matched.name)}]")  # dumps([*matched.ancestors(), matched.name])
            yield zip(
                [id_prefix + name for name in names], range(start, start + len(chunk)), names,
                [kinds.get(node.kind) or str(int(node.kind)) for node in chunk],
                [parent.name if (parent := node.parent) is not None else "" for node in chunk],
                [dumps([child.name for child in children]) if (children := node.children) else "" for node in chunk],
                [flags.get(node.name, node.precision_index) for node in chunk] if flags else
                [node.precision_index for node in chunk],
                [node.overflow_level for node in chunk], [node.micro_step for node in chunk], links, chunk_stacks,
                [json.dumps(info) if (info := node.merge_info) else "" for node in chunk],
                texts[::2], texts[1::2], [1 if name.startswith("Distributed.") else 0 for name in names],
            )

    def _shown(self, chunk: Sequence[Node]) -> list[TableMetrics | None]:
        """The shown metrics of each of a chunk's nodes; the values of every :class:`MetricValues` formatted at
        once per set of metric names (by the mode's ``shown_columns`` where it has one: no dict per leaf)."""
        metrics = self._metrics
        shown: list[Any] = [metrics.get(node.name) or None for node in chunk] if metrics else [None] * len(chunk)
        pending: dict[tuple[str, ...], list[int]] = {}  # the positions of the MetricValues, by metric names
        for at, found in enumerate(shown):
            if found.__class__ is MetricValues:
                pending.setdefault(found.names, []).append(at)
        for names, positions in pending.items():
            group: list[MetricValues] = [shown[at] for at in positions]
            values = [values for found in group for values in found.values]
            columns = self._columns(names, values) if self._columns is not None else None
            if columns is not None:
                shown_names, shown_columns = columns[0], list(columns[1])  # one list: tables_json formats it once
                rows = iter(range(len(values)))  # zip(found.keys, rows) takes one row per key
                for at, found in zip(positions, group):
                    shown[at] = (shown_names, dict(zip(found.keys, rows)), shown_columns)
                continue
            texts = iter(self._show(names, values))  # type: ignore[misc]
            for at, found in zip(positions, group):
                shown[at] = {key: next(texts) for key in found.keys}
        return shown


def _interleaved(first: list[Any], second: list[Any]) -> list[Any]:
    """``[first[0], second[0], first[1], second[1], ...]``."""
    both = [None] * (2 * len(first))
    both[::2], both[1::2] = first, second
    return both


def graph_rows(graph: Graph, metrics: dict[str, NodeMetrics] | None = None, show: ShowRows | None = None,
               columns: ShowColumns | None = None) -> GraphRows:
    """The rows of ``graph`` for ``tb_nodes`` and ``tb_stack``; ``metrics[node]`` adds compare columns
    (``show``: how :class:`MetricValues` become text, ``DataMode.shown_rows``; ``columns``, tried first: the
    same as columns, ``DataMode.shown_columns``)."""
    return GraphRows(graph, metrics, show, columns)


class VisConfig(NamedTuple):  # not a frozen dataclass: made at import at a tenth of the cost
    """The ``tb_config`` row."""

    graph_type: str  # "build" or "compare"
    task: str = ""
    tool_tip: dict[str, str] | None = None
    micro_steps: int = 1
    overflow_check: bool = False
    node_colors: dict[str, Any] | None = None
    ranks: Sequence[int] = (0,)
    steps: Sequence[int] = (0,)


def _create(cursor: sqlite3.Cursor, table: str, columns: Sequence[tuple[str, str]]) -> str:
    cursor.execute(f"CREATE TABLE {table} ({', '.join(f'{n} {t}' for n, t in columns)})")
    return f"INSERT INTO {table} VALUES ({', '.join('?' for _ in columns)})"


def _literal(value: Any) -> str | None:
    """``value`` as an SQL literal (None, a 64-bit int, text without NUL), else None."""
    if value is None:
        return "NULL"
    if value.__class__ is int and -2**63 <= value < 2**63:
        return str(value)
    if value.__class__ is str and "\x00" not in value:
        return "'" + value.replace("'", "''") + "'"
    return None


def _insert_nodes(part: GraphRows) -> tuple[str, Iterable[tuple]]:
    """The INSERT of ``part``'s node rows, its :attr:`~GraphRows.constants` written in it as literals, and the
    rows it takes (:meth:`~GraphRows.rows`, with any constant no literal can hold)."""
    literals = [_literal(value) for value in part.constants]
    bound = tuple(value for value, literal in zip(part.constants, literals) if literal is None)
    columns = ", ".join((*ROW_COLUMNS, *GRAPH_COLUMNS))
    values = ", ".join(["?"] * len(ROW_COLUMNS) + [literal or "?" for literal in literals])
    rows = part.rows()
    if bound:
        rows = (row + bound for row in rows)
    return f"INSERT INTO tb_nodes ({columns}) VALUES ({values})", rows


def _safe_output_dir(folder: Path) -> Path:
    if folder.is_symlink():
        raise GraphError(f"{folder}: the output folder is a symlink; give a real folder with -o")
    folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    if not folder.is_dir():
        raise GraphError(f"{folder}: not a folder; give a folder with -o")
    os.chmod(folder, DIR_MODE)
    return folder


def write_vis_db(path: str | os.PathLike, parts: Iterable[GraphRows], config: VisConfig) -> Path:
    """Write ``path`` (a ``*.vis.db``; ``{stem}_1.vis.db``, ... when another run holds the name) from graph rows
    and the config; return the path written. A write that fails (a full disk) is one
    :class:`~probe_core.api.OutputError` line, and leaves no file behind."""
    from probe_core.api import create_exclusive, writing

    wanted = Path(path)
    _safe_output_dir(wanted.parent)
    final, placeholder = create_exclusive(wanted.parent, wanted.name, "wb")  # the name is this run's from now on
    placeholder.close()
    temp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    sidecars = (Path(f"{temp}-wal"), Path(f"{temp}-shm"))
    try:
        for leftover in (temp, *sidecars):
            if leftover.exists() or leftover.is_symlink():
                leftover.unlink()
        with writing(str(final)):
            _fill(temp, parts, config)
            for sidecar in sidecars:  # empty after the checkpoint
                if sidecar.exists():
                    sidecar.unlink()
            os.chmod(temp, FILE_MODE)
            os.replace(temp, final)
    except BaseException:
        for leftover in (temp, *sidecars, final):
            leftover.unlink(missing_ok=True)
        raise
    return final


def _fill(temp: Path, parts: Iterable[GraphRows], config: VisConfig) -> None:
    """Create the database ``temp`` and fill it; SQLite's "disk full" is the ``OSError`` it stands for."""
    conn = sqlite3.connect(temp)
    try:
        cursor = conn.cursor()
        # a private temporary file renamed into place when complete: no journal needed while filling it
        cursor.execute("PRAGMA journal_mode=OFF")
        cursor.execute("PRAGMA synchronous=OFF")
        cursor.execute("PRAGMA page_size=16384")  # fewer overflow pages for the long rows: indexes build faster
        # pages kept in memory up to 128 MiB (taken as used): each index build scans the table again, from
        # memory, not read back from the file (2 MiB by default: a 20k-node pair's 58 MB read 7 times)
        cursor.execute("PRAGMA cache_size=-131072")
        _create(cursor, "tb_nodes", NODE_COLUMNS)
        insert_stack = _create(cursor, "tb_stack", STACK_COLUMNS)
        insert_config = _create(cursor, "tb_config", CONFIG_COLUMNS)
        for part in parts:
            cursor.executemany(*_insert_nodes(part))
            cursor.executemany(insert_stack, part.stacks)
        cursor.execute(insert_config, (
            "1", config.graph_type, config.task, json.dumps(config.tool_tip) if config.tool_tip else None,
            config.micro_steps, int(config.overflow_check),
            json.dumps(config.node_colors) if config.node_colors else "null",
            json.dumps(sorted(set(config.ranks))), json.dumps(sorted(set(config.steps))),
        ))
        for name, columns in INDEXES.items():
            cursor.execute(f"CREATE INDEX {name} ON tb_nodes ({', '.join(columns)})")
        conn.commit()
        cursor.execute("PRAGMA journal_mode=WAL")  # what the viewer switches to anyway; stored in the file
        cursor.close()
    except sqlite3.OperationalError as exc:  # SQLite names no errno: "database or disk is full" (ENOSPC),
        # "disk I/O error" (any other failed write: EFBIG past a file size limit, EIO)
        if "full" in str(exc):
            raise OSError(errno.ENOSPC, str(exc), str(temp)) from None
        if "I/O error" in str(exc):
            raise OSError(errno.EIO, f"{exc} (is the disk full?)", str(temp)) from None
        raise
    finally:
        conn.close()

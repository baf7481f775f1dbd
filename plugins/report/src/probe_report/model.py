"""What a report shows, independent of how the page draws it: each input reader (the output of a compare, a monitor
compare, an acc-check, a locate) fills one :class:`Report`, and :mod:`probe_report.page` renders any of them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from probe_core.api import Frame  # a recorded stack frame: the terminal prints the same ones


@dataclass
class Answer:
    """The answer card: the first divergence in words, where it comes from in the user's code, what to run next."""

    found: bool
    headline: str
    facts: list[tuple[str, str]] = field(default_factory=list)  # (label, value): step, rank, entry, kind ...
    cause: str = ""  # what the runs do differently there (the culprit's arguments), shown before the reason
    reason: str = ""
    stack: list[Frame] = field(default_factory=list)
    next_steps: list[tuple[str, str]] = field(default_factory=list)  # (what it does, command or config)
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> Frame | None:
        """The user's line: the innermost frame outside the framework's and the interpreter's folders."""
        return next((f for f in self.stack if f.user), None)


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]  # (x, y); a y that is not finite is drawn as a gap and listed as NaN/Inf
    role: str = "a"  # a, b (the two runs), error, threshold: the page's colour for it


@dataclass
class Chart:
    title: str
    x_label: str
    y_label: str
    series: list[Series]
    log_y: bool = False
    marks: list[tuple[float, str]] = field(default_factory=list)  # vertical lines: (x, label); the first is the divergence
    bands: list[tuple[float, float, str]] = field(default_factory=list)  # labelled x ranges (steps of a compare)
    anomalies: list[tuple[float, str, str]] = field(default_factory=list)  # (x, kind: nan-inf or spike, what)


@dataclass
class HeatMap:
    title: str
    rows: list[str]  # in model order
    columns: list[str]  # steps
    values: list[list[float | None]]  # [row][column]; None: not recorded there
    mark: tuple[int, int] | None = None  # (row, column) of the culprit
    note: str = ""


@dataclass
class Node:
    """A node of the module tree with its statistics on both sides (the culprit's path is open)."""

    name: str
    result: str = ""
    error: float | None = None
    stats: list[tuple[str, str, str]] = field(default_factory=list)  # (what, target/A, bench/B)
    children: list[Node] = field(default_factory=list)
    open: bool = False
    culprit: bool = False


@dataclass
class Table:
    """The entries, searchable: ``columns`` name each cell of ``rows``; ``origins`` per row the result file (an
    index into ``files``) and the row of it (1 = the first after the header) (entry names are the file's);
    ``name_column`` and ``result_column`` are the columns the page filters by."""

    columns: list[str]
    rows: list[list[str]]
    files: list[str] = field(default_factory=list)
    origins: list[tuple[int, int]] = field(default_factory=list)
    left_out: int = 0  # rows of the inputs not carried into the page (they are in the files)
    name_column: str = "NPU Name"
    result_column: str = "Result"


@dataclass
class Listing:
    """A short table the page shows whole, as it is: probe locate's stages, acc-check's failing APIs."""

    ident: str  # the section's id in the page
    title: str
    columns: list[str]
    rows: list[list[str]]
    results: list[str] = field(default_factory=list)  # per row: error, warning, pass (its colour), or ""
    note: str = ""


@dataclass
class Report:
    kind: str  # "compare", "monitor compare", "acc-check", "locate"
    title: str
    sources: list[tuple[str, str]]  # (what, path)
    answer: Answer
    counts: list[tuple[str, int]] = field(default_factory=list)
    listings: list[Listing] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    heatmaps: list[HeatMap] = field(default_factory=list)
    tree: Node | None = None
    tree_title: str = ""
    table: Table | None = None


def number(text: object) -> float | None:
    """A cell as a float: ``0.5``, ``12%`` (0.12), ``inf``, ``nan``; ``None`` for ``N/A``, ``unsupported``, ``""``."""
    value = str(text).strip()
    scale = 1.0
    if value.endswith("%"):
        value, scale = value[:-1], 0.01
    try:
        return float(value) * scale
    except ValueError:
        return None


def short(value: float | None, digits: int = 4) -> str:
    """A number for a cell: ``digits`` significant digits, ``-`` for none."""
    if value is None:
        return "-"
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.{digits}g}"

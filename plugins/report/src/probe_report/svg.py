"""Hand-made SVG for the page: line charts (linear or log y) and heat maps, no library, no script needed to see them.

Colours come from the page's CSS classes (``series-a`` ...), so the SVG itself stays small.
"""

from __future__ import annotations

import math
from html import escape

from probe_report.model import Chart, HeatMap, short

WIDTH, HEIGHT = 760, 270
LEFT, RIGHT, TOP, BOTTOM = 80, 16, 34, 44
MAX_DOTS = 160  # series with more points are drawn as a line only


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    step = (high - low) / (count - 1)
    return [low + i * step for i in range(count)]


def _finite(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(x, y) for x, y in points if y is not None and math.isfinite(y)]


def chart(spec: Chart) -> str:
    """One chart as an ``<svg>`` element; a chart with no finite point says so instead of drawing axes alone."""
    values = [p for s in spec.series for p in _finite(s.points)]
    label = escape(spec.title)
    if not values:
        return f'<p class="empty">{label}: nothing to draw (no finite value)</p>'
    xs = [x for x, _ in values] + [x for x, _ in spec.marks]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if spec.log_y:
        positive = [y for _, y in values if y > 0]
        floor = min(positive) / 10 if positive else 1e-12
        transform = (lambda y: math.log10(max(y, floor)))
    else:
        transform = (lambda y: y)
    ys = [transform(y) for _, y in values]
    y0, y1 = min(ys), max(ys)
    if y1 == y0:
        y0, y1 = y0 - (abs(y0) * 0.1 or 1), y1 + (abs(y1) * 0.1 or 1)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (transform(y) - y0) / (y1 - y0) * plot_h

    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{label}" '
           f'data-points="{len(values)}"><title>{label}</title>']
    for i, (start, end, text) in enumerate(spec.bands):
        out.append(f'<rect class="band{i % 2}" x="{px(start) - 0.5:.1f}" y="{TOP}" '
                   f'width="{max(px(end) - px(start) + 1, 1):.1f}" height="{plot_h}"/>'
                   f'<text class="band-label" x="{px(start) + 3:.1f}" y="{TOP + 11}">{escape(text)}</text>')
    for tick in _ticks(y0, y1):
        y = TOP + plot_h - (tick - y0) / (y1 - y0) * plot_h
        text = f"{10 ** tick:.1e}" if spec.log_y else short(tick)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class="tick" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    for tick in sorted({round(t) if x1 - x0 > 10 else round(t, 6) for t in _ticks(x0, x1, 6)}):
        out.append(f'<text class="tick" x="{px(tick):.1f}" y="{TOP + plot_h + 15}" text-anchor="middle">'
                   f'{short(tick)}</text>')
    out.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>'
               f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}"/>'
               f'<text class="axis-label" x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 6}" text-anchor="middle">'
               f'{escape(spec.x_label)}</text>'
               f'<text class="axis-label" transform="rotate(-90)" x="{-(TOP + plot_h / 2):.0f}" y="14" '
               f'text-anchor="middle">{escape(spec.y_label)}{" (log)" if spec.log_y else ""}</text>')
    for series in spec.series:
        out.append(_line(series.points, series.role, px, py))
    for i, (x, text) in enumerate(spec.marks):
        out.append(f'<line class="{"divergence" if i == 0 else "mark"}" x1="{px(x):.1f}" x2="{px(x):.1f}" '
                   f'y1="{TOP}" y2="{TOP + plot_h}"><title>{escape(text)}</title></line>'
                   f'<text class="mark-label" x="{min(px(x) + 4, WIDTH - RIGHT - 150):.1f}" y="{TOP + 24}">'
                   f'{escape(text[:60])}</text>')
    for x, kind, text in spec.anomalies:  # a labelled triangle over the step; what it is on hover
        out.append(f'<path class="anomaly {escape(kind)}" d="M{px(x):.1f},{TOP - 2} l-5,-9 h10 z">'
                   f'<title>{escape(text)}</title></path><text class="anomaly-label" x="{px(x) + 7:.1f}" '
                   f'y="{TOP - 3}">{"NaN/Inf" if kind == "nan-inf" else escape(kind)}</text>')
    for i, series in enumerate(spec.series):
        y = 12 + 0 * i
        x = LEFT + i * 230
        out.append(f'<line class="series-{series.role}" x1="{x}" x2="{x + 18}" y1="{y}" y2="{y}"/>'
                   f'<text class="legend" x="{x + 22}" y="{y + 4}">{escape(series.name[:34])}</text>')
    out.append("</svg>")
    return "".join(out)


def _line(points: list[tuple[float, float]], role: str, px, py) -> str:
    """A series as one path (a gap where a value is not finite) and, when few, a dot per point."""
    parts, pen_down = [], False
    for x, y in points:
        if y is None or not math.isfinite(y):
            pen_down = False
            continue
        parts.append(f'{"L" if pen_down else "M"}{px(x):.1f},{py(y):.1f}')
        pen_down = True
    dots = ""
    finite = _finite(points)
    if len(finite) <= MAX_DOTS:
        dots = "".join(f'<circle class="dot-{role}" cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5"/>' for x, y in finite)
    return f'<path class="series-{role}" d="{"".join(parts)}"/>{dots}'


RAMP = ((255, 247, 188), (254, 178, 76), (189, 0, 38))  # small, middle, large error


def colour(value: float | None, low: float, high: float) -> str:
    """A cell's fill: white where nothing was recorded, grey for no error, yellow to red on a log scale."""
    if value is None:
        return "#ffffff"
    if value <= 0 or (math.isfinite(value) and value < low):
        return "#eeeeee"
    if not math.isfinite(value) or high <= low:
        return "#67000d" if not math.isfinite(value) else "#bd0026"
    t = (math.log10(value) - math.log10(low)) / (math.log10(high) - math.log10(low))
    t = min(max(t, 0.0), 1.0) * 2
    a, b = (RAMP[0], RAMP[1]) if t <= 1 else (RAMP[1], RAMP[2])
    t = t if t <= 1 else t - 1
    return "#%02x%02x%02x" % tuple(round(p + (q - p) * t) for p, q in zip(a, b))


def heat_map(spec: HeatMap) -> str:
    """Rows (modules, model order) x columns (steps): one rectangle per cell, its value in its tooltip."""
    if not spec.rows or not spec.columns:
        return f'<p class="empty">{escape(spec.title)}: nothing to draw</p>'
    finite = [v for row in spec.values for v in row if v is not None and v > 0 and math.isfinite(v)]
    high = max(finite, default=1.0)
    low = max(min(finite, default=1e-12), high * 1e-9)
    label_w = min(8 + 6.8 * max(len(r) for r in spec.rows), 380)
    cell_w, cell_h = max(24.0, min(90.0, 420 / len(spec.columns))), 14
    width = label_w + cell_w * len(spec.columns) + 20
    height = 40 + cell_h * len(spec.rows) + 34
    out = [f'<svg class="heatmap" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" role="img" '
           f'aria-label="{escape(spec.title)}" data-rows="{len(spec.rows)}"><title>{escape(spec.title)}</title>']
    for j, column in enumerate(spec.columns):
        out.append(f'<text class="tick" x="{label_w + (j + 0.5) * cell_w:.1f}" y="30" text-anchor="middle">'
                   f'{escape(column)}</text>')
    for i, (name, values) in enumerate(zip(spec.rows, spec.values)):
        y = 36 + i * cell_h
        shown = name if len(name) * 6.8 + 8 <= label_w else "\u2026" + name[-int((label_w - 14) / 6.8):]
        out.append(f'<text class="row-label" x="{label_w - 4:.0f}" y="{y + 11}" text-anchor="end">{escape(shown)}'
                   f'<title>{escape(name)}</title></text>')
        for j, value in enumerate(values):
            tip = f"{name} \u00b7 {spec.columns[j]}: {'not recorded' if value is None else short(value)}"
            out.append(f'<rect x="{label_w + j * cell_w:.1f}" y="{y}" width="{cell_w - 1:.1f}" height="{cell_h - 1}" '
                       f'fill="{colour(value, low, high)}"><title>{escape(tip)}</title></rect>')
    if spec.mark is not None:
        i, j = spec.mark
        out.append(f'<rect class="culprit-cell" x="{label_w + j * cell_w:.1f}" y="{36 + i * cell_h}" '
                   f'width="{cell_w - 1:.1f}" height="{cell_h - 1}"><title>first divergence</title></rect>')
    y = 36 + len(spec.rows) * cell_h + 12
    for k in range(10):
        value = 10 ** (math.log10(low) + (math.log10(high) - math.log10(low)) * k / 9) if high > low else high
        out.append(f'<rect x="{label_w + k * 14:.0f}" y="{y}" width="14" height="10" fill="{colour(value, low, high)}"/>')
    out.append(f'<text class="tick" x="{label_w - 4:.0f}" y="{y + 9}" text-anchor="end">{short(low)}</text>'
               f'<text class="tick" x="{label_w + 144:.0f}" y="{y + 9}">{short(high)} (grey: none; white: not recorded)'
               f'</text></svg>')
    return "".join(out)

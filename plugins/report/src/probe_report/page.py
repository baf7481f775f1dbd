"""The page: one HTML file, its CSS, script and SVG inline; it loads nothing (no server, no network).

Everything but the entries table is drawn here, so the answer, the curves, the heat maps and the tree show
even with scripts off; the script only filters the entries (carried as JSON in the page).
"""

from __future__ import annotations

import json
from html import escape
from importlib.resources import files

from probe_report import svg
from probe_report.model import Answer, Listing, Node, Report, Table, short


def _asset(name: str) -> str:
    return files("probe_report").joinpath(name).read_text(encoding="utf-8")


def render(report: Report) -> str:
    title = f"probe report: {report.answer.headline}"
    parts = [f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
             f'<meta name="viewport" content="width=device-width, initial-scale=1">'
             f'<title>{escape(title)}</title><style>{_asset("page.css")}</style></head><body><main>'
             f'<h1>probe report \u00b7 {escape(report.title)}</h1><p class="sources">'
             + "".join(f'{escape(what)}: <code>{escape(path)}</code>' for what, path in report.sources) + "</p>",
             _answer(report.answer), *map(_listing, report.listings), _counts(report), _curves(report), _heat_maps(report), _tree(report),
             _entries(report.table), "</main>"]
    if report.table is not None:
        parts.append(f'<script>{_asset("page.js")}</script>')
    parts.append("</body></html>")
    return "".join(parts)


def _answer(answer: Answer) -> str:
    out = [f'<section id="answer" class="{"found" if answer.found else "agree"}">'
           f'<h2 id="headline">{escape(answer.headline)}</h2>']
    if answer.facts:
        out.append('<dl class="facts">' + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in answer.facts)
                   + "</dl>")
    if answer.cause:
        out.append(f'<p id="cause" class="cause"><strong>Cause:</strong> {escape(answer.cause)}</p>')
    if answer.reason:
        label = "<strong>Effect:</strong> " if answer.cause else ""
        out.append(f'<p class="reason">{label}{escape(answer.reason)}</p>')
    source = answer.source
    if source is not None:
        out.append(f'<div class="source-line"><h3>Your code</h3><code>{escape(source.file)}:{source.line} in '
                   f'{escape(source.func)}</code><pre>{escape(source.code)}</pre></div>')
    if answer.stack:  # a frame per line: file:line in function — code
        items = "".join(f'<li class="{"user" if f.user else "lib"}">{escape(f.one_line())}</li>' for f in answer.stack)
        out.append(f"<details><summary>full stack ({len(answer.stack)} frames, innermost first)</summary>"
                   f'<ol class="stack">{items}</ol></details>')
    if answer.next_steps:
        out.append('<h3>Next: zoom in</h3><ol class="next">' + "".join(
            f"<li>{escape(what)}<pre>{escape(command)}</pre></li>" for what, command in answer.next_steps) + "</ol>")
    out += [f'<p class="note">{escape(note)}</p>' for note in answer.notes]
    return "".join(out) + "</section>"


def _counts(report: Report) -> str:
    if not report.counts:
        return ""
    return ('<section id="counts" class="counts"><h2>Counts</h2>' + "".join(
        f'<span class="{escape(k)}">{escape(k)}: {v}</span>' for k, v in report.counts) + "</section>")


def _listing(listing: Listing) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in listing.columns)
    rows = "".join(f'<tr class="{escape(result)}">' + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>"
                   for row, result in zip(listing.rows, listing.results or [""] * len(listing.rows)))
    note = f'<p class="note">{escape(listing.note)}</p>' if listing.note else ""
    return (f'<section id="{escape(listing.ident)}" class="listing"><h2>{escape(listing.title)}</h2>'
            f'<div class="scroll"><table class="listing"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
            f"</div>{note}</section>")


def _curves(report: Report) -> str:
    if not report.charts:
        return ""
    return '<section id="curves"><h2>Curves</h2>' + "".join(svg.chart(c) for c in report.charts) + "</section>"


def _heat_maps(report: Report) -> str:
    if not report.heatmaps:
        return ""
    out = ['<section id="heatmap"><h2>Heat map</h2>']
    for heat in report.heatmaps:
        out.append(f"<h3>{escape(heat.title)}</h3>{svg.heat_map(heat)}")
        if heat.note:
            out.append(f'<p class="note">{escape(heat.note)}</p>')
    return "".join(out) + "</section>"


def _node(node: Node) -> str:
    classes = "node" + (" culprit" if node.culprit else "")
    badge = f'<span class="badge {escape(node.result)}">{escape(node.result)}</span>' if node.result else ""
    error = f' <span class="note">error {short(node.error)}</span>' if node.error is not None else ""
    find = f' <a class="find" href="#entries" data-entry="{escape(node.name)}">rows</a>' if node.result else ""
    stats = ""
    if node.stats:
        stats = ('<table class="stats"><tr><th></th><th>target / A</th><th>bench / B</th></tr>' + "".join(
            f"<tr><td>{escape(w)}</td><td>{escape(a)}</td><td>{escape(b)}</td></tr>" for w, a, b in node.stats)
            + "</table>")
    children = "".join(_node(child) for child in node.children)
    return (f'<details class="{classes}"{" open" if node.open else ""}><summary><code>{escape(node.name)}</code>{badge}'
            f"{error}{find}</summary>{stats}{children}</details>")


def _tree(report: Report) -> str:
    if report.tree is None:
        return ""
    return (f'<section id="tree"><h2>Path to the culprit through the module tree ({escape(report.tree_title)})</h2>'
            f'<p class="note">Open nodes lead to the first divergence; each shows both sides\' statistics.</p>'
            f"{_node(report.tree)}</section>")


def _entries(table: Table | None) -> str:
    if table is None:
        return ""
    at = table.columns.index(table.result_column) if table.result_column in table.columns else None
    results = sorted({row[at] for row in table.rows}) if at is not None else []
    options = "".join(f'<option value="{escape(r.lower())}">{escape(r)}</option>' for r in results if r)
    data = json.dumps({"columns": table.columns, "rows": table.rows, "files": table.files, "origins": table.origins,
                       "left_out": table.left_out, "name_column": table.name_column,
                       "result_column": table.result_column}, separators=(",", ":")).replace("</", "<\\/")
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns) + "<th>in file</th>"
    return ('<section id="entries"><h2>Entries</h2><div class="filters">'
            '<input id="search" type="search" placeholder="filter: words of a name, a result, a step ..." '
            'aria-label="filter entries"><label>result <select id="result-filter"><option value="">any</option>'
            f'{options}</select></label><span id="entries-count" class="note"></span></div>'
            f'<div class="scroll"><table id="entries-table"><thead><tr>{head}</tr></thead><tbody></tbody></table></div>'
            f'<script type="application/json" id="entries-data">{data}</script></section>')

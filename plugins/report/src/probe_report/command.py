"""``probe report OUT_OR_RUNS... -o report.html``: one self-contained HTML page of a compare (plugin ``report``).

Given one folder, it reads what ``probe compare`` or ``probe monitor compare`` wrote there (``summary.json``
says which); given two runs (dumps, or monitor outputs), it compares them first with the installed command
into a scratch folder. Other commands call :func:`write_report` to add the page to their own output.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from probe_core.api import CommandSpec, OutputError, ProbeError, hookimpl, replaced_whole, writing

DEFAULT_NAME = "report.html"


def write_report(folder: str | Path, out_path: str | Path) -> Path:
    """Write the page of the output folder ``folder`` (of probe compare or probe monitor compare) to ``out_path``
    (replaced whole, never left half-written); returns the path written."""
    from probe_report.inputs import read_output

    return _write(read_output(Path(folder)), Path(out_path))


def _write(report: Any, out: Path) -> Path:
    from probe_report.page import render

    if out.is_symlink() or out.is_dir():
        raise OutputError(f"-o {out}: is a {'symbolic link' if out.is_symlink() else 'folder'}; give the path of the "
                          f"HTML file to write, e.g. -o {out / DEFAULT_NAME if out.is_dir() else DEFAULT_NAME}")
    text = render(report)
    with writing(f"the report {out}"):
        out.parent.mkdir(parents=True, exist_ok=True)
        with replaced_whole(out) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Write one self-contained HTML page (no server, no network) of a compare: the first "
                          "divergence with your source line and the next command, curves, a heat map of error per "
                          "module and step, the path through the module tree, and every entry, searchable.")
    parser.add_argument("paths", nargs="+", metavar="OUT_OR_RUNS",
                        help="the output folder of probe compare or probe monitor compare (-o OUT), or two runs "
                             "TARGET BENCH (dumps, or monitor outputs) to compare first")
    parser.add_argument("-o", "--output", default=DEFAULT_NAME, metavar="report.html",
                        help=f"the HTML file to write (default ./{DEFAULT_NAME}; replaced if it exists)")


def run(args: argparse.Namespace) -> int:
    from probe_report.inputs import compared, read_output

    paths = [Path(p) for p in args.paths]
    if len(paths) == 1:
        path = write_report(paths[0], args.output)
    elif len(paths) == 2:
        with compared(paths[0], paths[1], args.registry) as folder:
            report = read_output(folder)
            report.sources = [(what, src) for what, src in report.sources if what not in ("compare", "monitor compare")]
            report.sources.append(("compared by probe report", "in a scratch folder, removed: run the compare with -o "
                                   "OUT to keep its result files"))
            if report.table is not None:
                report.table.files = []
            path = _write(report, Path(args.output))
    else:
        raise ProbeError(f"probe report takes one output folder or two runs, got {len(paths)} paths: "
                         "probe report OUT -o report.html, or probe report TARGET BENCH -o report.html")
    print(f"report: {path}")
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("report", "one self-contained HTML page of a compare or monitor compare: answer, curves, "
                                  "heat map, module tree, entries", configure, run)]

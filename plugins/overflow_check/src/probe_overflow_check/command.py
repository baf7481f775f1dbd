"""``probe overflow-check -i DUMP [-o OUT]``: the first NaN/Inf of a job, across ranks (plugin ``overflow-check``).

msprobe's offline ``overflow_check`` (``nan_analyze`` before it), which also answers to that spelling.
Reads statistics, md5, tensor and overflow_check dumps of PyTorch and MindSpore; writes msprobe's
``anomaly_analyze_{timestamp}.json`` to OUT and prints a table: each rank's first NaN/Inf, where it is
relative to the communication calls, and the job's first.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from probe_core.api import CommandSpec, hookimpl, output_folder

if TYPE_CHECKING:  # the analysis is imported when the command runs: every other command loads this plugin
    from probe_overflow_check.analyze import StepResult
    from probe_overflow_check.scan import Finding

COMMAND = "overflow-check"
HELP = "find the first NaN/Inf of a run across ranks (before, in or after communication)"
DESCRIPTION = f"""{HELP}.

For every step and rank: the first entry, in execution order, that makes a NaN/Inf (its inputs are clean,
an output is not) or, when the rank's first NaN/Inf is already in an entry's inputs, that entry. The ranks'
findings are ordered through their communication entries (Distributed.*): a NaN/Inf a rank computes
before a collective comes before one that arrives through it; ranks tied in the same interval between
collectives ran concurrently, the lowest is named and the others are listed. Writes
OUT/anomaly_analyze_{{timestamp}}.json (msprobe's layout) and prints "no NaN/Inf found" when there is none."""


JOB_FIRST = "FIRST of the job"  # the order of the job's first NaN/Inf (in bold red)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("-i", "--input_path", "--input-path", dest="input_path", required=True, metavar="DUMP",
                        help="a dump root (step*/rank*/dump.json), a step folder, a rank folder or a dump.json")
    parser.add_argument("-o", "--output_path", "--output-path", dest="output_path", default="./output",
                        metavar="OUT", help="folder for anomaly_analyze_*.json (created; default ./output)")
    parser.add_argument("--rank", type=int, nargs="+", metavar="R", help="only these ranks")
    parser.add_argument("--step", type=int, nargs="+", metavar="N", help="only these steps")
    parser.add_argument("--lenient", action="store_true",
                        help="read a damaged dump.json up to the fault (with a warning) instead of stopping")


def _order_text(finding: Finding, result: StepResult, first: StepResult | None) -> str:
    from probe_overflow_check.scan import DURING

    if first is result and finding is result.first:
        return JOB_FIRST
    if finding is result.first:
        return "first of this step"
    if finding in result.concurrent:
        return "concurrent with the step's first"
    return "received it" if finding.phase == DURING else "later"


def _kind_text(finding: Finding) -> str:
    from probe_overflow_check.scan import INHERITED

    tensors = ", ".join(finding.tensors[:3]) + (" ..." if len(finding.tensors) > 3 else "")
    return f"already in its inputs ({tensors})" if finding.kind == INHERITED else tensors


def _print(results: list[StepResult], written: list[Path]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    from probe_core.api import print_table
    from probe_overflow_check.analyze import job_first
    from probe_overflow_check.scan import DURING

    console = Console()
    first = job_first(results)
    ranks = sum(len(result.scans) for result in results)
    if first is None:
        console.print(f"no NaN/Inf found in {ranks} rank dump(s) of {len(results)} step(s)", highlight=False)
        return
    rows = []
    for result in results:
        for finding in result.findings:
            order = _order_text(finding, result, first)
            rows.append(["-" if result.step is None else str(result.step), str(finding.rank), finding.entry.name,
                         _kind_text(finding), finding.where,
                         Text(order, "bold red") if order == JOB_FIRST else order])
    print_table(console, "probe overflow-check: first NaN/Inf of each rank",
                ("step", "rank", "entry", "NaN/Inf", "relative to communication", "order"), rows)
    named = first.first
    step = "" if named.step is None else f"step {named.step}, "
    console.print(f"first NaN/Inf of the job: {step}rank {named.rank}, [bold]{escape(named.entry.name)}[/] "
                  f"({escape(named.where)})", highlight=False)
    if named.phase == DURING:
        console.print("no rank's input to this communication holds NaN/Inf before it: the communication itself "
                      "made it (e.g. a sum that overflows) or a rank it exchanged with was not dumped",
                      highlight=False)
    if first.concurrent:
        others = ", ".join(str(finding.rank) for finding in first.concurrent)
        console.print(f"rank(s) {others} show one at the same point (they ran concurrently; the lowest rank is "
                      "named)", highlight=False)
    for path in written:
        console.print(f"wrote {path}", highlight=False, markup=False)


def _run(args: argparse.Namespace) -> int:
    from probe_overflow_check.analyze import analyze, write_reports

    with output_folder(args.output_path, flag="-o") as out:  # a clean run leaves no empty folder
        results = analyze(args.input_path, ranks=args.rank, steps=args.step, lenient=args.lenient)
        written = write_reports(results, out)
    _print(results, written)
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec(COMMAND, HELP, _configure, _run, aliases=(COMMAND.replace("-", "_"),))]

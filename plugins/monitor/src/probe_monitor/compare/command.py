"""``probe monitor compare A B -o OUT [--rtol R] [--noise-factor F] [--rank R] [--no-xlsx] [--html FILE]
[--summary-only [--incremental]]``."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from probe_core.api import CompareError, add_html_argument, check_html, prepare_output_dir, spans, write_html
from probe_monitor.compare.diff import NOISE_FACTOR, RTOL, compare_runs
from probe_monitor.compare.incremental import compare_incremental, incremental_headline
from probe_monitor.compare.reader import add_grad_norm, describe, has_grad_norm, rank_folders, read_rank
from probe_monitor.compare.report import nothing_in_common, print_table, unmatched_json, write_report


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", metavar="CONFIG",
                        help='config.json whose "plugins" section enables/disables plugins (also after SUBCOMMAND)')
    sub = parser.add_subparsers(dest="monitor_command", metavar="SUBCOMMAND", required=True)
    compare = sub.add_parser("compare", help="name the first step, quantity and parameter where two monitored runs part",
                             description="Align two monitor outputs by rank, step and parameter; write "
                                         "monitor_compare.csv/.xlsx, summary.json and first_divergence.png.")
    compare.add_argument("a", metavar="A", help="monitor output of the run under test (folder of rank folders)")
    compare.add_argument("b", metavar="B", help="monitor output of the benchmark run")
    compare.add_argument("-o", "--output", "--output_path", dest="output", required=True, metavar="OUT")
    compare.add_argument("--rtol", type=float, default=RTOL,
                         help=f"smallest relative difference that can part two runs (default {RTOL:g})")
    compare.add_argument("--noise-factor", type=float, default=NOISE_FACTOR,
                         help="a difference parts when above this many times the quantity's largest difference at "
                              f"earlier steps (default {NOISE_FACTOR:g})")
    compare.add_argument("--rank", type=int, action="append", help="compare only this rank (repeatable)")
    compare.add_argument("--no-xlsx", action="store_true", help="write the CSV only")
    compare.add_argument("--summary-only", action="store_true",
                         help="write summary.json alone (no CSV, XLSX or plot): the verdict a script checks, e.g. "
                              "after every step of a run")
    compare.add_argument("--incremental", action="store_true",
                         help="with --summary-only: keep what was judged in OUT/incremental_state.json and read only "
                              "the rows of steps after it on the next call (a check after every step costs that "
                              "step's rows)")
    add_html_argument(compare, "the monitor compare (where the runs part, curves, heat map, parameters)")


def check_tolerance(flag: str, value: float) -> None:
    """``--rtol`` and ``--noise-factor`` are finite numbers >= 0 (NaN would part nothing, silently)."""
    if not (math.isfinite(value) and value >= 0):
        raise CompareError(f"probe monitor compare: {flag} {value}: must be a finite number >= 0; e.g. {flag} "
                           f"{RTOL if flag == '--rtol' else NOISE_FACTOR:g}")


def run(args: argparse.Namespace) -> int:
    check_tolerance("--rtol", args.rtol)
    check_tolerance("--noise-factor", args.noise_factor)
    check_html(args)
    if args.summary_only and getattr(args, "html", None):
        raise CompareError("probe monitor compare: --html draws from the CSV that --summary-only leaves out; "
                           "drop one of them")
    if args.incremental and not args.summary_only:
        raise CompareError("probe monitor compare: --incremental keeps only what summary.json needs; add "
                           "--summary-only (a final compare with the tables reads everything anyway)")
    out = prepare_output_dir(args.output, flag="-o")
    labels = (args.a, args.b)
    found = [rank_folders(Path(path)) for path in labels]
    chosen = [{r: f for r, f in folders.items() if not args.rank or r in args.rank} for folders in found]
    if not set(chosen[0]) & set(chosen[1]):
        why = f"--rank {spans(args.rank)} leaves no rank in common" if args.rank else "no rank in common to compare"
        raise CompareError(f"probe monitor compare: {args.a} has ranks {spans(found[0]) or 'none'}, {args.b} has "
                           f"{spans(found[1]) or 'none'}; {why}")
    if args.incremental:
        print(incremental_headline(compare_incremental(args, out, chosen)))
        return 0
    sides = [{rank: read_rank(folder) for rank, folder in folders.items()} for folders in chosen]
    with_norm = [has_grad_norm(side) for side in sides]
    for side, has in zip(sides, with_norm):
        if any(with_norm) and not has:
            add_grad_norm(side)
    comparison = compare_runs(*sides, rtol=args.rtol, noise_factor=args.noise_factor)
    if not comparison.pairs:
        raise CompareError(nothing_in_common(unmatched_json(comparison), labels))
    summary = write_report(comparison, out, labels, xlsx=not args.no_xlsx, rtol=args.rtol,
                           noise_factor=args.noise_factor, tables=not args.summary_only)
    print_table(comparison, summary)
    for path, folders in zip(labels, found):
        print(f"probe monitor compare: read {describe(Path(path), folders)}")
    write_html(args, out)
    return 0

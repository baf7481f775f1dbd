"""``probe monitor compare A B -o OUT [--rtol R] [--noise-factor F] [--rank R] [--no-xlsx]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from probe_core.errors import CompareError
from probe_monitor.compare.diff import NOISE_FACTOR, RTOL, compare_runs
from probe_monitor.compare.reader import rank_folders, read_rank
from probe_monitor.compare.report import print_table, write_report


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


def run(args: argparse.Namespace) -> int:
    if args.rtol <= 0 or args.noise_factor < 1:
        raise CompareError("probe monitor compare: --rtol must be > 0 and --noise-factor >= 1")
    sides = []
    for path in (Path(args.a), Path(args.b)):
        folders = rank_folders(path)
        if args.rank:
            folders = {r: f for r, f in folders.items() if r in args.rank}
        sides.append({rank: list(read_rank(folder)) for rank, folder in folders.items()})
    if not set(sides[0]) & set(sides[1]):
        raise CompareError(f"probe monitor compare: {args.a} has ranks {sorted(sides[0])}, {args.b} has "
                           f"{sorted(sides[1])}; no rank in common to compare (see --rank)")
    comparison = compare_runs(*sides, rtol=args.rtol, noise_factor=args.noise_factor)
    summary = write_report(comparison, Path(args.output), (args.a, args.b), xlsx=not args.no_xlsx, rtol=args.rtol,
                           noise_factor=args.noise_factor)
    print_table(comparison, summary)
    return 0

"""``probe compare``: the built-in core command (plugin name ``compare``).

``probe compare TARGET BENCH -o OUT [--fuzzy] [--mapping YAML] [--rank R] [--step N] [--workers K] [--lenient]``;
msprobe's spellings ``-tp/--target_path``, ``-gp/--golden_path``,
``-o/--output_path``, ``-fm/--fuzzy_match``, ``-lm/--layer_mapping`` work too.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from probe_core import hookimpl
from probe_core.errors import CompareError
from probe_core.specs import CommandSpec


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", help="target dump: dump.json, rank folder, step folder or dump root")
    parser.add_argument("bench", nargs="?", help="bench (golden) dump, same forms")
    parser.add_argument("-tp", "--target_path", "--target-path", dest="target_path", help="target dump (msprobe spelling)")
    parser.add_argument("-gp", "--golden_path", "--golden-path", dest="golden_path", help="bench dump (msprobe spelling)")
    parser.add_argument("-o", "--output_path", "--output-path", "--output", dest="output", default="./compare_output",
                        help="folder for compare_result_rank{R}_step{N}.csv/.xlsx and summary.json")
    parser.add_argument("-fm", "--fuzzy", "--fuzzy_match", dest="fuzzy", action="store_true",
                        help="ignore call counts: match calls in order within the same parent")
    parser.add_argument("--mapping", "-lm", "--layer_mapping", dest="mapping", metavar="YAML",
                        help="layer/API name map (msprobe layer-mapping YAML; sections 'api' and 'module' too)")
    parser.add_argument("--rank", type=int, action="append", help="compare only this rank (repeatable)")
    parser.add_argument("--step", type=int, action="append", help="compare only this step (repeatable)")
    parser.add_argument("--workers", type=int, default=1, metavar="K",
                        help="processes comparing entries/tensor files in parallel (default 1)")
    parser.add_argument("--lenient", action="store_true",
                        help="read what is readable of damaged dumps (warn), mark missing tensor files as errors")
    parser.add_argument("--no-xlsx", dest="xlsx", action="store_false", help="write the CSV only")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no summary table")


def _paths(args: argparse.Namespace) -> tuple[Path, Path]:
    target = args.target_path or args.target
    bench = args.golden_path or args.bench
    if args.target_path and args.target and not args.bench:
        bench = bench or args.target  # `probe compare -tp A B`
    if not target or not bench:
        raise CompareError("probe compare needs two dumps: probe compare TARGET BENCH -o OUT "
                           "(or -tp TARGET -gp BENCH)")
    return Path(target), Path(bench)


def _run(args: argparse.Namespace) -> int:
    from probe_core.compare.engine import CompareOptions, run_compare
    from probe_core.compare.output import print_summary

    target, bench = _paths(args)
    if args.workers < 1:
        raise CompareError(f"--workers {args.workers}: give 1 or more")
    options = CompareOptions(
        target=target, bench=bench, output=Path(args.output), fuzzy=args.fuzzy,
        mapping=Path(args.mapping) if args.mapping else None, ranks=args.rank, steps=args.step,
        workers=min(args.workers, os.cpu_count() or 1) if args.workers > 1 else 1, lenient=args.lenient,
        xlsx=args.xlsx, progress=not args.quiet)
    summary = run_compare(options, args.registry)
    if not args.quiet:
        print_summary(summary)
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("compare", "compare two dumps: per-tensor metrics, pass/warning/error, first divergence",
                        _configure, _run)]

"""``probe compare``: the built-in core command (plugin name ``compare``).

``probe compare TARGET BENCH -o OUT [--fuzzy] [--mapping YAML] [--rank R] [--step N] [--workers K]
[--executor local|dask] [--scheduler ADDRESS] [--lenient]
[--rules noise|msprobe] [--noise-reference DUMP [BENCH]]``;
every flag of ``msprobe compare`` (auto mode) is accepted with msprobe's meaning: ``-tp/-gp/-o``,
``-fm``, ``-lm``, ``-cm``, ``-am``, ``-dm``, ``--xlsx``, ``-da``, ``-tensor_log``, ``-m``,
``--config`` (tensor post-processing), ``--consistent_check``/``--backend``.
``-c FILE`` is probe's own config.json here (``--config`` is msprobe's). The flags of msprobe's
``offline_data`` and ``offline_model`` modes (``-fr``, ``--input_data``, ``-ofs``, ...) are refused with a
sentence naming the mode.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from probe_core.api import CommandSpec, CompareError, hookimpl

#: msprobe's ``--mode`` values; probe compares framework dumps, which is msprobe's ``auto``.
MODES = ("auto", "offline_data", "torchair", "offline_model", "atb")
#: msprobe's flags of the modes probe does not have: mode -> (what it compares, its flags).
OTHER_MODES = {
    "offline_data": ("CANN dump data of an offline model, with its fusion rule files",
                     (("-fr", "--fusion_rule_file"), ("-qfr", "--quant_fusion_rule_file"),
                      ("-cfr", "--close_fusion_rule_file"))),
    "offline_model": ("an offline (ONNX/OM) model run on given inputs",
                      (("--input_data",), ("--input_shape",), ("--output_size",), ("--dym_shape_range",),
                       ("-ofs", "--onnx_fusion_switch"))),
}


def _configure(parser: argparse.ArgumentParser) -> None:
    from probe_core.api import add_executor_arguments, add_html_argument, add_selection_arguments

    parser.add_argument("target", nargs="?", help="target dump: dump.json, rank folder, step folder or dump root")
    parser.add_argument("bench", nargs="?", help="bench (golden) dump, same forms")
    parser.add_argument("-tp", "--target_path", "--target-path", dest="target_path", help="target dump (msprobe spelling)")
    parser.add_argument("-gp", "--golden_path", "--golden-path", dest="golden_path", help="bench dump (msprobe spelling)")
    parser.add_argument("-o", "--output_path", "--output-path", "--output", dest="output", default="./compare_output",
                        help="folder for compare_result_rank{R}_{timestamp}.csv (.xlsx with --xlsx) and summary.json")
    parser.add_argument("-m", "--mode", choices=MODES, default="auto",
                        help="msprobe's comparison mode; probe compares framework dumps (auto)")
    parser.add_argument("--xlsx", dest="xlsx", action="store_true",
                        help="also write the result as .xlsx (highlighted rows); CSV only by default, as msprobe")
    parser.add_argument("--no-xlsx", dest="xlsx", action="store_false", help=argparse.SUPPRESS)  # the old default
    parser.add_argument("-fm", "--fuzzy", "--fuzzy_match", dest="fuzzy", action="store_true",
                        help="ignore call counts: match calls in order within the matched parent call (the default "
                             "of the noise judge; with --rules msprobe, which matches by name like msprobe, this "
                             "is msprobe's fuzzy match)")
    parser.add_argument("--mapping", "-lm", "--layer_mapping", dest="mapping", metavar="YAML", nargs="?", const=True,
                        help="layer/API name map (msprobe layer-mapping YAML; sections 'api' and 'module' too); "
                             "without a file: the installed built-in name tables only (MindSpore<->PyTorch with probe-mindspore)")
    parser.add_argument("-cm", "--cell_mapping", dest="cell_mapping", metavar="YAML", nargs="?", const=True,
                        help="Cell->Module names: {target cell name: bench module name}; without a file only "
                             "Cell.->Module. and the built-in class table")
    parser.add_argument("-am", "--api_mapping", dest="api_mapping", metavar="YAML", nargs="?", const=True,
                        help="MindSpore->PyTorch API names: the built-in table, plus a YAML list of "
                             "{ms_api, pt_api, ms_args, pt_args, ms_outputs, pt_outputs} when given")
    parser.add_argument("-dm", "--data_mapping", dest="data_mapping", metavar="YAML",
                        help="{target tensor or entry name: bench tensor or entry name}, e.g. "
                             "'Functional.linear.0.forward.input.0: Functional.linear.0.forward.input.1'")
    parser.add_argument("-da", "--diff_analyze", action="store_true",
                        help="also write diff_analyze_{ns}.json: the first divergent entry of each rank")
    parser.add_argument("-tensor_log", "--is_print_compare_log", dest="tensor_log", action="store_true",
                        help="print one line per compared entry (result and main metric)")
    parser.add_argument("--config", dest="postprocess", metavar="YAML",
                        help="msprobe's tensor post-process config (right_matmul / left_matmul / "
                             "left_right_matmul calibration tensors, tensor mode); probe's config.json is -c")
    parser.add_argument("--consistent_check", action="store_true",
                        help="train vs inference dumps: module names of --backend are mapped")
    parser.add_argument("--backend", choices=("fsdp", "megatron"), help="training backend for --consistent_check")
    add_selection_arguments(parser, "compare")
    add_executor_arguments(parser, "processes in parallel (default 1): one per rank, or over the entries of a "
                                   "single rank; with --executor dask, the local cluster's workers")
    parser.add_argument("--rules", choices=("noise", "msprobe"), default="noise",
                        help="noise (default): an entry is an error when it adds more error than its inputs carry "
                             "and its precision explains, judged step by step; msprobe: msprobe's legend, row by row")
    parser.add_argument("--noise-reference", nargs="+", metavar="DUMP",
                        help="a benign run (compared with the bench) or a benign pair TARGET BENCH: each entry "
                             "counts as an error only with several times the error this pair shows there")
    parser.add_argument("--lenient", action="store_true",
                        help="read what is readable of damaged dumps (warn), mark missing tensor files as errors")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no summary table")
    add_html_argument(parser, "the compare (the answer, curves, heat map, module tree, entries)")
    from probe_core.api import refuse_options

    for mode, (what, flag_sets) in OTHER_MODES.items():
        for flags in flag_sets:
            refuse_options(parser, flags, f"this flag belongs to msprobe's {mode} compare ({what}), which probe "
                                          "does not have; probe compares framework dumps (msprobe's auto mode): "
                                          "drop it, or run msprobe compare -m " + mode)


def _paths(args: argparse.Namespace) -> tuple[Path, Path]:
    target = args.target_path or args.target
    bench = args.golden_path or args.bench
    if args.target_path and args.target and not args.bench:
        bench = bench or args.target  # `probe compare -tp A B`
    if not target or not bench:
        raise CompareError("probe compare needs two dumps: probe compare TARGET BENCH -o OUT "
                           "(or -tp TARGET -gp BENCH)")
    return Path(target), Path(bench)


def _path_or_flag(value):
    return Path(value) if isinstance(value, str) else value


def _warn_unsupported(args: argparse.Namespace) -> None:
    from probe_core.api import ProbeWarning

    if args.mode != "auto":
        warnings.warn(f"-m {args.mode}: msprobe's {args.mode} mode compares CANN/ATB/torchair/offline-model "
                      "data, which needs Ascend tools this machine does not have; probe compares the two paths "
                      "as framework dumps (auto mode)", ProbeWarning, stacklevel=2)
    if args.backend and not args.consistent_check:
        warnings.warn("--backend only matters with --consistent_check; ignored", ProbeWarning, stacklevel=2)


def _run(args: argparse.Namespace) -> int:
    from probe_compare.engine import CompareOptions, run_compare
    from probe_compare.output import print_summary
    from probe_compare.reference import reference_pair
    from probe_core.api import check_html, executor_choice, selection, write_html

    target, bench = _paths(args)
    check_html(args)
    choice = executor_choice(args, CompareError)
    _warn_unsupported(args)
    options = CompareOptions(
        target=target, bench=bench, output=Path(args.output), fuzzy=args.fuzzy,
        mapping=_path_or_flag(args.mapping), ranks=selection(args.rank), steps=selection(args.step),
        workers=choice.workers, executor=choice.kind, scheduler=choice.scheduler, lenient=args.lenient,
        xlsx=args.xlsx, progress=not args.quiet and not args.tensor_log,
        data_mapping=_path_or_flag(args.data_mapping), cell_mapping=_path_or_flag(args.cell_mapping),
        api_mapping=_path_or_flag(args.api_mapping), tensor_log=args.tensor_log, diff_analyze=args.diff_analyze,
        postprocess=_path_or_flag(args.postprocess),
        consistent_backend=(args.backend or "any") if args.consistent_check else None, rules=args.rules,
        noise_reference=reference_pair(args.noise_reference, bench) if args.noise_reference else None,
        process_ends=getattr(args, "process_ends", False))
    summary = run_compare(options, args.registry)
    if not args.quiet:
        print_summary(summary)
    write_html(args, summary["output"], quiet=args.quiet)
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("compare", "compare two dumps: per-tensor metrics, pass/warning/error, first divergence",
                        _configure, _run)]

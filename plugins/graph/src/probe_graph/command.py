"""``probe graph``: build or compare model graphs into a ``.vis.db`` for TensorBoard; ``--serve`` shows it.

Every flag of ``msprobe graph_visualize`` is accepted with its meaning (``-tp/--target_path``,
``-gp/--golden_path``, ``-o/--output_path``, ``-oc``, ``-fm``, ``-lm``, ``-tensor_log``, ``-progress_log``,
``--rank_size/--tp/--pp/--vpp/--order``, ``--file_type db|json``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probe_core.api import CommandSpec, GraphError, hookimpl


def configure(parser: argparse.ArgumentParser) -> None:
    from probe_core.api import add_executor_arguments, add_selection_arguments  # (not at every command's start)

    parser.add_argument("paths", nargs="*", metavar="TARGET [BENCH]",
                        help="dump of the run to inspect, and optionally the bench run to compare against")
    parser.add_argument("-tp", "--target-path", "--target_path", dest="target", metavar="TARGET",
                        help="target dump: rank folder, step folder of rank*, or root of step*")
    parser.add_argument("-gp", "--bench-path", "--golden_path", dest="bench", metavar="BENCH",
                        help="bench dump to compare against (same layout); without it a single graph is built")
    parser.add_argument("-o", "--output", "--output_path", dest="output", metavar="OUT",
                        help="folder for the .vis.db file (created; 750)")
    parser.add_argument("--rules", choices=("noise", "msprobe"), default="noise",
                        help="how nodes are judged, as in probe compare: noise (default) or msprobe's legend "
                             "(which also leaves out the parameters_grad nodes msprobe does not show)")
    parser.add_argument("--noise-reference", nargs="+", metavar="DUMP",
                        help="a benign run (against the bench) or a benign pair TARGET BENCH calibrating the judge, "
                             "as in probe compare")
    parser.add_argument("-oc", "--overflow", "--overflow_check", action="store_true",
                        help="mark overflow levels: medium, high, critical")
    parser.add_argument("-fm", "--fuzzy", "--fuzzy_match", action="store_true",
                        help="match APIs inside matched modules by call order, ignoring call counts")
    parser.add_argument("-lm", "--layer-mapping", "--layer_mapping", nargs="?", const=True, default=None,
                        metavar="YAML", help="cross-suite matching: module paths, class names ignored; a YAML "
                        "'Class: {target_name: bench_name}' renames layers")
    add_selection_arguments(parser, "build (and compare)")
    layout = parser.add_argument_group("parallel merge (one value per side, target first)")
    layout.add_argument("--rank-size", "--rank_size", nargs="+", type=int, metavar="N")
    layout.add_argument("--tp", nargs="+", type=int, metavar="N")
    layout.add_argument("--pp", nargs="+", type=int, metavar="N")
    layout.add_argument("--vpp", nargs="+", type=int, metavar="N")
    layout.add_argument("--order", nargs="+", metavar="ORDER", help="rank order, default tp-cp-ep-dp-pp")
    parser.add_argument("--file_type", "--file-type", choices=("db", "json"), default="db",
                        help="json: write each merged graph (--rank_size build) as a dump, "
                             "OUT/step{S}/rank{R}/{construct,dump,stack}.json, instead of the .vis.db")
    parser.add_argument("-tensor_log", "--is_print_compare_log", dest="tensor_log", action="store_true",
                        help="print one line per compared node (its bench node and precision index)")
    parser.add_argument("-progress_log", "--is_print_progress_log", dest="progress_log", action="store_true",
                        help="print one line per finished graph instead of the progress bar")
    add_executor_arguments(parser, "build graphs in N processes (default 1); with --executor dask, the local "
                                   "cluster's workers")
    parser.add_argument("--serve", metavar="OUT", help="start TensorBoard (tb-graph-ascend) on OUT on 127.0.0.1")
    parser.add_argument("--port", type=int, default=6006, help="port for --serve (default 6006)")


def _pair(values: list | None, name: str, default):
    if not values:
        return default, default
    if len(values) > 2:
        raise GraphError(f"--{name} takes one value per side (target, bench), got {len(values)}")
    return values[0], values[-1]


def _layouts(args: argparse.Namespace):
    """The (target, bench) parallel layouts, or None when no --rank-size is given."""
    from probe_graph.api import DEFAULT_ORDER, Layout

    if not args.rank_size:
        if args.tp or args.pp or args.vpp:
            raise GraphError("--tp/--pp/--vpp need --rank-size (the number of ranks of each side)")
        return None
    sizes, tps, pps = _pair(args.rank_size, "rank-size", 1), _pair(args.tp, "tp", 1), _pair(args.pp, "pp", 1)
    vpps, orders = _pair(args.vpp, "vpp", 1), _pair(args.order, "order", DEFAULT_ORDER)
    layouts = tuple(Layout(sizes[i], tps[i], pps[i], vpps[i], orders[i]) for i in (0, 1))
    return layouts


def _mapping(value):
    if value is None or value is True:
        return value
    from probe_graph.match import load_layer_mapping

    return load_layer_mapping(value)


def _reference(paths: list[str] | None, bench: str) -> tuple[Path, Path] | None:
    """The --noise-reference pair, or None (the compare pipeline that reads it is imported only then)."""
    if not paths:
        return None
    from probe_compare.api import reference_pair

    return reference_pair(paths, bench)


def run(args: argparse.Namespace) -> int:
    from probe_core.api import executor_choice, selection
    from probe_graph.service import GraphOptions, run_graph
    from probe_graph.summary import print_summary

    if args.serve:
        from probe_graph.serve import serve

        return serve(args.serve, args.port)
    if len(args.paths) > 2:
        raise GraphError(f"probe graph takes TARGET and optionally BENCH, got {len(args.paths)} paths")
    target = args.target or (args.paths[0] if args.paths else None)
    bench = args.bench or (args.paths[1] if len(args.paths) > 1 else None)
    if target is None:
        raise GraphError("no target dump: give it as TARGET or -tp PATH (or --serve OUT to view a result)")
    if args.output is None:
        raise GraphError("no output folder: give -o OUT")
    choice = executor_choice(args, GraphError)
    if bench is None and (args.fuzzy or args.layer_mapping is not None):
        raise GraphError("--fuzzy and --layer-mapping need a bench dump (-gp BENCH) to match against")
    if bench is None and args.noise_reference:
        raise GraphError("--noise-reference calibrates a compare: it needs a bench dump (-gp BENCH)")
    layouts = _layouts(args)
    if layouts is not None and args.rank:
        raise GraphError("--rank picks single ranks, --rank-size merges every rank of a step into one graph: "
                         "give one or the other")
    if args.file_type == "json" and (layouts is None or bench is not None):
        raise GraphError("--file_type json writes merged graphs: it needs a build (no -gp) with --rank_size "
                         "(and --tp/--pp/--vpp); drop it to write the .vis.db")
    reference = _reference(args.noise_reference, bench)
    options = GraphOptions(overflow=args.overflow, fuzzy=args.fuzzy, rules=args.rules, layer_mapping=_mapping(args.layer_mapping),
                           layouts=layouts, json_dir=args.output if args.file_type == "json" else None,
                           tensor_log=args.tensor_log, progress_log=args.progress_log, noise_reference=reference,
                           ranks=selection(args.rank), steps=selection(args.step))
    path, summaries = run_graph(target, bench, Path(args.output), options, executor=choice,
                                registry=args.registry, progress=not (args.progress_log or args.tensor_log),
                                process_ends=getattr(args, "process_ends", False))
    print_summary(summaries, str(path), bench is not None)
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("graph", "build or compare model graphs into a .vis.db for TensorBoard (tb-graph-ascend)",
                        configure, run, aliases=("graph_visualize",))]

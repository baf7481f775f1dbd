"""``probe check``: collect a pack, compare two packs, compare two checkpoints.

Also msprobe's ``config_check`` with its flags: ``-d FILE...`` collects, ``-c BENCH TARGET`` (``--compare``)
compares two packs (``*.zip``) or else two checkpoints, ``-o`` names the output (msprobe's defaults).
Registered by :mod:`probe_config_check.plugin` (hook ``probe_commands``); the
work is imported only when an action runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probe_core.api import CheckError


def configure(parser: argparse.ArgumentParser) -> None:
    from probe_core.api import refuse_options

    msprobe = parser.add_argument_group("msprobe's config_check flags (instead of an ACTION)")
    one = msprobe.add_mutually_exclusive_group()
    one.add_argument("-d", "--dump", nargs="*", metavar="FILE", help="= collect -d FILE... (-o default "
                                                                      "config_check_pack.zip)")
    one.add_argument("-c", "--compare", nargs=2, metavar=("BENCH", "TARGET"),
                     help="= compare BENCH TARGET for two .zip packs, else ckpt BENCH TARGET (-o default "
                          "config_check_result, ckpt_similarity.json); probe's config.json goes after an ACTION")
    msprobe.add_argument("-o", "--output", dest="msprobe_output", metavar="OUT", help="the output of -d or -c")
    refuse_options(parser, ("-vc", "--verl-compare", "-vv", "--verl-verify", "-sc", "--slime-compare"),
                   "this flag belongs to msprobe's verl/slime training-log hyperparameter checks, which probe does "
                   "not have; pack the training scripts and configs with -d (collect) and compare the packs with -c")
    sub = parser.add_subparsers(dest="check_command", metavar="ACTION")
    collect = sub.add_parser("collect", help="pack this environment's configuration (env, pip, hyperparameters, ...)")
    collect.add_argument("-d", "--data", nargs="+", default=[], metavar="FILE",
                         help="training shell scripts and YAML/JSON configs to read hyperparameters from")
    collect.add_argument("-o", "--output", default="config_check_pack.zip", help="the zip to write")
    collect.add_argument("-f", "--framework", choices=("pytorch", "mindspore"), default=None,
                         help="the training framework (recorded; optional)")
    compare = sub.add_parser("compare", help="compare two packs; writes result.xlsx and summary.json")
    compare.add_argument("bench", help="the benchmark pack (zip of probe or of msprobe config_check)")
    compare.add_argument("target", help="the pack to check against it (zip of probe or of msprobe)")
    compare.add_argument("-o", "--output", default="config_check_result", help="folder for the results")
    ckpt = sub.add_parser("ckpt", help="compare two checkpoints parameter by parameter, worst first (cosine, L2 "
                                        "and max of the difference, shape, dtype)")
    ckpt.add_argument("bench", help="state_dict file, safetensors file/folder, or Megatron checkpoint folder")
    ckpt.add_argument("target", help="the checkpoint to compare with (same kinds)")
    ckpt.add_argument("-o", "--output", default="ckpt_similarity.json", help="JSON file to write (must not exist)")
    for action in (collect, compare, ckpt):
        action.add_argument("-c", "--config", metavar="CONFIG",
                            help='config.json: "plugins" enables/disables checkers, "config_check" sets options')


def run(args: argparse.Namespace) -> int:
    if args.check_command is None:
        _msprobe_action(args)
    elif args.dump is not None or args.compare:
        raise CheckError(f"probe check {args.check_command}: -d/-c are msprobe's spellings of collect/compare; "
                         "give an ACTION or one of them")
    return {"collect": _collect, "compare": _compare, "ckpt": _ckpt}[args.check_command](args)


def _msprobe_action(args: argparse.Namespace) -> None:
    """msprobe's ``config_check -d FILE...`` / ``-c BENCH TARGET``: the action and the arguments it reads."""
    args.config = None
    if args.dump is not None:
        args.check_command, args.data, args.framework = "collect", args.dump, None
        args.output = args.msprobe_output or "./config_check_pack.zip"
    elif args.compare:
        args.bench, args.target = args.compare
        packs = args.bench.endswith("zip")  # msprobe's test
        args.check_command = "compare" if packs else "ckpt"
        args.output = args.msprobe_output or ("./config_check_result" if packs else "./ckpt_similarity.json")
    else:
        raise CheckError("probe check: name an ACTION (collect, compare or ckpt), or msprobe's -d FILE... or "
                         "-c BENCH TARGET")


def _options(args: argparse.Namespace) -> dict:
    from probe_config_check.dynamic import load_checker_registry

    return load_checker_registry(args.config)[1] if args.config else {}


def _collect(args: argparse.Namespace) -> int:
    from probe_core.api import CheckError
    from probe_core.api import CheckContext
    from rich.console import Console
    from rich.markup import escape

    from probe_config_check.collect import describe, run_collect, snapshot
    from probe_config_check.dynamic import rank_and_world
    from probe_config_check.pack import check_pack_path, write_pack

    for path in args.data:
        if not Path(path).is_file():
            raise CheckError(f"{path}: no such file; -d takes training shell scripts and YAML/JSON configs")
    check_pack_path(args.output, "-o")
    rank, _ = rank_and_world(None)
    ctx = CheckContext(shell_paths=tuple(args.data), framework=args.framework, rank=rank, options=_options(args))
    data = snapshot(run_collect(args.registry, ctx, static_only=True))
    out = write_pack(args.output, {rank: data}, describe(args.registry, data), flag="-o")
    Console().print(f"packed {', '.join(data) or 'nothing'} into [bold]{escape(str(out))}[/]")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from probe_config_check.report import compare_packs, print_table

    results = compare_packs(args.registry, args.bench, args.target, args.output, _options(args))
    print_table(results, Path(args.output))
    return 0


def _ckpt(args: argparse.Namespace) -> int:
    from rich.console import Console

    from probe_config_check.ckpt import compare_checkpoints, print_report, write_result

    result = compare_checkpoints(args.bench, args.target)
    write_result(result, args.output)
    print_report(result, str(args.output), Console())
    return 0


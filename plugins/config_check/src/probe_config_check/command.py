"""``probe check``: collect a pack, compare two packs, compare two checkpoints.

Registered by :mod:`probe_config_check.plugin` (hook ``probe_commands``); the
work is imported only when an action runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probe_core.api import CommandSpec


def _configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="check_command", metavar="ACTION", required=True)
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
    ckpt = sub.add_parser("ckpt", help="compare two checkpoints parameter by parameter (l2, cos, numel, shape)")
    ckpt.add_argument("bench", help="state_dict file, safetensors file/folder, or Megatron checkpoint folder")
    ckpt.add_argument("target", help="the checkpoint to compare with (same kinds)")
    ckpt.add_argument("-o", "--output", default="ckpt_similarity.json", help="JSON file to write (must not exist)")
    for action in (collect, compare, ckpt):
        action.add_argument("-c", "--config", metavar="CONFIG",
                            help='config.json: "plugins" enables/disables checkers, "config_check" sets options')


def _run(args: argparse.Namespace) -> int:
    return {"collect": _collect, "compare": _compare, "ckpt": _ckpt}[args.check_command](args)


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
    from rich.markup import escape

    from probe_config_check.ckpt import compare_checkpoints, write_result

    result = compare_checkpoints(args.bench, args.target)
    write_result(result, args.output)
    worst = min((v["cos"] for v in result.values() if "cos" in v), default=None)
    Console().print(f"compared {len(result)} parameters; lowest cos {worst}; wrote [bold]{escape(args.output)}[/]")
    return 0


CHECK_COMMAND = CommandSpec("check", "config_check: pack an environment, compare two packs, compare checkpoints",
                            _configure, _run)

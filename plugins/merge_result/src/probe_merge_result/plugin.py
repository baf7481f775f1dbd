"""The ``merge_result`` plugin: ``probe merge-result -i RESULTS -o OUT -config merge.yaml`` (msprobe's
``merge_result``; the merge itself is :mod:`probe_merge_result.merge`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from probe_core.api import CommandSpec, hookimpl


def _configure_merge(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input_dir", "--input-dir", dest="input_dir", required=True, metavar="DIR",
                        help="folder of per-rank compare results (compare_result_rank{R}_{timestamp}.xlsx/.csv)")
    parser.add_argument("-o", "--output_dir", "--output-dir", dest="output_dir", required=True, metavar="DIR",
                        help="folder for multi_ranks_compare_merge_{timestamp}.xlsx")
    parser.add_argument("-config", "--config-path", dest="merge_config", required=True, metavar="YAML",
                        help="api: [APIs whose rows to merge]; compare_index: [metrics] (optional)")


def _run_merge(args: argparse.Namespace) -> int:
    from probe_merge_result.merge import merge_results

    path = merge_results(Path(args.input_dir), Path(args.output_dir), Path(args.merge_config))
    print(f"merged results: {path}")
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("merge-result", "merge per-rank compare results into one table per metric",
                        _configure_merge, _run_merge, aliases=("merge_result",))]

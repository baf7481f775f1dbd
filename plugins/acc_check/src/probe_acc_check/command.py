"""``probe acc-check`` (also ``acc_check`` and ``multi_acc_check``, msprobe's names) and
``probe acc-check compare A.csv B.csv`` (also msprobe's ``api_precision_compare -npu A.csv -gpu B.csv``).
The work is imported only when the command runs."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from probe_core.api import add_executor_arguments, add_html_argument, check_html, write_html

DTYPES = ("float16", "bfloat16", "float32", "float64")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="*", metavar="compare A.csv B.csv",
                        help="compare two pre-check results (details or result CSVs) output by output")
    parser.add_argument("-npu", "--npu_csv_path", dest="npu_csv", metavar="A.csv",
                        help="msprobe's api_precision_compare: the run under scrutiny (compare's A.csv)")
    parser.add_argument("-gpu", "--gpu_csv_path", dest="gpu_csv", metavar="B.csv",
                        help="msprobe's api_precision_compare: the trusted run (compare's B.csv)")
    parser.add_argument("-config", "--config_path", dest="config", metavar="CONFIG",
                        help="msprobe's spelling of -c: config.json (its \"plugins\" section applies)")
    parser.add_argument("-api_info", "--api_info_file", "--api-info", dest="api_info", metavar="DUMP",
                        help="the L1/mix dump to pre-check: a dump.json or its folder (PyTorch or MindSpore)")
    parser.add_argument("-o", "--out_path", "--out-path", dest="out_path", default=".", metavar="OUT",
                        help="folder for the result and details CSVs and summary.json (default: .)")
    parser.add_argument("-csv_path", "--result_csv_path", "--csv-path", dest="csv_path", metavar="RESULT.csv",
                        help="resume an interrupted run: its accuracy_checking_result_{timestamp}.csv (appended to)")
    parser.add_argument("-save_error_data", "--save-error-data", dest="save_error_data", action="store_true",
                        help="save inputs and outputs of failing APIs under OUT/error_data/ (.npy)")
    parser.add_argument("--device", default="cpu", help="the device under test: cpu (default), cuda:0, npu:0")
    parser.add_argument("-d", "--device_id", dest="device_ids", type=int, nargs="+", default=[], metavar="ID",
                        help="spread the APIs over these device ids of --device's kind, one worker each")
    parser.add_argument("-n", "--workers", type=int, default=0, metavar="N",
                        help="run APIs in N processes (default: 1, or one per -d id); with --executor dask, the "
                             "local cluster's worker processes")
    add_executor_arguments(parser, None)
    parser.add_argument("--dtype", choices=DTYPES, help="run floating inputs in this dtype instead of the recorded "
                                                        "one (e.g. bfloat16, to test low precision on a CPU)")
    parser.add_argument("--filter", dest="filters", nargs="+", default=[], metavar="NAME",
                        help="only these APIs: shell patterns on Functional.gelu.0, Functional.gelu or gelu")
    parser.add_argument("-f", "--filter_api", dest="filter_api", action="store_true",
                        help="check one call of each API and argument structure (calls differing only in values)")
    parser.add_argument("--generate-missing", dest="generate_missing", action="store_true",
                        help="a tensor-mode dump whose tensor files are missing: check those APIs on values "
                             "generated from their statistics (said in each row's Message) instead of refusing")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the generated inputs (default 1234)")
    parser.add_argument("--step", type=int, help="the step to check when the dump holds several")
    parser.add_argument("--rank", type=int, help="the rank to check when the dump holds several")
    parser.add_argument("-j", "--jit_compile", dest="jit_compile", action="store_true",
                        help="msprobe's torch_npu jit switch: accepted, no effect")
    add_html_argument(parser, "the pre-check (the failing APIs with their standards, every output checked)")


def _compare(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from probe_acc_check.errors import AccCheckError
    from probe_acc_check.precision_compare import compare_results

    if args.npu_csv or args.gpu_csv:
        if args.action or not (args.npu_csv and args.gpu_csv):
            raise AccCheckError("probe acc-check: -npu A.csv and -gpu B.csv go together, without compare A.csv "
                                "B.csv (they are msprobe's api_precision_compare spelling of it)")
        args.action = ["compare", args.npu_csv, args.gpu_csv]
    if len(args.action) != 3 or args.action[0] != "compare":
        raise AccCheckError(f"probe acc-check: unexpected {' '.join(args.action)!r}; use probe acc-check -api_info "
                            f"DUMP, or probe acc-check compare A.csv B.csv")
    found = compare_results(args.action[1], args.action[2], args.out_path)
    Console().print(f"[bold]{found['apis']}[/] APIs: [green]{found['pass']} pass[/], [yellow]{found['warning']} "
                    f"warning[/], [red]{found['error']} error[/], {found['SKIP']} skipped — "
                    f"{escape(str(found['result_csv']))}", highlight=False)
    for api in found["failing"]:
        Console().print(f"  [red]{escape(api)}[/]", highlight=False)
    return 0


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from probe_core.api import executor_choice
    from probe_core.api import ProbeWarning

    from probe_acc_check.errors import AccCheckError
    from probe_acc_check.report import print_report
    from probe_acc_check.runner import CheckOptions, run_check

    if args.action or args.npu_csv or args.gpu_csv or getattr(args, "command", None) == "api_precision_compare":
        return _compare(args)
    if not args.api_info:
        raise AccCheckError("probe acc-check: -api_info DUMP is required (a dump.json or its folder, level L1 or mix)")
    check_html(args)
    if args.jit_compile:
        warnings.warn("-j/--jit_compile only switches torch_npu's jit compile; ignored", ProbeWarning, stacklevel=1)
    workers = args.workers or max(1, len(args.device_ids))
    if workers < 1:
        raise AccCheckError(f"--workers {args.workers}: give a number of processes >= 1")
    choice = executor_choice(args, AccCheckError, workers)
    if choice.kind == "dask" and args.device_ids:
        raise AccCheckError("-d/--device_id gives local worker processes a device each; a Dask cluster's workers "
                            "all run on --device: give each its own through its environment "
                            "(CUDA_VISIBLE_DEVICES, ASCEND_RT_VISIBLE_DEVICES), or leave out --executor/--scheduler")
    options = CheckOptions(args.api_info, args.out_path, args.csv_path, args.save_error_data, workers, args.device,
                           tuple(args.device_ids), args.dtype, tuple(args.filters), args.filter_api, args.seed,
                           args.step, args.rank, choice.kind, choice.scheduler, args.generate_missing)
    console = Console(stderr=True)
    with Progress(TextColumn("acc-check"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  TextColumn("{task.description}"), console=console, transient=True,
                  disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=None)

        def advance(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, description=name)

        summary = run_check(options, args.registry, advance)
    print_report(summary, Console(soft_wrap=True))
    write_html(args, Path(summary["result_csv"]).parent)  # summary.json's folder (a resumed run's, too)
    return 0


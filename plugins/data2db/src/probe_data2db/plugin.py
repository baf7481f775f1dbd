"""The ``data2db`` plugin: ``probe data2db --db DIR --data DIR [--format auto|dump|monitor]`` (msprobe's
``data2db``, with its flags): dump data into ``DIR/dump_data.trend.db``, monitor output into
``DIR/monitor_data.trend.db``, in msprobe's trend-database schema (:mod:`probe_data2db.trenddb`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from probe_core.api import CommandSpec, ConfigError, DumpError, ProbeError, hookimpl, prepare_output_dir


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, metavar="DIR",
                        help="output folder: dump_data.trend.db and/or monitor_data.trend.db (replaced if there)")
    parser.add_argument("--data", required=True, metavar="DIR",
                        help="a dump (step{N}/rank{R}/dump.json ...) or a monitor output folder (probe's rank{R}/ "
                             "or msprobe's {time}-rank{R}-{hash}/ folders of CSV files)")
    parser.add_argument("--format", choices=("auto", "dump", "monitor"), default="auto",
                        help="what --data holds; auto (default) imports whichever of the two is there")
    parser.add_argument("--mapping", metavar="JSON",
                        help='a JSON object {"old text": "new text"} replaced in every name before import')
    parser.add_argument("--micro_step", "--micro-step", dest="micro_step", type=str.lower, choices=("true", "false"),
                        default="true", help="true (default): the step column counts micro steps over the run "
                                             "(each top-level module call of a dump is one); false: the recorded step")
    parser.add_argument("--process_num", "--process-num", dest="process_num", type=int, default=1, metavar="N",
                        help="accepted for msprobe's scripts (1-128); probe imports in one process")


def read_mapping(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    try:
        mapping = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--mapping {path}: cannot read it as JSON ({exc}); give a JSON object "
                          '{"old text": "new text"}') from None
    if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
        raise ConfigError(f"--mapping {path}: expected a JSON object of strings {{\"old text\": \"new text\"}}, "
                          f"got {type(mapping).__name__}")
    return mapping


def _run(args: argparse.Namespace) -> int:
    from probe_data2db.dump_rows import import_dump
    from probe_data2db.monitor_rows import import_monitor, rank_folders

    if not 1 <= args.process_num <= 128:
        raise ConfigError(f"--process_num {args.process_num}: expected 1 to 128")
    data = Path(args.data)
    if not data.is_dir():
        raise ConfigError(f"--data {data}: no such folder; give a dump root or a monitor output folder")
    mapping, micro = read_mapping(args.mapping), args.micro_step == "true"
    db_dir = prepare_output_dir(args.db, flag="--db")
    written = []
    if args.format in ("auto", "monitor"):
        layout, folders = rank_folders(data)
        done = import_monitor(folders, db_dir, mapping, micro) if folders else None
        if done:
            print(f"monitor output, {layout}: {done[1]} rows in {done[0]}")
            written.append(done[0])
        elif args.format == "monitor":
            raise ProbeError(f"--data {data}: no monitor output; expected rank{{R}}/ (probe) or "
                             "{time}-rank{R}-{hash}/ (msprobe) folders holding {metric}_{first}-{last}.csv files")
    if args.format == "dump" or (args.format == "auto" and (not written or any(data.rglob("dump.json")))):
        try:
            path, rows = import_dump(data, db_dir, mapping, micro)
        except DumpError as exc:
            if args.format == "dump" or "no dump.json found" not in str(exc):
                raise
            raise ProbeError(f"--data {data}: neither a dump nor monitor output: no dump.json under it "
                             "(step{N}/rank{R}/dump.json), no rank{R}/ or {time}-rank{R}-{hash}/ folders of "
                             "monitor CSV files") from None
        print(f"dump data: {rows} rows in {path}")
    return 0


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("data2db", "dump data and monitor output into SQLite (msprobe's trend database)",
                        _configure, _run)]

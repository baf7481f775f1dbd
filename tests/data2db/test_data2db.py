"""probe data2db: dumps and monitor output into msprobe's trend database, read back with sqlite3."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tests.core.conftest import run_probe
from tests.data2db.trend_content import differences, trend_content

REPO = Path(__file__).resolve().parents[2]
DUMP = REPO / "tests" / "fixtures" / "msprobe_pytorch_stat_mix"  # msprobe 26.2.0, one step, 4 model calls
MONITOR_CSV = REPO / "tests" / "monitor" / "fixtures" / "msprobe_monitor_csv" / "rank0_out"  # msprobe TrainerMon


def _query(db: Path, sql: str, *args: object) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def _measure(db: Path, target: str, metric: str, step: int, call: int) -> tuple:
    return _query(db, "SELECT norm, max, min, mean FROM trend_data JOIN monitoring_targets USING (target_id) "
                      "JOIN monitoring_metrics USING (metric_id) WHERE target_name = ? AND metric_name = ? "
                      "AND step = ? AND micro_step = ? AND rank = 0", target, metric, step, call)


def test_dump_reads_back_with_the_dumps_statistics(tmp_path):
    done = run_probe("data2db", "--db", "db", "--data", str(DUMP), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    db = tmp_path / "db" / "dump_data.trend.db"
    assert "dump data: 312 rows in db/dump_data.trend.db" in done.stdout
    folder = DUMP / "step0" / "proc11440"
    data = json.loads((folder / "dump.json").read_text())["data"]
    construct = json.loads((folder / "construct.json").read_text())
    tops = [node for node, parent in construct.items() if parent is None and node.startswith("Module")
            and ".forward" in node]
    # each top-level module call is a micro step; the calls inside are counted from 0 again
    assert _query(db, "SELECT max_rank, min_step, max_step, forward FROM global_stats") == \
        [(0, 0, len(tops) - 1, "norm,max,min,mean")]
    linear = data["Functional.linear.0.forward"]["input_args"][0]
    assert _measure(db, "Functional.linear.input.0", "forward", 0, 0) == \
        [(linear["Norm"], linear["Max"], linear["Min"], linear["Mean"])]
    grad = data["Functional.linear.0.backward"]["input"][0]
    assert _measure(db, "Functional.linear.input.0", "backward", 0, 0) == \
        [(grad["Norm"], grad["Max"], grad["Min"], grad["Mean"])]
    [weight] = data["Module.head.Linear.parameters_grad.0"]["weight"]  # msprobe 26.2 writes [record]
    head_step = tops.index("Module.head.Linear.forward.0")  # its forward's micro step (the parts run in turn)
    assert _measure(db, "Module.head.Linear.weight", "parameters_grad", head_step, 0) == \
        [(weight["Norm"], weight["Max"], weight["Min"], weight["Mean"])]
    # the viewer's filters: a module's layer and path, an API's name
    tags = set(_query(db, "SELECT tag_name, category FROM monitoring_tags JOIN tag_target_mapping USING (tag_id) "
                          "JOIN monitoring_targets USING (target_id) WHERE target_name = ?",
                      "Module.blocks.0.ln1.LayerNorm.input.0"))
    assert tags == {("Module", "default"), ("blocks.0", "layer"), ("ln1.LayerNorm", "module"), ("input.0", "index")}
    assert ("Functional.linear", "function") in set(_query(db, "SELECT tag_name, category FROM monitoring_tags"))


def test_without_micro_steps_the_step_and_counts_are_as_recorded(tmp_path):
    done = run_probe("data2db", "--db", "db", "--data", str(DUMP), "--micro_step", "false", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    db = tmp_path / "db" / "dump_data.trend.db"
    assert _query(db, "SELECT DISTINCT step FROM trend_data") == [(0,)]
    counts = {int(name.split(".")[2]) for name in json.loads((DUMP / "step0" / "proc11440" / "dump.json")
                                                                .read_text())["data"] if name.startswith("Functional.linear.")}
    assert {c for (c,) in _query(db, "SELECT DISTINCT micro_step FROM monitoring_targets WHERE target_name = ?",
                                 "Functional.linear.input.0")} == counts


def _monitor_lines(folder: Path) -> int:
    return sum(len(path.read_text().splitlines()) - 1 for path in folder.glob("*.csv"))


def test_monitor_output_in_either_layout_reads_back_the_same(tmp_path):
    probes, msprobes = tmp_path / "probe", tmp_path / "msprobe"
    shutil.copytree(MONITOR_CSV, probes / "rank0")
    shutil.copytree(MONITOR_CSV, msprobes / "Nov28_10-00-00-rank0-3f2a")
    done = [run_probe("data2db", "--db", name + "_db", "--data", str(tmp_path / name), cwd=tmp_path)
            for name in ("probe", "msprobe")]
    assert [d.returncode for d in done] == [0, 0], done[1].stderr
    assert "probe's layout (rank{R}/)" in done[0].stdout and "msprobe's layout" in done[1].stdout
    dbs = [tmp_path / f"{name}_db" / "monitor_data.trend.db" for name in ("probe", "msprobe")]
    assert differences(trend_content(dbs[0]), trend_content(dbs[1])) == {}
    assert _query(dbs[0], "SELECT count(*) FROM trend_data") == [(_monitor_lines(MONITOR_CSV),)]
    line = (MONITOR_CSV / "exp_avg_1-1.csv").read_text().splitlines()[1].split(",")  # vpp,name,step,norm,min,max
    got = _query(dbs[0], "SELECT step, norm, min, max FROM trend_data JOIN monitoring_targets USING (target_id) "
                         "JOIN monitoring_metrics USING (metric_id) WHERE metric_name = 'exp_avg' AND "
                         "target_name = ? AND step = ?", line[1], int(line[2]))
    assert got == [(int(line[2]), float(line[3]), float(line[4]), float(line[5]))]


def test_bad_input_is_one_line_naming_the_flag(tmp_path):
    (tmp_path / "empty").mkdir()
    done = run_probe("data2db", "--db", "db", "--data", "empty", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--data empty: neither a dump nor monitor output" in done.stderr
    done = run_probe("data2db", "--db", "db", "--data", str(DUMP), "--format", "monitor", cwd=tmp_path)
    assert done.returncode == 2 and "no monitor output; expected rank{R}/" in done.stderr
    (tmp_path / "map.json").write_text('["not", "an object"]')
    done = run_probe("data2db", "--db", "db", "--data", str(DUMP), "--mapping", "map.json", cwd=tmp_path)
    assert done.returncode == 2 and "--mapping map.json: expected a JSON object" in done.stderr
    assert not (tmp_path / "db" / "dump_data.trend.db").exists()


def test_mapping_renames_and_a_second_import_replaces_the_first(tmp_path):
    (tmp_path / "map.json").write_text(json.dumps({"blocks.": "layers."}))
    for _ in range(2):
        done = run_probe("data2db", "--db", "db", "--data", str(DUMP), "--mapping", "map.json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    db = tmp_path / "db" / "dump_data.trend.db"
    names = {name for (name,) in _query(db, "SELECT target_name FROM monitoring_targets")}
    assert "Module.layers.0.ln1.LayerNorm.input.0" in names and not any("blocks." in n for n in names)
    assert _query(db, "SELECT count(*) FROM trend_data") == [(312,)]
    assert [p.name for p in (tmp_path / "db").iterdir()] == ["dump_data.trend.db"]  # no temporary file left


def test_the_newest_run_of_a_rank_is_chosen_by_its_date_not_its_name(tmp_path):
    """msprobe's folders start with the month's name and no year: ``Dec`` sorts before ``Feb`` as text and after
    ``Jan`` by month. The year comes from the folder's modification time (the run wrote it at or after its
    start): a run tagged 31 December still writing on 1 January is older than the one tagged 1 January."""
    import os
    import time

    from probe_data2db.monitor_rows import rank_folders

    def at(text: str) -> float:
        return time.mktime(time.strptime(text, "%Y-%m-%d %H:%M"))

    written = {"Dec01_09-00-00-rank0-bb": "2025-12-01 10:00", "Feb03_10-00-00-rank0-aa": "2026-02-03 11:00",
               "Apr09_11-00-00-rank1-cc": "2026-04-09 12:00",
               "Dec31_23-50-00-rank2-dd": "2026-01-01 00:30", "Jan01_00-10-00-rank2-ee": "2026-01-01 00:20"}
    for name, when in written.items():
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (at(when), at(when)))
    layout, folders = rank_folders(tmp_path)
    assert layout.startswith("msprobe's layout")
    assert {rank: folder.name for rank, folder in folders.items()} == {0: "Feb03_10-00-00-rank0-aa",
                                                                       1: "Apr09_11-00-00-rank1-cc",
                                                                       2: "Jan01_00-10-00-rank2-ee"}

"""The CLI process leaves its graphs to its end (never freed, frozen out of the collector); a caller of the CLI's
``main`` in its own process gets them freed as before, and both write the same rows."""

from __future__ import annotations

import gc
import sqlite3

from probe_core.cli import main
from tests.graph.helpers import only_db, run_probe


def _all_rows(db) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall() for table in tables}
    finally:
        conn.close()


def test_in_process_main_frees_its_graphs_and_writes_the_rows_the_cli_does(tmp_path, torch_pair):
    target, bench = torch_pair
    run_probe("-tp", target.folder, "-gp", bench.folder, "-o", tmp_path / "cli")  # the process leaves its graphs
    frozen = gc.get_freeze_count()

    assert main(["graph", "-tp", str(target.folder), "-gp", str(bench.folder), "-o", str(tmp_path / "inproc")]) == 0

    assert gc.get_freeze_count() == frozen  # nothing frozen in a process that goes on
    cli, inproc = _all_rows(only_db(tmp_path / "cli")), _all_rows(only_db(tmp_path / "inproc"))
    assert len(cli["tb_nodes"]) > 100
    assert cli == inproc

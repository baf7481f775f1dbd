"""Single-graph build: probe's .vis.db against msprobe's for the same dump; viewer requirements; errors."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path

from tests.graph.helpers import MS_DUMP, MSPROBE_DB, TORCH_DUMP, copy_dump, only_db, rows, run_probe


def _schema(db: Path) -> dict[str, list[tuple[str, str]]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return {t: [(c[1], c[2]) for c in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    finally:
        conn.close()


def test_same_schema_and_node_set_as_msprobe(tmp_path: Path) -> None:
    run_probe("-tp", TORCH_DUMP, "-o", tmp_path / "out")
    ours = only_db(tmp_path / "out")
    assert _schema(ours) == _schema(MSPROBE_DB)
    assert set(_schema(ours)) == {"tb_nodes", "tb_config", "tb_stack"}

    def node_set(db: Path) -> set[tuple[str, str, str]]:
        return {(name, row["up_node"], row["node_type"]) for (_, name), row in rows(db).items()}

    theirs = node_set(MSPROBE_DB)
    assert len(theirs) == 164
    assert node_set(ours) == theirs
    # same children order, stacks, statistics and micro-steps too
    a, b = rows(MSPROBE_DB), rows(ours)
    for key, row in a.items():
        assert json.loads(b[key]["sub_nodes"] or "[]") == json.loads(row["sub_nodes"] or "[]"), key
        assert json.loads(b[key]["input_data"]) == json.loads(row["input_data"]), key
        assert json.loads(b[key]["output_data"]) == json.loads(row["output_data"]), key
        assert b[key]["node_order"] == row["node_order"], key
        assert b[key]["stack_id"] == row["stack_id"], key


def test_file_meets_viewer_requirements(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_probe(TORCH_DUMP, "-o", out)
    db = only_db(out)
    assert db.name.startswith("build_")
    assert stat.S_IMODE(db.stat().st_mode) == 0o640
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    assert not any(p.name.endswith(("-wal", "-shm", ".tmp")) for p in out.iterdir())
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        assert db.read_bytes()[18:20] == b"\x02\x02"  # file format versions 2/2: WAL journal mode
        roots = conn.execute("SELECT node_name FROM tb_nodes WHERE up_node = ''").fetchall()
        assert roots == [("DefaultModel",)]
        missing = conn.execute("SELECT COUNT(*) FROM tb_nodes WHERE stack_id NOT IN (SELECT id FROM tb_stack)")
        assert missing.fetchone()[0] == 0
        config = conn.execute("SELECT graph_type, overflow_check, rank_list, step_list FROM tb_config").fetchall()
        assert config == [("build", 0, "[0]", "[0]")]
    finally:
        conn.close()


def test_mindspore_dump_builds_cells(tmp_path: Path) -> None:
    run_probe("-tp", MS_DUMP, "-o", tmp_path / "out")
    nodes = rows(only_db(tmp_path / "out"))
    names = {name for _, name in nodes}
    assert "Cell.blocks.0.Block.forward.0" in names
    api = nodes[("NPU", "Primitive.layer_norm.LayerNorm.0.forward")]
    assert api["up_node"] == "Cell.blocks.0.ln1.LayerNorm.forward.0" and api["node_type"] == "1"
    grad = nodes[("NPU", "Cell.head.Dense.parameters_grad.0")]
    assert grad["up_node"] == "Cell.head.Dense.backward.0"
    assert json.loads(grad["input_data"])  # the gradients' statistics


def test_overflow_marks_critical_where_inf_starts(tmp_path: Path) -> None:
    dump = copy_dump(TORCH_DUMP, tmp_path / "dump" / "step0" / "rank0")
    data = dump.load("dump.json")
    inf = float("inf")
    for name in ("Functional.gelu.0.forward", "Module.blocks.0.mlp.fc2.linear.Linear.forward.0",
                 "Functional.linear.3.forward"):
        entry = data["data"][name]
        if name != "Functional.gelu.0.forward":
            entry["input_args"][0]["Max"] = inf  # downstream of the Inf
        entry["output"][0]["Max"] = inf
    dump.save("dump.json", data)
    done = run_probe("-tp", dump.folder, "-o", tmp_path / "out", "--overflow")
    nodes = rows(only_db(tmp_path / "out"))
    level = {name: row["overflow_level"] for (_, name), row in nodes.items()}
    assert level["Functional.gelu.0.forward"] == "critical"
    assert level["Functional.linear.3.forward"] == "high"
    assert level["Functional.linear.2.forward"] is None  # before the Inf
    first = min((row["node_order"], name) for (_, name), row in nodes.items() if row["overflow_level"] == "critical")
    assert first[1] == "Functional.gelu.0.forward"
    assert "Functional.gelu.0.forward" in done.stdout  # the summary names it


def test_l1_dump_without_construct_is_a_clear_error(tmp_path: Path) -> None:
    dump = copy_dump(TORCH_DUMP, tmp_path / "rank0")
    (dump.folder / "construct.json").write_text("{}")
    done = run_probe("-tp", dump.folder, "-o", tmp_path / "out", check=False)
    assert done.returncode == 2
    assert "construct.json" in done.stderr and "L0 or mix" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_stack_json_is_a_clear_error(tmp_path: Path) -> None:
    dump = copy_dump(TORCH_DUMP, tmp_path / "rank0")
    (dump.folder / "stack.json").unlink()
    done = run_probe("-tp", dump.folder, "-o", tmp_path / "out", check=False)
    assert done.returncode == 2 and "stack.json" in done.stderr and "Traceback" not in done.stderr


def test_step_folder_without_ranks_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "dump" / "step0" / "notes").mkdir(parents=True)
    done = run_probe("-tp", tmp_path / "dump", "-o", tmp_path / "out", check=False)
    assert done.returncode == 2 and "rank" in done.stderr and "Traceback" not in done.stderr


def test_output_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    done = run_probe("-tp", TORCH_DUMP, "-o", tmp_path / "link", check=False)
    assert done.returncode == 2 and "symbolic link" in done.stderr
    assert not list(real.iterdir())

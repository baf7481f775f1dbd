"""What a trend database says, independent of its row ids and insertion order: for comparing the databases of
probe data2db and msprobe data2db, and for reading one back in tests."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path


def _stats(value: str | int) -> object:
    return set(value.split(",")) if isinstance(value, str) else value


def trend_content(path: Path) -> dict[str, object]:
    conn = sqlite3.connect(path)
    try:
        targets = {i: (name, vpp, micro) for i, name, vpp, micro in conn.execute("SELECT * FROM monitoring_targets")}
        metrics = dict(conn.execute("SELECT metric_id, metric_name FROM monitoring_metrics"))
        cursor = conn.execute("SELECT * FROM trend_data")
        stats = [d[0] for d in cursor.description][4:]
        trend = {(rank, step, targets[t], metrics[m]): dict(zip(stats, values))
                 for rank, step, t, m, *values in cursor}
        tags = {i: (name, category, metrics[m]) for i, name, category, m in conn.execute("SELECT * FROM monitoring_tags")}
        mapping = {(tags[tag], targets[target]) for tag, target in conn.execute("SELECT * FROM tag_target_mapping")}
        cursor = conn.execute("SELECT * FROM global_stats")
        global_stats = {d[0]: _stats(v) for d, v in zip(cursor.description, cursor.fetchone())}
    finally:
        conn.close()
    return {"metrics": set(metrics.values()), "targets": set(targets.values()), "trend": trend,
            "tags": set(tags.values()), "tag_mapping": mapping, "global_stats": global_stats}


def differences(a: dict[str, object], b: dict[str, object]) -> dict[str, object]:
    """Per part, what differs (empty when the two databases say the same); statistics compared to 1e-12."""
    out = {}
    for part in a:
        if part == "trend":
            keys = a[part].keys() ^ b[part].keys()
            values = [k for k in a[part].keys() & b[part].keys() if not _same_row(a[part][k], b[part][k])]
            if keys or values:
                out[part] = {"only_one_side": sorted(keys, key=str)[:5], "values_differ": sorted(values, key=str)[:5],
                             "counts": (len(a[part]), len(b[part]), len(keys), len(values))}
        elif a[part] != b[part]:
            if isinstance(a[part], set):
                out[part] = {"only_first": sorted(a[part] - b[part], key=str)[:5],
                             "only_second": sorted(b[part] - a[part], key=str)[:5]}
            else:
                out[part] = (a[part], b[part])
    return out


def _same_row(x: dict, y: dict) -> bool:
    if x.keys() != y.keys():
        return False
    for key in x:
        u, v = x[key], y[key]
        if (u is None) != (v is None) or (u is not None and not math.isclose(u, v, rel_tol=1e-12, abs_tol=0)):
            return False
    return True

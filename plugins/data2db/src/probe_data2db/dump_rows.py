"""Dump data (probe's or msprobe's ``step{N}/rank{R}|proc{pid}/dump.json``) into the trend database as msprobe's
``data2db`` puts it there.

* Metrics ``forward`` (``recompute`` for an entry marked ``is_recompute``), ``backward``, ``parameters_grad``;
  statistics norm, max, min, mean of every float16/float32/bfloat16 tensor that is a top-level argument
  (``input_args``, ``output``, ``parameters``; backward ``input``, ``output``) or a parameter gradient.
* Target names drop the direction and the call count: ``Functional.linear.3.forward`` input 0 is
  ``Functional.linear.input.0``, the count goes to the target's ``micro_step`` column.
* With micro steps (the default), each top-level ``Module``/``Cell``/``optimizer`` node of construct.json starts
  a micro step: the step column counts micro steps over the whole run and the calls inside one micro step are
  counted again from 0; without, the step column is the dump's step and the counts stay as recorded.
* Ranks are the ``rank{R}`` folders' numbers; ``proc{pid}`` folders (a run without torch.distributed) are numbered
  after the highest rank, in pid order.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probe_core.api import RankDump, discover

from probe_data2db.trenddb import DUMP_DB, TrendDB

METRICS = ("forward", "backward", "recompute", "parameters_grad")
STATS = ("norm", "max", "min", "mean")
TENSOR_TYPES = {"torch.Tensor", "mindspore.Tensor", "mindtorch.Tensor"}
FLOAT_DTYPES = {"Float16", "Float32", "BFloat16", "torch.float16", "torch.float32", "torch.bfloat16"}
ROOT_PREFIXES = ("Module", "Cell", "optimizer")
MODULE_WORDS = ("Module", "Cell")
_PROC = re.compile(r"^proc(\d+)$")


def numbered_ranks(dumps: list[RankDump]) -> list[tuple[int, RankDump]]:
    """(rank, dump) of one step's dumps: rank folders by number, then proc folders after them by pid."""
    ranked = sorted((d.rank, d) for d in dumps if d.rank is not None)
    procs = sorted((int(m.group(1)) if (m := _PROC.match(d.folder.name)) else 0, i, d)
                   for i, d in enumerate(dumps) if d.rank is None)
    first = ranked[-1][0] + 1 if ranked else 0
    return ranked + [(first + i, d) for i, (_, _, d) in enumerate(procs)]


def micro_steps(construct: Mapping[str, str | None]) -> dict[str, int]:
    """Node -> the micro step (0, 1, ...) of its top-level Module/Cell/optimizer node; backward and
    parameters_grad nodes belong to their forward's."""
    parents: dict[str, Any] = {}
    count = 0
    for node, parent in construct.items():
        if parent is not None:
            parents[node] = parent
        elif ".backward" in node:
            parents[node] = None
        elif node.startswith(ROOT_PREFIXES):
            parents[node], count = count, count + 1

    def root(node: Any) -> Any:
        seen = set()
        while isinstance(node, str):
            node = node.replace(".backward", ".forward").replace(".parameters_grad", ".forward")
            if node not in parents or node in seen:
                return None if node in seen else node
            seen.add(node)
            node = parents[node]
        return node

    return {node: step for node in construct if isinstance(step := root(node), int)}


def _numbered(key: str) -> tuple[str, int] | None:
    """(key with its count as ``{}``, count) for ``...Linear.forward.3`` and ``Tensor.add.3.forward``."""
    parts = key.split(".")
    for position in (len(parts) - 1, len(parts) - 2):
        if position >= 0 and parts[position].isdigit():
            return ".".join(parts[:position] + ["{}"] + parts[position + 1:]), int(parts[position])
    return None


def recounted(steps: Mapping[str, int]) -> dict[str, str]:
    """Node -> its name with the call count counted from 0 again inside its micro step (same call, same order)."""
    groups: dict[tuple[int, str, bool], list[tuple[int, str]]] = defaultdict(list)
    for node, step in steps.items():
        found = _numbered(node)
        groups[(step, found[0] if found else node, found is not None)].append((found[1] if found else 0, node))
    names = {}
    for (_, pattern, numbered), calls in groups.items():
        for new, (_, node) in enumerate(sorted(calls, key=lambda call: call[0])):
            names[node] = pattern.replace("{}", str(new), 1) if numbered else node
    return names


def metric_of(key: str, data: Mapping[str, Any], mapping: Mapping[str, str]) -> tuple[str | None, str]:
    """(metric, key without its direction) of an entry name."""
    for old, new in mapping.items():
        key = key.replace(old, new)
    for direction in ("forward", "backward"):
        if f".{direction}." in key or key.endswith(f".{direction}"):
            metric = "recompute" if direction == "forward" and data.get("is_recompute", False) else direction
            return metric, key.replace(f".{direction}.", ".").replace(f".{direction}", "")
    if key.endswith("parameters_grad"):
        return "parameters_grad", key.replace(".parameters_grad", "")
    parts = key.split(".")
    if len(parts) >= 3 and parts[-2] == "parameters_grad":
        return "parameters_grad", ".".join(parts[:-2] + ([parts[-1]] if parts[-1].isdigit() else []))
    return None, key


def _tensor(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        value = value[0]  # an older layout: [tensor]
    if isinstance(value, dict) and value.get("type") in TENSOR_TYPES and value.get("dtype") in FLOAT_DTYPES:
        return value
    return None


def tensors_of(metric: str, data: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(target suffix, tensor record) of the tensors an entry contributes."""
    if metric == "parameters_grad":
        pairs = [(f".{name}", value) for name, value in data.items()]
    else:
        groups = (("input_args", "input"), ("output", "output")) if metric != "backward" else \
            (("input", "input"), ("output", "output"))
        pairs = [(f".{label}.{i}", value) for key, label in groups
                 if isinstance(data.get(key), list) for i, value in enumerate(data[key])
                 if isinstance(value, dict)]
        if metric != "backward" and isinstance(data.get("parameters"), dict):
            pairs += [(f".parameters.{name}", value) for name, value in data["parameters"].items()]
    return [(suffix, tensor) for suffix, value in pairs if (tensor := _tensor(value)) is not None]


def dump_tags(name: str) -> set[tuple[str, str]]:
    """The viewer's tags of a dump target: its index (``input.0``), ``Module``/``Cell``/``parameters``
    (default), an API's name (function), a module's layers (``blocks.0``) and the module paths between them."""
    parts = name.split(".")
    if len(parts) < 3:
        return set()
    tags = {(".".join(parts[-2:]), "index")}
    if "parameters" in parts:
        tags.add(("parameters", "default"))
    words = [part for part in parts[:-2] if part not in MODULE_WORDS]
    tags |= {(part, "default") for part in parts[:-2] if part in MODULE_WORDS}
    if not words:
        return set()
    if len(words) == len(parts) - 2:  # no Module/Cell: an API
        return tags | {(".".join(words), "function")}
    done = [-1]
    for i, part in enumerate(words):
        if not part.isdigit():
            continue
        if i > 0 and i - 1 not in done:
            tags.add((f"{words[i - 1]}.{part}", "layer"))
            if before := ".".join(words[done[-1] + 1:i - 1]):
                tags.add((before, "module"))
        done.append(i)
    if rest := ".".join(words[done[-1] + 1:]):
        tags.add((rest, "module"))
    return tags


def import_dump(data: Path, db_dir: Path, mapping: Mapping[str, str], use_micro_steps: bool) -> tuple[Path, int]:
    """Write ``db_dir/dump_data.trend.db`` from the dump under ``data``; returns (its path, rows stored).
    Raises DumpError when ``data`` holds no dump."""
    by_step: dict[int, list[RankDump]] = defaultdict(list)
    for dump in discover(data):
        by_step[dump.step if dump.step is not None else 0].append(dump)
    with TrendDB(db_dir / DUMP_DB, METRICS, STATS) as db:
        start = max_rank = 0
        for step in sorted(by_step):
            start = start if use_micro_steps else step
            counted = []
            for rank, dump in numbered_ranks(by_step[step]):
                max_rank = max(max_rank, rank)
                counted.append(_import_rank(db, dump, rank, start, mapping, use_micro_steps))
            start += max(counted) if use_micro_steps else 0
        rows = db.finish({"max_rank": max_rank, "min_step": 0 if use_micro_steps else min(by_step),
                          "max_step": start - 1 if use_micro_steps else start,
                          **{metric: STATS for metric in METRICS}}, dump_tags)
    return db.path, rows


def _import_rank(db: TrendDB, dump: RankDump, rank: int, start: int, mapping: Mapping[str, str],
                 use_micro_steps: bool) -> int:
    """Store one rank's entries; returns how many micro steps its dump holds."""
    steps = micro_steps(dump.construct) if use_micro_steps else {}
    names = recounted(steps)
    for entry in dump.entries():
        if not isinstance(entry.data, dict):
            continue
        key, node = names.get(entry.name), entry.name
        if not names:
            key = entry.name
        elif key is None and "parameters_grad" in entry.name:  # not in construct.json: its forward's step
            key, node = entry.name, entry.name.replace(".parameters_grad", ".forward")
        if key is None:
            continue
        metric, key = metric_of(key, entry.data, mapping)
        if metric is None:
            continue
        prefix, _, count = key.rpartition(".")
        target_name, call = (prefix, int(count)) if count.isdigit() and prefix else (key, 0)
        for suffix, tensor in tensors_of(metric, entry.data):
            db.add(rank, start + steps.get(node, 0), metric, (target_name + suffix, 0, call),
                   (tensor.get(stat.capitalize()) for stat in STATS))
    return max(steps.values(), default=0) + 1

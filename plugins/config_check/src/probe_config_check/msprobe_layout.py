"""msprobe's config_check pack layout: read from msprobe's zips, written beside probe's own members.

msprobe 26.2 (``msprobe config_check -d``, ``ConfigChecker``) packs these members::

    env                                           JSON: environment variable -> value
    pip                                           text: one "Name=version" line per distribution
    hyperparameters/hyperparameters_static.json   JSON: argument name -> value (scripts, YAML)
    hyperparameters/hyperparameters_dynamic.json  JSON: Megatron's get_args()
    weights/step{S}/rank{R}/weight.json           JSON: parameter -> {max, min, mean, norm}
    dataset/step{S}/rank{R}/dataset.json          JSON: {"args": {"0": {max, min, mean, norm}}, "kwargs": {}}
    random/rank{R}.json                           JSON: api -> [{"count": N, "stack": ["File P, line L, in F, CODE"]}]

``env``, ``pip`` and ``hyperparameters`` come from rank 0 only; the step is the
forward call (micro-step). :func:`to_members` writes probe's data in this
layout (so ``msprobe config_check -c`` reads probe's packs) and
:func:`from_members` turns msprobe's members into the data of probe's
built-in checkers, filtered as probe's own collection is (environment
prefixes, secrets redacted, hyperparameter names normalised).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from probe_core.api import CheckError, loads

from probe_config_check import env, hyperparameters, packages, rng
from probe_config_check.common import STAT_KEYS
from probe_config_check.weights import per_step

ENV, PIP = "env", "pip"
HYPERPARAMETERS = "hyperparameters/hyperparameters_{}.json"
_HYPER = re.compile(r"^hyperparameters/hyperparameters_(static|dynamic)\.json$")
_WEIGHTS = re.compile(r"^weights/step(\d+)/rank(\d+)/weight\.json$")
_DATASET = re.compile(r"^dataset/step(\d+)/rank(\d+)/dataset\.json$")
_RANDOM = re.compile(r"^random/rank(\d+)\.json$")
_FRAME = re.compile(r"^File (?P<path>.*?), line (?P<line>\d+), in (?P<func>\S*),")
_PROBE_FRAME = re.compile(r"^(?P<file>.*):(?P<line>\d+)\((?P<func>.*)\)$")
_LIBRARY = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]lib[/\\]python\d[^/\\]*[/\\]")
#: msprobe's spelling of an RNG API -> probe's
_API_PREFIXES = (("np.random.", "numpy.random."),)
MAX_DEPTH = 64


def is_member(name: str) -> bool:
    """Whether a zip member belongs to msprobe's layout."""
    return name in (ENV, PIP) or any(p.match(name) for p in (_HYPER, _WEIGHTS, _DATASET, _RANDOM))


# -- reading msprobe's members ------------------------------------------------------


def from_members(zip_path: Any, members: Mapping[str, bytes],
                 options: Mapping[str, Any] | None = None) -> dict[int, dict[str, Any]]:
    """rank -> checker -> data, as probe's checkers collect it, from msprobe's members (name -> bytes)."""
    options = options or {}
    data: dict[int, dict[str, Any]] = {}

    def put(rank: int, checker: str) -> dict[str, Any]:
        return data.setdefault(rank, {}).setdefault(checker, {})

    sources = []
    for name in sorted(members):
        raw = members[name]
        if name == ENV:
            put(0, "env").update(env.select(_json_object(zip_path, name, raw), options))
        elif name == PIP:
            put(0, "pip").update(packages.record(_pip_lines(raw), options))
        elif _HYPER.match(name):
            values = {k: _last_value(v) for k, v in _json_object(zip_path, name, raw).items()}
            sources.append((f"msprobe {PurePosixPath(name).name}", values))
        elif match := _WEIGHTS.match(name):
            stats = _stats_by_name(zip_path, name, _json_object(zip_path, name, raw))
            put(int(match.group(2)), "weights").setdefault("steps", {})[str(int(match.group(1)))] = stats
        elif match := _DATASET.match(name):
            stats = _stats_by_name(zip_path, name, _flatten(_json_object(zip_path, name, raw)))
            put(int(match.group(2)), "dataset").setdefault("steps", {})[str(int(match.group(1)))] = stats
        elif match := _RANDOM.match(name):
            put(int(match.group(1)), "random").update(_random_calls(zip_path, name, raw))
    if sources:
        data.setdefault(0, {})["hyperparameters"] = hyperparameters.normalise(sources, options)
    return data


def _json_object(zip_path: Any, member: str, raw: bytes) -> dict[str, Any]:
    try:
        value = loads(raw, max_depth=MAX_DEPTH)
    except ValueError as exc:
        raise CheckError(f"{zip_path}: member {member} is not usable JSON ({exc}); re-collect the pack") from None
    if not isinstance(value, dict):
        raise CheckError(f"{zip_path}: member {member} holds {type(value).__name__}, not a JSON object as "
                         "msprobe writes it; re-collect the pack")
    return value


def _pip_lines(raw: bytes) -> list[tuple[str, str]]:
    pairs = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        name, _, version = line.strip().partition("=")
        if name:
            pairs.append((name, version))
    return pairs


def _last_value(value: Any) -> Any:
    """msprobe keeps a name set twice as ``{"description": "duplicate_value", "values": [...]}``: the last wins."""
    if isinstance(value, dict) and value.get("description") == "duplicate_value" and \
            isinstance(value.get("values"), list) and value["values"]:
        return _last_value(value["values"][-1])
    return value


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"args": {"0": stats}}`` -> ``{"args.0": stats}``; non-tensor arguments (msprobe writes "") dropped."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update({path: value} if set(STAT_KEYS) <= set(value) else _flatten(value, path))
    return out


def _stats_by_name(zip_path: Any, member: str, tree: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for name, stats in tree.items():
        if not isinstance(stats, dict):
            raise CheckError(f"{zip_path}: member {member}: {name!r} holds {type(stats).__name__}, not "
                             "{max, min, mean, norm}; re-collect the pack")
        out[name] = {key: _number(stats.get(key)) for key in STAT_KEYS}
    return out


def _number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _random_calls(zip_path: Any, member: str, raw: bytes) -> dict[str, Any]:
    calls: dict[str, int] = {}
    for api, entries in _json_object(zip_path, member, raw).items():
        if not isinstance(entries, list):
            raise CheckError(f"{zip_path}: member {member}: {api!r} holds {type(entries).__name__}, not a list of "
                             "{count, stack}; re-collect the pack")
        for entry in entries:
            if not isinstance(entry, dict) or type(entry.get("count")) is not int or \
                    not isinstance(entry.get("stack"), list):
                raise CheckError(f"{zip_path}: member {member}: an entry of {api!r} is not "
                                 "{\"count\": N, \"stack\": [...]}; re-collect the pack")
            key = f"{_probe_api(api)} @ {_location(entry['stack'])}"
            calls[key] = calls.get(key, 0) + entry["count"]
    return {"calls": dict(sorted(calls.items())), "patched": []}


def _probe_api(api: str) -> str:
    for theirs, ours in _API_PREFIXES:
        if api.startswith(theirs):
            return ours + api[len(theirs):]
    return api


def _location(stack: list[Any]) -> str:
    """probe's call site (innermost frames outside libraries first) of msprobe's whole stack (outermost first)."""
    frames = []
    for entry in reversed(stack):
        match = _FRAME.match(str(entry))
        if match is None or _LIBRARY.search(match["path"]):
            continue
        frames.append(f"{PurePosixPath(match['path'].replace(chr(92), '/')).name}:{match['line']}({match['func']})")
        if len(frames) == rng.STACK_DEPTH:
            break
    return " < ".join(frames) or "?"


# -- writing probe's data in msprobe's layout --------------------------------------


def to_members(data: Mapping[int, Mapping[str, Any]]) -> dict[str, str]:
    """msprobe's members (name -> text) for probe's pack data; checkers msprobe does not know are left out."""
    members: dict[str, str] = {}
    for rank in sorted(data, reverse=True):  # rank 0 last: its env/pip/hyperparameters win, as in msprobe
        collected = data[rank]
        if "env" in collected:
            members[ENV] = json.dumps(collected["env"].get("variables", {}), indent=4)
        if "pip" in collected:
            members[PIP] = "".join(f"{n}={v}\n" for n, v in collected["pip"].get("packages", {}).items())
        if "hyperparameters" in collected:
            params = collected["hyperparameters"].get("parameters", {})
            members[HYPERPARAMETERS.format("static")] = json.dumps(
                {name: entry.get("value") for name, entry in params.items()}, indent=4, default=str)
        for step, stats in per_step(collected.get("weights", {})).get("steps", {}).items():
            members[f"weights/step{step}/rank{rank}/weight.json"] = json.dumps(_msprobe_stats(stats), indent=4)
        for step, stats in collected.get("dataset", {}).get("steps", {}).items():
            members[f"dataset/step{step}/rank{rank}/dataset.json"] = json.dumps(_nested(_msprobe_stats(stats)),
                                                                              indent=4)
        if "random" in collected:
            members[f"random/rank{rank}.json"] = json.dumps(_msprobe_calls(collected["random"]), indent=4)
    return members


def _msprobe_stats(stats: Mapping[str, Any]) -> dict[str, Any]:
    """name -> {max, min, mean, norm} as floats (msprobe subtracts them); empty tensors (no statistics) left out."""
    out = {}
    for name, record in stats.items():
        values = [record.get(key) for key in STAT_KEYS]
        if all(isinstance(v, (int, float, str)) for v in values):
            out[name] = {key: float(v) for key, v in zip(STAT_KEYS, values, strict=True)}
    return out


def _nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"args.0": stats}`` -> ``{"args": {"0": stats}, "kwargs": {}}``, msprobe's dataset.json."""
    tree: dict[str, Any] = {"args": {}, "kwargs": {}}
    for path, stats in flat.items():
        *parents, leaf = path.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = stats
    return tree


def _msprobe_calls(random: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for key, count in random.get("calls", {}).items():
        api, _, location = key.partition(" @ ")
        for theirs, ours in _API_PREFIXES:
            api = theirs + api[len(ours):] if api.startswith(ours) else api
        frames = [_PROBE_FRAME.match(f) for f in location.split(" < ")]
        stack = [f"File {m['file']}, line {m['line']}, in {m['func']}, " for m in reversed(frames) if m]
        out.setdefault(api, []).append({"count": count, "stack": stack})
    return out

"""Stage 4, the replay: the culprit API of stage 3 re-run on the bench's inputs, judged by ``probe acc-check``.

A replay dump (``OUT/stage4-replay/replay/``) holds the target's records of the call (its arguments, dtypes,
recorded output gradients) with the bench's input tensors in place of the target's (hard links to stage 3's tensor
files where the file system allows, so they are not written twice); ``probe acc-check`` runs it
on ``device`` in the recorded dtype and on the CPU in float64 and judges it by its standards. With stage 3's compare
rows of the same call (stage 3's tensor-mode compare: inputs, non-tensor arguments, outputs of both runs) the answer
is one of:

- ``operator``: the call fails its standard on the bench's inputs: "operator X is wrong on identical inputs";
- ``call``: it passes, but the two runs call it differently (an argument or a dtype): the call is the cause;
- ``inputs``: it passes, the call is the same, its inputs differ: the difference comes in through them, from the
  entry that produced them;
- ``kernel``: it passes, the call and the inputs are the same, the outputs differ: the two stacks' kernels differ,
  each within the standard.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from probe_core.api import DumpError, direction
from probe_locate.stages import TENSORS, Context, answer, dump_json

#: the statistics a record and a compare row name alike: (record key, compare CSV column of the target side)
_STATS = (("Max", "NPU max"), ("Min", "NPU min"), ("Mean", "NPU mean"), ("Norm", "NPU l2norm"))


def _leaves(record: Any, path: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    """``(path, record)`` of every tensor saved to a file in an entry's record."""
    if isinstance(record, dict):
        if isinstance(record.get("data_name"), str):
            yield path, record
            return
        for key, value in record.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(record, list):
        for index, value in enumerate(record):
            yield from _leaves(value, (*path, index))


def same_dtype(a: Any, b: Any) -> bool:
    """Whether two recorded dtypes are one, in either framework's spelling (``Float32``, ``torch.float32``)."""
    return str(a).rsplit(".", 1)[-1].lower() == str(b).rsplit(".", 1)[-1].lower()


def build_replay(target: Path, bench: Path, call: str, folder: Path, bench_call: str | None = None
                 ) -> tuple[Path, list[str]]:
    """The replay dump of ``call`` (``Functional.gelu.0``): the target's entries with the bench's input tensors
    (of ``bench_call``, the bench's name of the call, when the compare mapped it: another framework's). A bench
    tensor keeps its own file type (``.pt``, ``.npy``): the replay's record names it.
    Returns the folder and the inputs that stayed the target's (the bench has no tensor of that shape and dtype)."""
    dumps = {side: json.loads(path.read_text()) for side, path in (("target", target), ("bench", bench))}
    entries = {name: entry for name, entry in dumps["target"]["data"].items() if name.rsplit(".", 1)[0] == call}
    if not entries:
        raise DumpError(f"{target}: no entry of {call}; rerun stage mix (remove its folder)")
    out = folder / "replay"
    (out / "dump_tensor_data").mkdir(parents=True, exist_ok=True)
    own = []
    for name, entry in entries.items():
        bench_name = name if bench_call is None else bench_call + name[len(call):]
        bench_leaves = dict(_leaves(dumps["bench"]["data"].get(bench_name, {})))
        for path, leaf in _leaves(entry):
            other = bench_leaves.get(path)
            is_input = name.endswith(".forward") and str(path[0]).startswith("input")
            same = other is not None and other.get("shape") == leaf.get("shape") and same_dtype(
                other.get("dtype"), leaf.get("dtype"))
            source_dump, source = (bench, other) if is_input and same else (target, leaf)
            if is_input and not same:
                own.append(".".join(map(str, path)))
            file_name = Path(leaf["data_name"]).stem + Path(source["data_name"]).suffix
            _link_or_copy(source_dump.parent / "dump_tensor_data" / source["data_name"],
                          out / "dump_tensor_data" / file_name)
            leaf["data_name"] = file_name
    header = {key: value for key, value in dumps["target"].items() if key != "data"}
    header["dump_data_dir"] = str(out / "dump_tensor_data")
    (out / "dump.json").write_text(json.dumps(header | {"data": entries}, indent=1))
    return out, own


def _link_or_copy(source: Path, destination: Path) -> None:
    destination.unlink(missing_ok=True)
    try:
        os.link(source, destination)
    except OSError:  # another file system, or one without hard links
        shutil.copyfile(source, destination)


def _rows(csv_path: Path, entry: str) -> list[dict[str, str]]:
    with open(csv_path, newline="") as handle:
        return [row for row in csv.DictReader(handle) if row.get("NPU Name", "").startswith(entry + ".")]


def _number(text: str | None) -> float | None:
    """A compare CSV cell as a number; ``None`` for ``N/A``, empty and non-numeric cells."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _producer(dump: dict[str, Any], entry: str, row: dict[str, str]) -> str | None:
    """The last entry before ``entry`` whose output has the statistics of the input ``row`` (who made that input)."""
    wanted = [_number(row.get(column)) for _, column in _STATS]
    found = None
    for name, record in dump["data"].items():
        if name == entry:
            return found
        for path, leaf in _leaves(record):
            if str(path[0]) == "output" and [_number(str(leaf.get(key))) for key, _ in _STATS] == wanted:
                found = name
    return found


def _bench_call(rows: list[dict[str, str]], entry: str) -> str | None:
    """The bench's name of ``call`` where stage 3's compare paired ``entry`` with another name (a name map)."""
    for row in rows:
        suffix = row["NPU Name"][len(entry):]
        bench = row.get("Bench Name") or ""
        if bench.endswith(suffix) and bench[:-len(suffix)] != entry:
            return bench[:-len(suffix)].rsplit(".", 1)[0]
    return None


def _why(row: dict[str, str]) -> str:
    if not same_dtype(row.get("NPU Dtype"), row.get("Bench Dtype")):
        return f"dtype {row.get('NPU Dtype')} vs {row.get('Bench Dtype')}"
    return (row.get("Err_message") or "differs").rstrip(".")


def _worst(details: list[dict[str, str]]) -> dict[str, str] | None:
    failing = [row for row in details if row.get("Status") in ("error", "warning")]
    return min(failing, key=lambda row: row["Status"] != "error") if failing else None


def replay(ctx: Context, previous: dict[str, Any]) -> dict[str, Any]:
    s, culprit = ctx.settings, previous["mix"]
    entry, step, rank = culprit["name"], culprit["step"], culprit["rank_id"]
    call = entry.rsplit(".", 1)[0]
    stage3 = ctx.folder.parent / "stage3-mix" / culprit.get("tensors", TENSORS)
    target, bench = dump_json(stage3 / "target", step, rank), dump_json(stage3 / "bench", step, rank)
    compare = json.loads((stage3 / "compare" / "summary.json").read_text())
    rows = [row for item in compare.get("ranks", []) if item.get("csv") for row in _rows(Path(item["csv"]), entry)]
    replay_dump, own = build_replay(target, bench, call, ctx.folder, _bench_call(rows, entry))
    options = [*(["--dtype", s.dtype] if s.dtype else [])]
    ctx.probe("acc-check", "-api_info", replay_dump, "-o", ctx.folder / "acc", "--filter", call, "--device",
              s.device, *options)
    acc = ctx.summary("acc")
    with open(acc["details_csv"], newline="") as handle:
        details = [row for row in csv.DictReader(handle) if row.get("API Name", "").startswith(call + ".")]
    inputs = [row for row in rows if ".input" in row["NPU Name"][len(entry):]]
    outputs = [row for row in rows if ".output" in row["NPU Name"][len(entry):]]
    error = max((_number(row.get("MaxRelativeErr")) or 0.0 for row in outputs), default=0.0)
    identical = "identical inputs" if not own else f"the bench's inputs (but {', '.join(own)}: the target's own)"
    facts = {"api": call, "entry": entry, "step": step, "rank": rank, "acc_check": {k: acc.get(k) for k in
             ("apis", "pass", "warning", "error", "skipped")}, "output_max_rel_err": error}
    worst = _worst(details)
    if worst is not None:
        text = (f"operator {call} is wrong on {identical}: {worst['API Name']} {worst['Status']} against the float64 "
                f"benchmark (MaxRelativeErr {worst.get('MaxRelativeErr')}, Cosine {worst.get('Cosine')} vs standard "
                f"{worst.get('Standard')}: {worst.get('Message') or 'its criteria'})")
        return answer("operator", text, **facts)
    if acc.get("skipped") and not acc.get("pass"):
        reason = next(iter(acc.get("skipped_reasons") or {"skipped": 0}))
        return answer("not replayed", f"{entry} adds error first, but acc-check cannot replay {call} ({reason})",
                       **facts)
    standard = details[0].get("Standard") if details else "its standard"
    called = [row for row in inputs if not same_dtype(row.get("NPU Dtype"), row.get("Bench Dtype"))
              or (_number(row.get("MaxAbsErr")) is None and row.get("Result") not in ("pass", ""))]
    if called:
        how = "; ".join(f"{row['NPU Name'][len(entry) + 1:]}: {_why(row)}"
                        for row in called)
        return answer("call", f"{call} is within its standard ({standard}) on {identical}, but the target calls it "
                       f"differently ({how}): its outputs differ by MaxRelativeErr {error:.3g} on the same inputs",
                       **facts)
    differing = [row for row in inputs if (_number(row.get("MaxAbsErr")) or 0.0) > 0.0]
    if differing:
        dump = json.loads(target.read_text())
        sources = [_producer(dump, entry, row) or f"outside {culprit.get('module') or 'the recorded scope'}"
                   for row in differing]
        names = ", ".join(f"{row['NPU Name'][len(entry) + 1:]} from {source}" for row, source in zip(differing, sources))
        return answer("inputs", f"{call} is within its standard ({standard}) on {identical}: the difference comes in "
                       f"through its inputs ({names})", sources=sources, **facts)
    return answer("kernel", f"{call} is within its standard ({standard}) on identical inputs and called the same "
                   f"way, yet its {direction(entry)} outputs differ (MaxRelativeErr {error:.3g}): the two stacks' "
                   "kernels differ, each within the standard", **facts)

"""The funnel's first three stages, each through probe's own commands and read back from the files they write.

1. ``monitor``: ``probe run --task locate-monitor`` on both commands (the first ``steps`` steps: the monitor and an
   L0 statistics dump in the same runs; every rank of the target, and of the bench when they run at the same time,
   ends right after the first step where the runs part: :mod:`probe_locate.referee`), ``probe monitor compare``: the
   first step, rank and quantity where the runs part (or an answer: they agree, the update parts first).
2. ``l0``: ``probe compare`` of stage 1's L0 dumps of that step and rank only (hard-linked into the stage's folder;
   ``probe run`` at L0 of that step when stage 1 compared monitor outputs the user gave): the first module that adds
   error.
3. ``mix``: ``probe run`` with statistics at level mix, ``scope`` limited to that module (its forward; for a backward
   divergence from its forward to its backward), ``probe compare``: the API that adds error; then ``probe run`` in
   tensor mode of that one call only (``list``), ``probe compare``: its real inputs and outputs (``OUT/stage3-mix/
   tensor/``), which the replay takes. A forward divergence in a small module takes one pair of runs instead of
   two: tensor mode of everything inside the module (``scope``, in ``OUT/stage3-mix/``) answers both questions,
   when its tensors are estimated at ``tensor_budget_mb`` or less (``module_bytes``). The finding's ``tensors``
   names the subfolder with the replay's tensors.

The runs of stage 3 record one step and rank and end right after that step (``exit_after_last_step``): the steps
before it run unrecorded, the ones after it do not run.

A stage returns its finding: ``found`` (one line) and what the next stage needs, or ``answer`` (``kind``, ``text``)
when the funnel ends there.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe_core.api import DumpError, ProbeError, counterpart, direction, is_module, is_params_grad
from probe_locate.launch import Cost, TrainingCommand, probe_command, run_training
from probe_locate.referee import Referee
from probe_locate.settings import L0_CONFIG, Settings
from probe_locate.window import DUMP, MONITOR, NAME as WINDOW_TASK

#: stage 1's folder where the runs report their steps and probe locate gives its verdicts (probe_locate.referee)
REFEREE = "referee"

#: monitor quantities after the gradients along the update chain: a run that parts there first parts in the update
UPDATE_QUANTITIES = ("grad_norm", "exp_avg", "exp_avg_sq", "param_updated")
#: compare verdict kinds that name the update, not the forward or backward
UPDATE_KINDS = ("update", "parameters")
#: stage 3's subfolder with the tensor-mode runs of the one call (the replay's inputs)
TENSORS = "tensor"
#: the tensors of the APIs inside a module, against its own inputs and outputs: a guess (a leaf module's one API
#: has 1x, a transformer block's 20-odd APIs, weights included, about 16x)
INSIDE_FACTOR = 16


class Context:
    """What every stage is handed: the settings, the registry, the stage's folder and its cost."""

    def __init__(self, settings: Settings, registry: Any, folder: Path, cost: Cost) -> None:
        self.settings, self.registry, self.folder, self.cost = settings, registry, folder, cost

    def commands(self) -> dict[str, TrainingCommand]:
        s = self.settings
        return {"bench": TrainingCommand.parse(s.bench, "--bench"), "target": TrainingCommand.parse(s.target, "--target")}

    def run_both(self, probe_args: list[str], config: dict[str, Any], sub: str = "",
                 bench_config: dict[str, Any] | None = None,
                 watch: Callable[[set[str]], None] | None = None) -> tuple[Path, Path]:
        """Both commands under ``probe run PROBE_ARGS -c CONFIG --dump-path FOLDER[/SUB]/{side}`` (the bench with
        ``bench_config`` in ``bench_config.json`` where it differs: another framework's names, its own referee
        folder), ``watch`` called while they run (:func:`run_training`); the two output paths."""
        folder = self.folder / sub
        folder.mkdir(exist_ok=True)
        paths = {"target": folder / "config.json"}
        paths["bench"] = folder / "bench_config.json" if bench_config not in (None, config) else paths["target"]
        paths["target"].write_text(json.dumps(config, indent=1))
        if paths["bench"] != paths["target"]:
            paths["bench"].write_text(json.dumps(bench_config, indent=1))
        framework = ["--framework", self.settings.framework] if self.settings.framework else []
        jobs = [(side, command, [*probe_args, *framework, "-c", str(paths[side]), "--overwrite", "--dump-path",
                                 str(folder / side)], folder / f"{side}.log")
                for side, command in self.commands().items()]
        run_training(jobs, self.cost, self.settings.parallel, watch)
        return folder / "target", folder / "bench"

    def probe(self, *argv: Any) -> None:
        probe_command(self.registry, [str(a) for a in argv], self.folder / "probe.log", self.cost)

    def compare(self, target: Path, bench: Path, *options: Any) -> dict[str, Any] | None:
        """``probe compare TARGET BENCH -o COMPARE`` (``COMPARE`` beside the two dumps where the stage made them,
        else in the stage's folder: dumps the user gave); its first divergence."""
        out = target.parent / "compare" if target.parent.is_relative_to(self.folder) else self.folder / "compare"
        mapping = ["-lm"] if framework_of(target) != framework_of(bench) else []
        self.probe("compare", target, bench, "-o", out, *mapping, *options)
        first = self.summary(*out.relative_to(self.folder).parts).get("first_divergence")
        keys = ("name", "bench_name", "module", "kind", "reason", "step", "rank_id")
        return None if first is None else {key: first.get(key) for key in keys}

    def summary(self, *parts: str) -> dict[str, Any]:
        path = self.folder.joinpath(*parts, "summary.json")
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise DumpError(f"{path}: cannot read what the stage's command wrote ({exc}); see {self.folder}/probe.log")


def framework_of(dump: Path) -> str | None:
    """The framework a dump folder's first dump.json names (``pytorch``, ``mindspore``); ``None`` without one."""
    first = next(iter(sorted(dump.rglob("dump.json"))), None)
    try:
        return json.loads(first.read_text()).get("framework") if first else None
    except (OSError, ValueError) as exc:
        raise DumpError(f"{first}: cannot read the dump ({exc}); rerun the stage that made it (remove its folder)")


def answer(kind: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"found": text, "answer": {"kind": kind, "text": text, **extra}}


def monitor(ctx: Context, previous: dict[str, Any]) -> dict[str, Any]:
    s = ctx.settings
    options = [*(["--rank", s.rank] if s.rank is not None else []), *(["--rtol", s.rtol] if s.rtol is not None else []),
               *(["--noise-factor", s.noise_factor] if s.noise_factor is not None else [])]
    if s.bench_monitor:
        target, bench = Path(s.target_monitor), Path(s.bench_monitor)
    elif s.bench:
        (ctx.folder / "monitor_config.json").write_text(json.dumps(s.monitor_config, indent=1))
        (ctx.folder / "l0_config.json").write_text(json.dumps(L0_CONFIG, indent=1))
        config = {"monitor": "monitor_config.json", "dump": "l0_config.json"}
        refereed = ["bench", "target"] if s.parallel else ["target"]  # one after the other: the bench runs on
        monitors = {side: ctx.folder / side / MONITOR for side in ("bench", "target")}
        referee = Referee(ctx.folder / REFEREE, monitors, refereed, ctx.registry, [str(o) for o in options])
        configs = {side: config | ({"referee": f"{REFEREE}/{side}"} if side in refereed else {})
                   for side in ("bench", "target")}
        ctx.run_both(["--task", WINDOW_TASK], configs["target"], bench_config=configs["bench"], watch=referee.check)
        target, bench = monitors["target"], monitors["bench"]
    else:
        return {"found": "skipped: no commands and no monitor outputs (starting from the dumps)", "skipped": True}
    ctx.probe("monitor", "compare", target, bench, "-o", ctx.folder / "compare", "--no-xlsx", *options)
    summary = ctx.summary("compare")
    first = summary.get("first_divergence")
    if first is None:
        scope = f"the {s.steps} steps monitored" if s.bench and not s.bench_monitor else "the monitor outputs"
        complete = "" if summary.get("complete") else " (not every row was compared: see compare/summary.json)"
        return answer("agree", f"the runs do not part in {scope}{complete}: nothing to locate")
    step, rank, quantity, name = first["step"], first["rank"], first["quantity"], first["name"]
    where = f"step {step}, rank {rank}: {quantity} of {name} (relative difference {float(first['rel_diff']):.3g})"
    if quantity in UPDATE_QUANTITIES:
        return answer("update", f"the divergence is in the update of step {step} (optimizer/clipping/accumulation): "
                       f"the gradients agree, {quantity} of {name} parts first", step=step, rank=rank)
    if quantity == "param_origin":
        text = ("the runs start from different weights" if step == 0 else
                f"the weights change between the update of step {step - 1} and step {step}")
        return answer("weights", f"{text}: param_origin of {name} parts first at step {step}", step=step, rank=rank)
    return {"found": f"the runs part at {where}", "step": step, "rank": rank, "quantity": quantity, "name": name}


def one_step(step: int, rank: int) -> dict[str, Any]:
    """The config keys that record only ``step`` on ``rank`` and end the run right after that step."""
    return {"step": [step], "rank": [rank], "exit_after_last_step": True}


def l0(ctx: Context, previous: dict[str, Any]) -> dict[str, Any]:
    s, found = ctx.settings, previous.get("monitor", {})
    if s.bench_dump:
        target, bench = Path(s.target_dump), Path(s.bench_dump)
    elif s.bench and "step" in found and _dumped(ctx, found["step"], found["rank"]):
        target, bench = (_link_step(ctx, side, found["step"], found["rank"]) for side in ("target", "bench"))
    elif s.bench and "step" in found:  # stage 1 compared monitor outputs the user gave: no dump beside them
        target, bench = ctx.run_both([], {**L0_CONFIG, **one_step(found["step"], found["rank"])})
    else:
        raise ProbeError("probe locate: stage l0 needs the step where the runs part and the two commands (--bench, "
                         "--target), or two dumps (--bench-dump, --target-dump)")
    rank_option = ["--rank", s.rank] if s.rank is not None and s.bench_dump else []
    first = ctx.compare(target, bench, *rank_option)
    if first is None:
        where = f" at step {found['step']}" if "step" in found else ""
        return answer("not found", f"no module adds error{where} at L0 although the monitor parts there: "
                       "compare the mix level of that step by hand (probe run --level mix)")
    if first["kind"] in UPDATE_KINDS:
        return answer("update", f"the divergence is in the update of step {first['step']} (optimizer/clipping/"
                       f"accumulation): {first['name']} ({first['reason']})", step=first["step"])
    return {"found": f"{first['name']} adds error first (step {first['step']}, rank {first['rank_id']}): "
                     f"{first['reason']}", **first}


def _stage1_step(ctx: Context, side: str, step: int, rank: int) -> Path:
    return ctx.folder.parent / "stage1-monitor" / side / DUMP / f"step{step}" / f"rank{rank}"


def _dumped(ctx: Context, step: int, rank: int) -> bool:
    """Whether stage 1's runs dumped ``step`` on ``rank`` on both sides."""
    return all((_stage1_step(ctx, side, step, rank) / "dump.json").is_file() for side in ("bench", "target"))


def _link_step(ctx: Context, side: str, step: int, rank: int) -> Path:
    """``OUT/stage2-l0/SIDE``: stage 1's L0 dump of ``step`` on ``rank`` alone, its files hard-linked (written once,
    by stage 1); the folder to compare."""
    source, folder = _stage1_step(ctx, side, step, rank), ctx.folder / side
    for file in source.rglob("*"):
        copy = folder / f"step{step}" / f"rank{rank}" / file.relative_to(source)
        if file.is_dir():
            copy.mkdir(parents=True, exist_ok=True)
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            copy.hardlink_to(file)
        except OSError:  # a file system without hard links: a copy
            shutil.copy2(file, copy)
    return folder


def dump_json(side: Path, step: int, rank: int) -> Path:
    """``side``'s dump.json of ``step`` on ``rank`` (the only rank's when that one is not there)."""
    found = sorted(side.glob(f"step{step}/rank{rank}/dump.json")) or sorted(side.glob(f"step{step}/*/dump.json"))
    if not found:
        raise DumpError(f"{side}: no dump of step {step}, rank {rank}; rerun the stage that made it (remove its "
                        "folder)")
    return found[0]


def _tensor_bytes(record: Any) -> int:
    """Bytes of the tensors a dump.json record describes (shape and dtype of each)."""
    if isinstance(record, list):
        return sum(map(_tensor_bytes, record))
    if not isinstance(record, dict):
        return 0
    if isinstance(record.get("shape"), list) and isinstance(record.get("dtype"), str):
        numel = 1
        for size in record["shape"]:
            numel *= size if isinstance(size, int) else 1
        bits = re.search(r"(\d+)$", record["dtype"])
        return numel * (int(bits.group(1)) // 8 if bits else 1 if "bool" in record["dtype"] else 4)
    return sum(map(_tensor_bytes, record.values()))


def module_bytes(dump: Path, name: str) -> int:
    """The estimated bytes of the tensors of every API inside the module entry ``name`` of ``dump`` (an L0
    dump.json): ``INSIDE_FACTOR`` times its own inputs and outputs."""
    record = json.loads(dump.read_text())["data"].get(name)
    if record is None:
        raise DumpError(f"{dump}: no entry {name}; rerun stage l0 (remove its folder)")
    return INSIDE_FACTOR * _tensor_bytes(record)


def scope_of(name: str) -> list[str]:
    """The ``scope`` that records what runs inside the module entry ``name``: its forward call; for a backward entry,
    from its forward to its backward (the backward calls of the layers after it included)."""
    forward = counterpart(name, "forward")
    if not is_module(name) or forward is None:
        return []
    return [forward, forward] if forward == name else [forward, name]


def mix(ctx: Context, previous: dict[str, Any]) -> dict[str, Any]:
    s, found = ctx.settings, previous["l0"]
    if not s.bench:
        return answer("module", f"{found['name']} adds error first; locating the API inside it needs the two "
                       "commands (--bench, --target)")
    config = {"task": "statistics", "level": "mix", **one_step(found["step"], found["rank_id"])}
    scope, bench_scope = scope_of(found["name"]), scope_of(found.get("bench_name") or found["name"])
    one_pair = scope == [found["name"]] * 2 and _fits(ctx, found)
    sides = [config, dict(config)]
    for side, names in zip(sides, (scope, bench_scope)):
        if one_pair:  # a forward divergence in a small module: the tensors of everything inside it, one pair
            side |= {"task": "tensor", "tensor": {"scope": names, "data_mode": ["forward"]}}
        elif names:
            side["statistics"] = {"scope": names}
    first = ctx.compare(*ctx.run_both([], config, bench_config=sides[1]))
    if first is None:
        return answer("module", f"{found['name']} adds error at L0, but no entry inside it does at mix level "
                       f"(scope {scope}): its error is spread over its calls")
    if is_module(first["name"]) or is_params_grad(first["name"]):
        return answer("module", f"{first['name']} adds error, no API inside it does: {first['reason']}",
                       entry=first["name"])
    if not one_pair:
        modes = ["forward"] if direction(first["name"]) == "forward" else ["all"]
        tensors = [{"task": "tensor", "level": "mix", **one_step(first["step"], first["rank_id"]),
                    "tensor": {"list": [f"{name.rsplit('.', 1)[0]}.forward"], "data_mode": modes}}
                   for name in (first["name"], first.get("bench_name") or first["name"])]
        ctx.compare(*ctx.run_both([], tensors[0], sub=TENSORS, bench_config=tensors[1]))
    return {"found": f"{first['name']} adds error first (inside {first['module'] or found['name']}): "
                     f"{first['reason']}", **first, "tensors": "" if one_pair else TENSORS}


def _fits(ctx: Context, found: dict[str, Any]) -> bool:
    """Whether the tensors inside the module stage 2 found are estimated within ``tensor_budget_mb`` (from the
    target's L0 dump: the stage's own, or the one the user gave)."""
    s = ctx.settings
    if not s.tensor_budget_mb:
        return False
    side = Path(s.target_dump) if s.target_dump else ctx.folder.parent / "stage2-l0" / "target"
    return module_bytes(dump_json(side, found["step"], found["rank_id"]), found["name"]) <= s.tensor_budget_mb * 2**20

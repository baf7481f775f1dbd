"""``probe locate --bench CMD --target CMD [-o OUT] [--steps N] [--rank R] [--stop-after STAGE] [-c locate.json]``.

Runs the stages in order, each into ``OUT/stage{i}-{name}/`` with a state file (``locate_state.json``: what the
stage depended on, what it ran, cost and finding). A rerun reuses each finished stage whose inputs are unchanged
and goes on from the first one that is not; ``OUT/locate_summary.json`` holds every stage and the answer.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from probe_core.api import OutputError, add_html_argument, check_html, prepare_output_dir, replaced_whole, write_html
from probe_locate.launch import Cost, folder_bytes
from probe_locate.settings import STAGE_NAMES, STAGES, settings_from

STATE_NAME, SUMMARY_NAME = "locate_state.json", "locate_summary.json"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Run the precision funnel on two training commands: the monitor on the first steps "
                          "(where the runs part), statistics at L0 of that step (which module), statistics at mix "
                          "level inside that module (which API), then that API's tensors, a replay of that API on the bench's inputs with "
                          "acc-check (is the operator wrong, or its inputs, or the update). Each stage writes "
                          "OUT/stage*/ and is reused when rerun. See docs/locate.md.")
    parser.add_argument("--bench", metavar="CMD", help="the benchmark's command, quoted: \"python train.py\"")
    parser.add_argument("--target", metavar="CMD", help="the command of the run that drifts, quoted")
    parser.add_argument("-o", "--output", metavar="OUT", help="where the stages write (default ./locate_out)")
    parser.add_argument("-c", "--config", metavar="CONFIG",
                        help="locate.json (the config of probe locate): any option below by its long name (stop_after, ...) and monitor, device, "
                             "dtype, parallel, framework, rtol, noise_factor, tensor_budget_mb; a \"plugins\" section applies as in every "
                             "probe config")
    parser.add_argument("--steps", type=int, help="steps stage 1 monitors, from the first (default 4)")
    parser.add_argument("--rank", type=int, help="only this rank (default: the rank where the runs part first)")
    parser.add_argument("--stop-after", choices=STAGE_NAMES, help="stop after this stage (rerun later to go on)")
    parser.add_argument("--tensor-budget-mb", type=float, metavar="MB",
                        help="stage 3 takes one pair of runs (the tensors of every API in the module) when they are "
                             "estimated at MB or less per side, else two (statistics, then the one API's tensors); "
                             "default 256, 0: always two")
    parser.add_argument("--parallel", action="store_true", default=None,
                        help="run the bench and the target of a stage at the same time")
    parser.add_argument("--bench-monitor", metavar="DIR", help="start from two monitor outputs: the bench's ...")
    parser.add_argument("--target-monitor", metavar="DIR", help="... and the target's (stage 1 compares them)")
    parser.add_argument("--bench-dump", metavar="DIR", help="start from two dumps (any level): the bench's ...")
    parser.add_argument("--target-dump", metavar="DIR", help="... and the target's (stage l0 compares them)")
    add_html_argument(parser, "the funnel (each stage's finding and cost, the answer, the last compare's sections)")


def _state(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / STATE_NAME).read_text())
    except (OSError, ValueError):
        return None


def _reuse(folder: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """A finished stage's state when made with the same inputs; an unfinished one is removed (it is redone)."""
    state = _state(folder)
    if state is None:
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise OutputError(f"{folder}: not a folder probe locate made; give another -o")
        shutil.rmtree(folder, ignore_errors=True)
        return None
    if state.get("key") != key:
        changed = sorted(k for k in set(key) | set(state.get("key") or {}) if key.get(k) != (state.get("key") or {}).get(k))
        raise OutputError(f"{folder}: made with other inputs ({', '.join(changed)} changed); give another -o, or "
                          "remove that folder and the ones after it to redo them")
    return state


def _write_json(path: Path, data: Any) -> None:
    with replaced_whole(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1))


def _stage_functions():
    from probe_locate import replay, stages

    return {"monitor": stages.monitor, "l0": stages.l0, "mix": stages.mix, "replay": replay.replay}


def run(args: argparse.Namespace) -> int:
    from probe_locate.display import Display
    from probe_locate.stages import Context

    settings = settings_from(args)
    check_html(args)
    out = prepare_output_dir(settings.output, flag="-o").resolve()
    display, functions, findings, states = Display(), _stage_functions(), {}, {}
    answer = None
    for name, folder_name in STAGES:
        folder = out / folder_name
        key = settings.key(name) | {"previous": findings}
        state = _reuse(folder, key)
        reused = state is not None
        if state is None:
            folder.mkdir(parents=True)
            cost = Cost()
            with display.running(name, folder), cost.measuring():
                finding = functions[name](Context(settings, args.registry, folder, cost), findings)
            cost.bytes = folder_bytes(folder)
            state = {"stage": name, "key": key, "ran": cost.ran, "seconds": cost.seconds,
                     "cpu_seconds": cost.cpu_seconds, "bytes": cost.bytes, "finding": finding}
            _write_json(folder / STATE_NAME, state)
        display.stage(name, folder, state, reused=reused)
        findings[name], states[name] = state["finding"], state
        answer = state["finding"].get("answer")
        if answer is not None or settings.stop_after == name:
            break
    summary = {"answer": answer, "stopped_after": None if answer else settings.stop_after,
               "stages": states, "seconds": sum(s["seconds"] for s in states.values()),
               "cpu_seconds": sum(s["cpu_seconds"] for s in states.values()),
               "bytes": sum(s["bytes"] for s in states.values())}
    _write_json(out / SUMMARY_NAME, summary)
    display.answer(summary, out)
    write_html(args, out)
    return 0

"""The localisation suite: does probe name where a run first went wrong?

    .venv/bin/python benchmarks/localise/run.py                       # every case x variant
    .venv/bin/python benchmarks/localise/run.py --cases gelu_tanh --variants same --jobs 1
    .venv/bin/python benchmarks/localise/run.py --msprobe --tensor    # + msprobe -da, + tensor-mode compare

Each case's target run (one injected bug, ``train.py``) and its variant's bench run are collected with
``probe run`` (the unmodified-script path, level mix, statistics mode); bench runs are shared by every case
of a variant. Then, through the documented CLI only, the suite asks for the first divergence:

* ``compare``       ``probe compare`` -> ``summary.json`` ``first_divergence`` (the overall answer);
* ``compare/rank``  ``summary.json`` per-rank ``first_divergence`` of the case's rank (earliest step);
* ``csv``           the first ``error`` row of the CSVs, read in (step, rank) order;
* ``graph``         ``probe graph``'s "first divergent node" (earliest step, rank);
* ``cmp+ref``       ``probe compare --noise-reference REF``: ``summary.json``'s answer when the judge is
                    calibrated by a second benign target (``train.py --side reference``: no bug, permuted
                    with another seed) against the same bench (``--no-reference`` skips it);
* ``msprobe``       (``--msprobe``) msprobe's ``compare -da`` first diff node;
* ``tensor``        (``--tensor``) ``summary.json`` ``first_divergence`` of tensor-mode dumps.

Each answer is judged against ``cases.py`` (hit / near / miss / none); the rich table gives top-1 accuracy per
variant, the control's answers and the error/warning rows a user must read. Everything lands in the work
directory (``--work``, default ``benchmarks/localise/work``), with ``results.json``; runs already collected
there are reused unless ``--rerun``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from cases import BY_NAME, CASES, MODEL_VARIANTS, Case, judge  # noqa: E402

#: each model's training script (cases.py: ``Case.model``)
SCRIPTS = {"gpt": HERE / "train.py", "llama": HERE / "hf_train.py"}
#: transformers imports torchvision, whose registry wheels need two op schemas defined first with the CPU torch
#: (ENVIRONMENT.md): the client tests' sitecustomize does it, and the scripts stay as they are
SHIM = ROOT / "examples" / "shim"
VARIANTS = ("same", "reordered", "f64-bench", "bf16")
ANSWERS = ("compare", "compare/rank", "csv", "graph", "cmp+ref", "msprobe", "tensor")
MSPROBE_PYTHON = "/tmp/msvenv/bin/python"
csv.field_size_limit(1 << 30)


# -- running things ----------------------------------------------------------------------------------------

_EXTRA_PATH: list[str] = []


def _env(path: tuple[str, ...] = ()) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1", NO_COLOR="1",
               COLUMNS="400", TERM="dumb", PYTHONWARNINGS="ignore")
    env.pop("LOCALISE_VERBOSE", None)
    if _EXTRA_PATH or path:
        env["PYTHONPATH"] = os.pathsep.join(_EXTRA_PATH + list(path) + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _run(cmd: list[str], log: Path, timeout: int = 900, cwd: Path | None = None,
         path: tuple[str, ...] = ()) -> tuple[int, float, str]:
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(path),
                              timeout=timeout, cwd=cwd)
        code, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code = 124
    log.write_text(" ".join(map(str, cmd)) + "\n\n" + out)
    return code, time.monotonic() - start, out


def run_name(side: str, case: Case) -> str:
    """A run's folder: the case for a target, else the side shared by the model's cases of that world size."""
    if side == "target":
        return case.name
    model = "" if case.model == "gpt" else f"-{case.model}"
    return f"{side}{model}-w{case.world}"


def asked(variant: str, case: Case) -> bool:
    """Whether the case runs in the variant (its model's script has it)."""
    return variant in MODEL_VARIANTS[case.model]


def has_reference(case: Case) -> bool:
    """Whether the case's script makes a benign reference run (``--side reference``: the suite's own model)."""
    return case.model == "gpt"


class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work).resolve()
        self.probe = str(Path(args.probe).resolve()) if os.sep in args.probe else args.probe
        self.torchrun = str(Path(self.probe).parent / "torchrun")
        self.tensor_variants = set(VARIANTS if args.tensor == "all" else (args.tensor or "").split(",")) - {""}
        self._json_cache: dict[Path, object] = {}

    def tasks(self, variant: str) -> list[str]:
        return ["statistics"] + (["tensor"] if variant in self.tensor_variants else [])

    # paths
    def dump(self, task: str, variant: str, side: str, case: Case) -> Path:
        return self.work / "runs" / task / variant / run_name(side, case)

    # -- collection ----------------------------------------------------------------------------------------
    def collect(self, task: str, variant: str, side: str, case: Case) -> dict:
        dump = self.dump(task, variant, side, case)
        done = dump / ".localise-done.json"
        if done.exists() and not self.args.rerun:
            return json.loads(done.read_text())
        shutil.rmtree(dump, ignore_errors=True)
        dump.parent.mkdir(parents=True, exist_ok=True)
        cmd = [self.probe, "run", "--task", task, "--level", "mix", "--dump-path", str(dump),
               str(SCRIPTS[case.model]), "--side", side, "--variant", variant, "--case", case.script_case,
               "--steps", str(self.args.steps)]
        if case.model == "gpt":
            cmd += ["--world", str(case.world)]
        if case.world > 1:
            cmd = [self.torchrun, "--standalone", f"--nproc_per_node={case.world}"] + cmd
        code, seconds, out = _run(cmd, dump.parent / f"{dump.name}.run.log", cwd=dump.parent,
                                  path=(str(SHIM),) if case.model != "gpt" else ())
        steps = sorted(int(p.name[4:]) for p in dump.glob("step*") if p.name[4:].isdigit())
        info = {"code": code, "seconds": round(seconds, 1), "steps": steps,
                "log": str(dump.parent / f"{dump.name}.run.log"), "tail": out[-600:] if code else ""}
        if dump.exists():
            done.write_text(json.dumps(info))
        return info

    # -- dump look-ups (parents, update-phase entries) ---------------------------------------------------
    def _load(self, path: Path):
        if path not in self._json_cache:
            try:
                self._json_cache[path] = json.loads(path.read_text())
            except (OSError, ValueError):
                self._json_cache[path] = None
        return self._json_cache[path]

    def _rank_dirs(self, root: Path, step, rank) -> list[Path]:
        return [root / f"step{step}" / f"rank{rank}", root / f"step{step}" / "rank"]

    def parent_of(self, root: Path, step, rank, name: str) -> str | None:
        for folder in self._rank_dirs(root, step, rank):
            construct = self._load(folder / "construct.json")
            if isinstance(construct, dict) and name in construct:
                return construct[name]
        return None

    def entries(self, root: Path, step, rank) -> list[str]:
        for folder in self._rank_dirs(root, step, rank):
            dump = self._load(folder / "dump.json")
            if isinstance(dump, dict) and isinstance(dump.get("data"), dict):
                return list(dump["data"])
        return []

    def is_update(self, root: Path, step, rank, name: str) -> bool:
        """A parameters_grad entry, or one recorded after the step's last backward entry (clipping, collectives)."""
        if "parameters_grad" in name:
            return True
        keys = self.entries(root, step, rank)
        if name not in keys:
            return False
        last = max((i for i, k in enumerate(keys) if ".backward" in k or "parameters_grad" in k), default=None)
        return last is not None and keys.index(name) > last

    def entry_of_row(self, root: Path, step, rank, row_name: str) -> str:
        """The dump entry a CSV row (``{entry}.{input|output|parameters}.{i}``) belongs to."""
        best = ""
        for key in self.entries(root, step, rank):
            if row_name.startswith(key + ".") and len(key) > len(best):
                best = key
        if best:
            return best
        m = re.match(r"(.*?\.(?:forward|backward)(?:\.\d+)?)\.(?:input|output|parameters)", row_name)
        return m.group(1) if m else row_name

    # -- asking probe ----------------------------------------------------------------------------------
    def _cached(self, path: Path, compute) -> dict:
        """``compute()``, or with ``--reuse-answers`` what an earlier run of the suite wrote to ``path``."""
        if self.args.reuse_answers and path.exists():
            return json.loads(path.read_text())
        result = compute()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
        return result

    def compare(self, task: str, variant: str, case: Case, reference: bool = False) -> dict:
        folder = "compare-ref" if reference else "compare"
        path = self.work / folder / task / variant / f"{case.name}.answer.json"
        return self._cached(path, lambda: self._compare(task, variant, case, reference))

    def graph(self, variant: str, case: Case) -> dict:
        path = self.work / "graph" / variant / f"{case.name}.answer.json"
        return self._cached(path, lambda: self._graph(variant, case))

    def _compare(self, task: str, variant: str, case: Case, reference: bool = False) -> dict:
        target, bench = self.dump(task, variant, "target", case), self.dump(task, variant, "bench", case)
        out = self.work / ("compare-ref" if reference else "compare") / task / variant / case.name
        shutil.rmtree(out, ignore_errors=True)
        cmd = [self.probe, "compare", str(target), str(bench), "-o", str(out)]
        if reference:
            cmd += ["--noise-reference", str(self.dump(task, variant, "reference", case))]
        code, seconds, text = _run(cmd + ["--no-xlsx", "--quiet"], out.parent / f"{case.name}.compare.log")
        if code == 2 and "unrecognized arguments" in text:  # an older/newer CLI without these options
            code, seconds, text = _run(cmd, out.parent / f"{case.name}.compare.log")
        result: dict = {"code": code, "seconds": round(seconds, 1)}
        summary = self._load(out / "summary.json") if (out / "summary.json").exists() else None
        if code != 0 or not isinstance(summary, dict):
            result["error"] = text[-800:]
            return result
        roots = [target, bench]
        result["overall"] = self._answer(summary.get("first_divergence"))
        per_rank = []
        for item in summary.get("ranks") or []:
            answer = self._answer(item.get("first_divergence"), item.get("label"))
            if answer:
                per_rank.append(answer)
        result["per_rank"] = per_rank
        counts = summary.get("row_counts") or {}
        result["rows"] = {k: int(v) for k, v in counts.items() if isinstance(v, (int, float))}
        result["first_error_row"] = self._first_error_row(out, roots)
        return result

    @staticmethod
    def _step_rank(label) -> tuple[int | None, int | None]:
        label = str(label or "")
        step = re.search(r"step(\d+)", label)
        rank = re.search(r"rank(\d+)", label)
        return (int(step.group(1)) if step else None, int(rank.group(1)) if rank else 0)

    def _answer(self, first, label=None) -> dict | None:
        if not isinstance(first, dict) or not first.get("name"):
            return None
        step, rank = self._step_rank(first.get("rank") or label)
        if first.get("step") is not None:
            step = int(first["step"])
        return {"step": step, "rank": rank, "name": first.get("name"), "bench_name": first.get("bench_name"),
                "reason": str(first.get("reason", ""))[:300]}

    def _first_error_row(self, out: Path, roots: list[Path]) -> dict | None:
        files = []
        for path in out.rglob("compare_result_*.csv"):  # OUT/step{N}/compare_result_rank{R}_{time}.csv
            step, rank = self._step_rank(path.stem)
            if step is None:
                step, _ = self._step_rank(path.parent.name)
            files.append((step if step is not None else 0, rank or 0, path))
        for step, rank, path in sorted(files):
            with open(path, newline="") as fh:
                for row in csv.DictReader(fh):
                    if (row.get("Result") or "").strip().lower() != "error":
                        continue
                    npu, bench = row.get("NPU Name") or "", row.get("Bench Name") or ""
                    entry = self.entry_of_row(roots[0], step, rank, npu) if npu and npu != "N/A" else None
                    bench_entry = self.entry_of_row(roots[1], step, rank, bench) if bench and bench != "N/A" else None
                    return {"step": step, "rank": rank, "name": entry, "bench_name": bench_entry, "row": npu or bench,
                            "reason": (row.get("Err_message") or "")[:300]}
        return None

    def _graph(self, variant: str, case: Case) -> dict:
        target = self.dump("statistics", variant, "target", case)
        bench = self.dump("statistics", variant, "bench", case)
        out = self.work / "graph" / variant / case.name
        shutil.rmtree(out, ignore_errors=True)
        code, seconds, text = _run([self.probe, "graph", str(target), str(bench), "-o", str(out)],
                                   out.parent / f"{case.name}.graph.log")
        result: dict = {"code": code, "seconds": round(seconds, 1)}
        if code != 0:
            result["error"] = text[-800:]
            return result
        found = []
        for m in re.finditer(r"step\s+(\d+)\s+rank\s+(\d+):\s*first divergent node\s+(\S+)", text):
            found.append((int(m.group(1)), int(m.group(2)), m.group(3)))
        result["all"] = [f"step{s} rank{r}: {n}" for s, r, n in found]
        job = re.search(r"first divergence of the job: step\s+(\d+)\s+rank\s+(\d+):\s*(\S+)", text)
        if job:  # the answer across steps and ranks, when probe graph gives one
            found = [(int(job.group(1)), int(job.group(2)), job.group(3))] + found
            step, rank, name = found[0]
            result["answer"] = {"step": step, "rank": rank, "name": name, "bench_name": None}
        elif found:
            step, rank, name = min(found)
            result["answer"] = {"step": step, "rank": rank, "name": name, "bench_name": None}
        else:
            result["answer"] = None
        return result

    def msprobe(self, pairs: list[tuple[str, Case]]) -> dict:
        folder = self.work / "msprobe"
        results_path = folder / "results.json"
        if self.args.reuse_answers and results_path.exists():
            old = self._load(results_path)
            if isinstance(old, dict) and all(f"{v}/{c.name}" in old for v, c in pairs):
                return {"code": 0, "seconds": 0.0, "results": old, "error": None}
        jobs = []
        for variant, case in pairs:
            target = self.dump("statistics", variant, "target", case)
            bench = self.dump("statistics", variant, "bench", case)
            steps = [[s, str(target / f"step{s}"), str(bench / f"step{s}")] for s in range(self.args.steps)
                     if (target / f"step{s}").exists() and (bench / f"step{s}").exists()]
            jobs.append({"id": f"{variant}/{case.name}", "steps": steps,
                         "out": str(self.work / "msprobe" / variant / case.name)})
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "jobs.json").write_text(json.dumps(jobs, indent=1))
        results_path.unlink(missing_ok=True)
        code, seconds, text = _run([self.args.msprobe_python, str(HERE / "msprobe_da.py"), str(folder / "jobs.json"),
                                    str(results_path)], folder / "msprobe.log", timeout=3600)
        results = self._load(results_path) if results_path.exists() else None
        self._json_cache.pop(results_path, None)
        return {"code": code, "seconds": round(seconds, 1), "results": results or {},
                "error": None if results else text[-800:]}


# -- the run -------------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--variants", help=f"comma-separated variants (default: {','.join(VARIANTS)})")
    parser.add_argument("--jobs", type=int, default=2, help="processes at a time (default 2)")
    parser.add_argument("--work", default=str(HERE / "work"), help="work directory (runs, compares, results.json)")
    parser.add_argument("--probe", default=str(ROOT / ".venv" / "bin" / "probe"), help="the probe executable")
    parser.add_argument("--steps", type=int, default=3, help="training steps per run (default 3)")
    parser.add_argument("--rerun", action="store_true", help="collect again even where a run is in the work dir")
    parser.add_argument("--no-graph", action="store_true", help="skip probe graph")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the reference runs and probe compare --noise-reference")
    parser.add_argument("--reuse-answers", action="store_true",
                        help="reuse the compare/graph answers an earlier run left in the work dir "
                             "(e.g. to add --msprobe)")
    parser.add_argument("--probe-src", metavar="CHECKOUT",
                        help="run probe from this source tree (a checkout or `git archive` of the repository): its "
                             "src folders go first on PYTHONPATH, the venv's interpreter and dependencies stay")
    parser.add_argument("--msprobe", action="store_true", help="also ask msprobe compare -da (needs --msprobe-python)")
    parser.add_argument("--msprobe-python", default=MSPROBE_PYTHON, help="python with msprobe installed")
    parser.add_argument("--tensor", nargs="?", const="all", metavar="VARIANTS",
                        help="also collect and compare in tensor mode (all variants, or the comma-separated ones)")
    parser.add_argument("--json", help="results file (default WORK/results.json)")
    args = parser.parse_args()

    cases = [BY_NAME[c] for c in args.cases.split(",")] if args.cases else list(CASES)
    variants = args.variants.split(",") if args.variants else list(VARIANTS)
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r}; one of {', '.join(VARIANTS)}")
    if args.probe_src:
        src = Path(args.probe_src).resolve()
        _EXTRA_PATH.extend(str(p) for p in [src / "probe_core" / "src", src / "probe_torch" / "src",
                                             *sorted((src / "plugins").glob("*/src"))] if p.is_dir())
        if not _EXTRA_PATH:
            parser.error(f"--probe-src {src}: no probe_core/src there")
    suite = Suite(args)
    started = time.monotonic()

    # 1. collect: one bench per (task, variant, world), one target per (task, variant, case)
    runs: dict[tuple, dict] = {}
    todo = []
    for variant in variants:
        for task in suite.tasks(variant):
            shared = {}  # one bench (and reference) per model and world size
            for case in cases:
                if asked(variant, case):
                    shared.setdefault((case.model, case.world), case)
                    todo.append((task, variant, "target", case))
            todo.extend((task, variant, "bench", case) for case in shared.values())
            if not args.no_reference and task == "statistics":
                todo.extend((task, variant, "reference", case) for case in shared.values() if has_reference(case))
    todo.sort(key=lambda t: (t[3].world == 1, t[2] != "bench"))  # the 2-rank and bench runs first
    print(f"collecting {len(todo)} runs with {args.jobs} job(s) in {suite.work} ...", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {key: pool.submit(suite.collect, *key) for key in todo}
        for key, future in futures.items():
            task, variant, side, case = key
            runs[(task, variant, side, run_name(side, case))] = future.result()
    collect_seconds = time.monotonic() - started
    failed = [k for k, v in runs.items() if v["code"] != 0]
    for k in failed:
        print(f"  run failed ({runs[k]['code']}): {'/'.join(k)} — see {runs[k]['log']}", flush=True)

    # 2. ask: compare (+ tensor), graph, msprobe
    print("comparing ...", flush=True)
    analysis: dict[tuple, dict] = {}
    with ThreadPoolExecutor(args.jobs) as pool:
        ms_future = pool.submit(suite.msprobe, [(v, c) for v in variants for c in cases if asked(v, c)]) \
            if args.msprobe else None
        futures = {}
        for variant in variants:
            for case in cases:
                if not asked(variant, case):
                    continue
                futures[(variant, case.name, "compare")] = pool.submit(suite.compare, "statistics", variant, case)
                if not args.no_graph:
                    futures[(variant, case.name, "graph")] = pool.submit(suite.graph, variant, case)
                if not args.no_reference and has_reference(case):
                    futures[(variant, case.name, "cmp+ref")] = pool.submit(suite.compare, "statistics", variant,
                                                                            case, True)
                if "tensor" in suite.tasks(variant):
                    futures[(variant, case.name, "tensor")] = pool.submit(suite.compare, "tensor", variant, case)
        for key, future in futures.items():
            analysis[key] = future.result()
        ms = ms_future.result() if ms_future else None

    # 3. judge
    results = []
    for variant in variants:
        for case in cases:
            if not asked(variant, case):
                continue
            reference = not args.no_reference and has_reference(case)
            roots = {"target": suite.dump("statistics", variant, "target", case),
                     "bench": suite.dump("statistics", variant, "bench", case)}
            parent_of = lambda s, r, n, side, roots=roots: suite.parent_of(roots[side], s, r, n)  # noqa: E731
            is_update = lambda s, r, n, side, roots=roots: suite.is_update(roots[side], s, r, n)  # noqa: E731
            cmp = analysis[(variant, case.name, "compare")]
            answers: dict[str, dict | None] = {}
            answers["compare"] = cmp.get("overall")
            own = [a for a in cmp.get("per_rank", []) if a["rank"] == case.rank]
            others = cmp.get("per_rank", []) if case.control else own
            answers["compare/rank"] = min(others, key=lambda a: (a["step"] or 0, a["rank"])) if others else None
            answers["csv"] = cmp.get("first_error_row")
            if not args.no_graph:
                answers["graph"] = analysis[(variant, case.name, "graph")].get("answer")
            if reference:
                answers["cmp+ref"] = analysis[(variant, case.name, "cmp+ref")].get("overall")
            if ms is not None:
                got = ms["results"].get(f"{variant}/{case.name}")
                answers["msprobe"] = got if got and "error" not in got else None
            if "tensor" in suite.tasks(variant):
                answers["tensor"] = analysis[(variant, case.name, "tensor")].get("overall")
            broken = {}
            if cmp.get("error"):
                broken["compare"] = cmp["error"]
            if not args.no_graph and analysis[(variant, case.name, "graph")].get("error"):
                broken["graph"] = analysis[(variant, case.name, "graph")]["error"]
            if reference and analysis[(variant, case.name, "cmp+ref")].get("error"):
                broken["cmp+ref"] = analysis[(variant, case.name, "cmp+ref")]["error"]
            if "tensor" in suite.tasks(variant) and analysis[(variant, case.name, "tensor")].get("error"):
                broken["tensor"] = analysis[(variant, case.name, "tensor")]["error"]
            if ms is not None and (ms["results"].get(f"{variant}/{case.name}") or {}).get("error"):
                broken["msprobe"] = ms["results"][f"{variant}/{case.name}"]["error"]
            for task in suite.tasks(variant):
                for side in ("target", "bench", "reference"):
                    info = runs.get((task, variant, side, run_name(side, case)))
                    if info and info["code"] != 0:
                        broken[f"run {task} {side}"] = f"exit {info['code']}: {info['tail']}"
            verdicts = {}
            needs = {"compare": "compare", "compare/rank": "compare", "csv": "compare", "graph": "graph",
                     "cmp+ref": "cmp+ref", "msprobe": "msprobe", "tensor": "tensor"}
            for kind, answer in answers.items():
                run_failed = any(k.startswith("run tensor" if kind == "tensor" else "run statistics")
                                 and (kind == "cmp+ref" or not k.endswith("reference")) for k in broken)
                verdicts[kind] = "broken" if needs[kind] in broken or run_failed else \
                    judge(case, answer, parent_of, is_update)
            results.append({"variant": variant, "model": case.model, "case": case.name, "kind": case.kind, "what": case.what,
                            "expected": {"step": case.step, "rank": case.rank, "hit": list(case.hit),
                                         "update": case.update, "near": list(case.near)},
                            "answers": answers, "verdicts": verdicts, "rows": cmp.get("rows", {}),
                            "ref_rows": analysis.get((variant, case.name, "cmp+ref"), {}).get("rows"),
                            "tensor_rows": analysis.get((variant, case.name, "tensor"), {}).get("rows"),
                            "graph_all": analysis.get((variant, case.name, "graph"), {}).get("all"),
                            "broken": broken})

    total = time.monotonic() - started
    out_path = Path(args.json) if args.json else suite.work / "results.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    kinds = [k for k in ANSWERS if any(k in r["answers"] for r in results)]
    out_path.write_text(json.dumps({"variants": variants, "cases": [c.name for c in cases], "answers": kinds,
                                    "seconds": {"collect": round(collect_seconds, 1), "total": round(total, 1)},
                                    "probe": suite.probe, "probe_src": args.probe_src, "results": results,
                                    "runs": {"/".join(k): v for k, v in runs.items()}}, indent=1))
    report(results, variants, cases, kinds)
    print(f"results: {out_path}   ({total:.0f} s, collection {collect_seconds:.0f} s)")
    return 0


# -- the table --------------------------------------------------------------------------------------------

MARK = {"hit": "[green]✓[/]", "near": "[yellow]~[/]", "miss": "[red]✗[/]", "none": "[dim]·[/]",
        "broken": "[magenta]![/]"}
SHORT = {"compare": "cmp", "compare/rank": "rank", "csv": "csv", "graph": "graph", "cmp+ref": "ref", "msprobe": "ms-da",
         "tensor": "tensor"}


def _short(answer: dict | None) -> str:
    if not answer:
        return "nothing"
    return f"s{answer.get('step')}r{answer.get('rank')} {answer.get('name')}"


def _med_max(values: list[int]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):g} / {max(values)}"


def report(results: list[dict], variants: list[str], cases: list[Case], kinds: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(200, int(os.environ.get("COLUMNS", "0") or 0)))
    table = Table(title="top-1 localisation: hits / bug cases (+near: the consequence, not the cause)",
                  title_justify="left")
    table.add_column("model", no_wrap=True)
    table.add_column("variant", no_wrap=True)
    for kind in kinds:
        table.add_column(kind, justify="right", no_wrap=True)
    has_control = any(c.control for c in cases)
    if has_control:
        table.add_column("control names", overflow="fold")
    table.add_column("error rows\nmed / max", justify="right")
    table.add_column("warning rows\nmed / max", justify="right")
    models = list(dict.fromkeys(c.model for c in cases))
    for model, variant in ((m, v) for m in models for v in variants):
        rows = [r for r in results if r["variant"] == variant and BY_NAME[r["case"]].model == model]
        if not rows:
            continue
        bug_rows = [r for r in rows if not BY_NAME[r["case"]].control]
        cells = [model, variant]
        for kind in kinds:
            verdicts = [r["verdicts"].get(kind) for r in bug_rows]
            if not any(verdicts):
                cells.append("-")
                continue
            hits, near = verdicts.count("hit"), verdicts.count("near")
            broken = verdicts.count("broken")
            cell = f"{hits}/{len(bug_rows)}" + (f" (+{near})" if near else "")
            cell += f" [magenta]{broken}![/]" if broken else ""
            cells.append(cell)
        if has_control:
            control = next((r for r in rows if BY_NAME[r["case"]].control), None)
            if control is None:
                cells.append("-")
            else:
                parts = []
                for kind in kinds:
                    verdict = control["verdicts"].get(kind)
                    if verdict is None:
                        continue
                    said = "[green]nothing[/]" if verdict == "hit" else \
                        MARK.get(verdict, "?") + " " + _short(control["answers"].get(kind))
                    parts.append(f"{SHORT[kind]}: {said}")
                cells.append("\n".join(parts))
        cells.append(_med_max([r["rows"].get("error", 0) for r in bug_rows if r["rows"]]))
        cells.append(_med_max([r["rows"].get("warning", 0) for r in bug_rows if r["rows"]]))
        table.add_row(*cells)
    console.print(table)

    detail = Table(title="per case", title_justify="left",
                   caption=f"each cell: {' '.join(SHORT[k] for k in kinds)} (✓ hit, ~ near, ✗ miss, "
                           f"· names nothing, ! a run or command failed, blank: not asked), "
                           f"then error/warning rows",
                   caption_justify="left")
    detail.add_column("case", no_wrap=True)
    detail.add_column("kind", no_wrap=True)
    for variant in variants:
        detail.add_column(variant, no_wrap=True)
    for case in cases:
        cells = [case.name, case.kind]
        for variant in variants:
            r = next((x for x in results if x["variant"] == variant and x["case"] == case.name), None)
            if r is None:
                cells.append("")
                continue
            marks = " ".join(MARK[r["verdicts"][k]] if k in r["verdicts"] else " " for k in kinds)
            cells.append(f"{marks}  {r['rows'].get('error', '?')}/{r['rows'].get('warning', '?')}")
        detail.add_row(*cells)
    console.print(detail)


if __name__ == "__main__":
    sys.exit(main())

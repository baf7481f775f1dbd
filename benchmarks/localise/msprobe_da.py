"""msprobe's first-diff analysis (``msprobe compare -da``) over many dump pairs in one process.

Run with msprobe's interpreter (``/tmp/msvenv/bin/python msprobe_da.py jobs.json results.json``). Each job is
``{"id": ..., "steps": [[step, target_step_dir, bench_step_dir], ...], "out": dir}``; steps are analysed in
order until one names a node. The result per job: ``{"step", "rank", "name", "all": [...]}`` or None, or
``{"error": ...}``. It calls msprobe's own ``DiffAnalyzer`` (what ``msprobe compare -da`` runs), once per step
folder, so the interpreter and msprobe are imported once.
"""

from __future__ import annotations

import glob
import json
import os
import sys


def main() -> None:
    jobs = json.load(open(sys.argv[1]))
    from msprobe.core.compare.find_first.analyzer import DiffAnalyzer

    results = {}
    for job in jobs:
        answer = None
        try:
            for step, target, bench in job["steps"]:
                out = os.path.join(job["out"], f"step{step}")
                os.makedirs(out, exist_ok=True)
                for old in os.listdir(out):
                    os.remove(os.path.join(out, old))
                DiffAnalyzer(target, bench, out).analyze()
                found = sorted(glob.glob(os.path.join(out, "diff_analyze_*.json")))
                if not found:
                    continue
                data = json.load(open(found[-1]))
                nodes = [(int(key.split("_")[-1]), node.get("op_name"))
                         for key, items in data.items() for node in items]
                if nodes:
                    rank, name = nodes[0]
                    answer = {"step": step, "rank": rank, "name": name, "all": [f"rank{r}:{n}" for r, n in nodes]}
                    break
        except Exception as exc:  # msprobe failed on this pair: say so, go on
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        results[job["id"]] = answer
        json.dump(results, open(sys.argv[2], "w"), indent=1)


if __name__ == "__main__":
    main()

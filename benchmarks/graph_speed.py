"""Benchmark: build + compare a synthetic pair of model graphs (default 200,000 nodes per side).

Writes two msprobe-format dumps (dump.json, construct.json, stack.json, laid out
as msprobe writes them: indent=1; ``--layout compact`` for one-line JSON) of a
deep transformer-like model — the bench's statistics all differ slightly
(1e-5 relative noise, as two devices' numbers do) and every 97th block is
3x off —
then times ``probe graph -tp A -gp B -o OUT`` and, when msprobe is installed
(``--msprobe PYTHON``, default: ``msprobe`` importable by /tmp/msvenv/bin/python
or this Python), ``msprobe graph_visualize`` on the same pair, each in its own
process, the two alternated over ``--rounds`` rounds. Both run with Python's bytecode cache on, as installed
tools run (an environment with ``PYTHONDONTWRITEBYTECODE`` set would have probe, installed editable, compile
its sources on every run while msprobe's site-packages hold theirs): the first round writes what is missing.
Prints each tool's process CPU
time (user+sys, all threads: the figure to trust on a loaded machine, where wall time
runs several times CPU time), wall time and peak resident memory (the best round of
each), and the CPU and wall ratios measured in this run.

    python benchmarks/graph_speed.py [--nodes 200000] [--rounds 3] [--msprobe /tmp/msvenv/bin/python] [--layout compact]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

NODES_PER_BLOCK = 26  # forward + backward nodes one block adds to the graph (see _block)


_NOISE = random.Random(2)


def _tensor(rng: random.Random, shape: list[int], scale: float = 1.0, noise: float = 0.0) -> dict:
    value = rng.random() * scale * (1.0 + noise * _NOISE.gauss(0.0, 1.0))
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": shape, "Max": value + 1.0,
            "Min": -value - 1.0, "Mean": value / 10, "Norm": value * 30 + 1.0, "requires_grad": True}


def _block(i: int, counts: dict[str, int], rng: random.Random, scale: float, noise: float, data: dict,
           construct: dict) -> None:
    """One block: attention (linear, matmul, softmax, linear) + mlp (linear, gelu, linear) + 2 adds, fwd and bwd."""
    def api(op: str, parent: str | None, way: str = "forward") -> str:
        name = f"{op}.{counts[op]}.{way}"
        construct[name] = parent
        data[name] = {"input_args": [_tensor(rng, [8, 64], scale, noise), _tensor(rng, [64, 64], 1.0, noise)],
                      "input_kwargs": {}, "output": [_tensor(rng, [8, 64], scale, noise)]}
        return name

    def module(path: str, cls: str, parent: str | None, way: str = "forward") -> str:
        name = f"Module.{path}.{cls}.{way}.0"
        construct[name] = parent
        data[name] = {"input_args": [_tensor(rng, [8, 64], scale, noise)], "input_kwargs": {},
                      "output": [_tensor(rng, [8, 64], scale, noise)]}
        return name

    for way in ("forward", "backward"):
        block = module(f"layers.{i}", "Block", None, way)
        attn = module(f"layers.{i}.attn", "Attention", block, way)
        mlp = module(f"layers.{i}.mlp", "MLP", block, way)
        for op, parent in (("Functional.linear", attn), ("Torch.matmul", attn), ("Torch.softmax", attn),
                           ("Functional.linear", attn), ("Functional.linear", mlp), ("Functional.gelu", mlp),
                           ("Functional.linear", mlp), ("Tensor.__add__", block), ("Tensor.__add__", block)):
            api(op, parent, way)
            if way == "backward":
                counts[op] += 1
        if way == "backward":
            for sub in ("attn.Attention", "mlp.MLP"):
                name = f"Module.layers.{i}.{sub}.parameters_grad.0"
                data[name] = {"weight": [_tensor(rng, [64, 64], 1.0, noise)]}


def write_dump(folder: Path, blocks: int, perturb: bool, layout: str = "msprobe") -> None:
    rng = random.Random(1)
    data: dict = {}
    construct: dict = {}
    counts: dict[str, int] = dict.fromkeys(("Functional.linear", "Torch.matmul", "Torch.softmax",
                                            "Functional.gelu", "Tensor.__add__"), 0)
    for i in range(blocks):
        scale = 3.0 if perturb and i % 97 == 13 else 1.0
        _block(i, counts, rng, scale, 1e-5 if perturb else 0.0, data, construct)
    folder.mkdir(parents=True, exist_ok=True)
    names = list(data)
    stack = {str(k): [names[k::50], [f"File model.py, line {k}, in forward, \n x = layer(x)"]] for k in range(50)}
    # as msprobe writes them: json.dump with indent=1 (tests/fixtures/msprobe_*); probe's own dumps put one
    # entry per line. Compact one-line JSON, which neither writes, is read ~2x slower (--layout compact).
    indent = 1 if layout == "msprobe" else None
    (folder / "dump.json").write_text(json.dumps({"task": "statistics", "level": "mix", "framework": "pytorch",
                                                  "dump_data_dir": None, "data": data}, indent=indent))
    (folder / "construct.json").write_text(json.dumps(construct, indent=indent))
    (folder / "stack.json").write_text(json.dumps(stack, indent=indent))


@dataclass
class Measured:
    """One tool's runs: the best CPU (user+sys) and wall seconds, the largest peak RSS, the last exit code."""

    cpu: float = float("inf")
    wall: float = float("inf")
    rss_mib: float = 0.0
    code: int = 0

    def add(self, command: list[str], out: Path) -> None:
        """Run ``command`` (writing into ``out``, emptied first) in a child process and keep its figures."""
        shutil.rmtree(out, ignore_errors=True)
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        err = proc.stderr.read()  # type: ignore[union-attr]
        _, status, usage = os.wait4(proc.pid, 0)
        self.wall = min(self.wall, time.perf_counter() - start)
        self.cpu = min(self.cpu, usage.ru_utime + usage.ru_stime)
        self.rss_mib = max(self.rss_mib, usage.ru_maxrss / 1024)
        self.code = os.waitstatus_to_exitcode(status)
        if self.code != 0:
            print(err.decode()[-2000:], file=sys.stderr)

    def line(self, label: str) -> str:
        return (f"{label:24s} CPU {self.cpu:8.2f} s   wall {self.wall:8.2f} s   peak RSS {self.rss_mib:8.0f} MiB   "
                f"(exit {self.code})")


def find_msprobe(hint: str | None) -> str | None:
    for python in filter(None, [hint, "/tmp/msvenv/bin/python", sys.executable]):
        if Path(python).exists() and subprocess.run([python, "-c", "import msprobe"],
                                                     capture_output=True).returncode == 0:
            return python
    return None


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=200_000, help="graph nodes per side (default 200000)")
    parser.add_argument("--msprobe", help="a Python that can import msprobe (mindstudio-probe)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tool, alternated (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the generated dumps and outputs")
    parser.add_argument("--layout", choices=("msprobe", "compact"), default="msprobe",
                        help="dump.json as msprobe writes it (indent=1, default) or as one compact line")
    args = parser.parse_args()
    blocks = max(1, args.nodes // NODES_PER_BLOCK)
    work = Path(tempfile.mkdtemp(prefix="probe_graph_bench_"))
    try:
        started = time.perf_counter()
        write_dump(work / "target" / "step0" / "rank0", blocks, perturb=False, layout=args.layout)
        write_dump(work / "bench" / "step0" / "rank0", blocks, perturb=True, layout=args.layout)
        size = (work / "target" / "step0" / "rank0" / "dump.json").stat().st_size / 2**20
        print(f"synthetic pair: {blocks} blocks, ~{blocks * NODES_PER_BLOCK + 1} nodes per side, "
              f"dump.json {size:.0f} MiB each (written in {time.perf_counter() - started:.1f} s)")
        probe = str(Path(sys.executable).parent / "probe")
        target, bench = work / "target" / "step0" / "rank0", work / "bench" / "step0" / "rank0"
        ours, theirs = Measured(), Measured()
        python = find_msprobe(args.msprobe)
        code = "import sys; from msprobe.msprobe import main; sys.argv = ['msprobe'] + sys.argv[1:]; main()"
        for _ in range(args.rounds):  # alternated: both tools see the same load on a shared machine
            ours.add([probe, "graph", "-tp", str(target), "-gp", str(bench), "-o", str(work / "probe_out")],
                     work / "probe_out")
            if python is not None:
                theirs.add([python, "-c", code, "graph_visualize", "-tp", str(target), "-gp", str(bench),
                            "-o", str(work / "msprobe_out")], work / "msprobe_out")
        print(f"best of {args.rounds} rounds")
        print(ours.line("probe graph:"))
        if python is None:
            print("msprobe graph_visualize: not installed (pip install mindstudio-probe in another venv and "
                  "pass --msprobe PYTHON to compare)")
            return
        print(theirs.line("msprobe graph_visualize:"))
        if ours.code == 0 and theirs.code == 0:
            print(f"probe is {theirs.cpu / ours.cpu:.1f}x faster in CPU time ({theirs.wall / ours.wall:.1f}x in wall "
                  f"time) and uses {theirs.rss_mib / ours.rss_mib:.1f}x less peak memory (target: >= 10x CPU)")
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

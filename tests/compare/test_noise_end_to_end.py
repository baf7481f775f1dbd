"""The noise judge end to end: real float32 runs of a tiny torch model against a float64 bench.

``probe run`` collects six runs of the same seeded training script (two blocks of Linear + GELU +
LayerNorm, causal self-attention over the batch masked with the dtype's ``finfo.min`` as transformers masks,
a head, softmax, three SGD steps): the bench in float64, and in float32 a clean target,
one where block 1's GELU uses the tanh approximation, one whose learning rate is doubled, one where
block 1's linear layer runs under bfloat16 autocast, and one with both the tanh GELU and the doubled
learning rate (the GELU run is then a ``--noise-reference``: a known, accepted difference). Every
float32 entry differs from the float64 bench by rounding noise; only the planted bugs may be named.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from probe_compare.engine import CompareOptions, run_compare
from probe_core.plugins import load_registry

from .helpers import PROBE, read_csv, read_summary, result_csv

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import sys
    import torch

    dtype = torch.float64 if sys.argv[1] == "float64" else torch.float32
    bug = sys.argv[2].split(",")
    torch.manual_seed(0)


    class Block(torch.nn.Module):
        def __init__(self, width, approximate="none", low=False):
            super().__init__()
            self.fc = torch.nn.Linear(width, width)
            self.act = torch.nn.GELU(approximate=approximate)
            self.norm = torch.nn.LayerNorm(width)
            self.low = low

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.low):
                h = self.fc(x)
            return self.norm(self.act(h.to(x.dtype)))


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.Sequential(Block(16), Block(16, "tanh" if "gelu" in bug else "none",
                                                                   low="lowp" in bug))
            self.head = torch.nn.Linear(16, 4)

        def forward(self, x):
            h = self.blocks(x)
            # causal self-attention over the batch rows, masked as transformers masks: with the dtype's own
            # finfo.min (-3.4e38 in float32, -1.8e308 in float64), through a dtype-typed tensor and where()
            scores = h @ h.T / 4.0
            hidden = torch.triu(torch.ones(len(h), len(h), dtype=torch.bool), 1)
            low = torch.tensor(torch.finfo(scores.dtype).min, dtype=scores.dtype)
            scores = torch.where(hidden, low, scores) + torch.zeros_like(scores).masked_fill(hidden, low)
            h = h + torch.softmax(scores, dim=-1) @ h
            return torch.softmax(self.head(h), dim=-1)


    net = Net().to(dtype)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.2 if "lr" in bug else 0.1, momentum=0.9)
    data = torch.randn(3, 8, 16, dtype=torch.float64)
    labels = torch.softmax(torch.randn(3, 8, 4, dtype=torch.float64), dim=-1)
    for step in range(3):
        optimizer.zero_grad()
        loss = ((net(data[step].to(dtype)) - labels[step].to(dtype)) ** 2).sum()
        loss.backward()
        optimizer.step()
""")

RUNS = {"bench": ("float64", "none"), "clean": ("float32", "none"), "gelu": ("float32", "gelu"),
        "lr": ("float32", "lr"), "lowp": ("float32", "lowp"), "gelu_lr": ("float32", "gelu,lr")}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    """The six runs, collected at once (statistics, level mix: one step folder per optimizer update)."""
    root = tmp_path_factory.mktemp("noise_e2e")
    (root / "train.py").write_text(SCRIPT)
    procs = {name: subprocess.Popen([PROBE, "run", "--task", "statistics", "--level", "mix", "--dump-path",
                                     str(root / name), "train.py", *argv], cwd=root, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for name, argv in RUNS.items()}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, (name, err[-3000:])
        assert sorted(p.name for p in (root / name).iterdir()) == ["step0", "step1", "step2"], name
    return root


def compare(dumps: Path, target: str) -> dict:
    out = dumps / f"out_{target}"
    return run_compare(CompareOptions(dumps / target, dumps / "bench", out, progress=False), load_registry())


def error_entries(out: Path, step: int) -> list[str]:
    """The entries of the error rows of a step's CSV, in row order (each entry once)."""
    names: list[str] = []
    for row in read_csv(result_csv(out, step=step)):
        if row["Result"] == "error":
            entry = _entry_of(row["NPU Name"])
            if entry not in names:
                names.append(entry)
    return names


def _entry_of(leaf: str) -> str:
    for marker in (".input.", ".output.", ".parameters."):
        if marker in leaf:
            return leaf.split(marker)[0]
    return leaf.rsplit(".", 1)[0]  # Module.x.parameters_grad.0.weight -> Module.x.parameters_grad.0


def test_float32_against_float64_is_clean(dumps):
    summary = compare(dumps, "clean")
    assert summary["rules"] == "noise" and summary["first_divergence"] is None
    assert [rank["label"] for rank in summary["ranks"]] == ["rank0_step0", "rank0_step1", "rank0_step2"]
    for step in range(3):
        rows = read_csv(result_csv(dumps / "out_clean", step=step))
        assert len(rows) > 40 and all(r["Result"] == "pass" for r in rows), \
            [(r["NPU Name"], r["Err_message"]) for r in rows if r["Result"] != "pass"]
    # every row compares float32 with float64: a note, not an error
    assert any("compared at the coarser precision" in r["Err_message"] for r in rows)


def test_a_tanh_gelu_is_the_first_divergence(dumps):
    out = dumps / "out_gelu"
    done = subprocess.run([PROBE, "compare", dumps / "gelu", dumps / "bench", "-o", out, "--quiet"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    first = read_summary(out)["first_divergence"]
    assert (first["name"], first["step"], first["rank_id"], first["kind"]) == \
        ("Functional.gelu.1.forward", 0, 0, "adds error")
    assert first["module"] == "Module.blocks.1.act.GELU.forward.0"
    assert any("train.py" in line for line in first["stack"])
    errors = error_entries(out, 0)
    assert errors[0] == "Functional.gelu.1.forward", errors  # block 0 and block 1's fc pass: only noise
    assert "Module.blocks.0.Block.forward.0" not in errors


def test_a_doubled_learning_rate_is_the_update_of_step_0(dumps):
    summary = compare(dumps, "lr")
    first = summary["first_divergence"]
    # step 0's forward and backward agree; the optimizer's first parameter update (recorded under its node,
    # as msprobe records it) is where the runs part
    assert (first["name"], first["step"], first["kind"], first["module"]) == \
        ("Tensor.add_.0.forward", 0, "update", "optimizer"), first
    assert first["reason"].startswith("the update of step 0 diverged at this optimizer call")
    assert error_entries(dumps / "out_lr", 0)[0] == "Tensor.add_.0.forward"


def test_a_linear_under_bfloat16_autocast_is_a_precision_divergence(dumps):
    """Every float32 entry is one rounding from the float64 bench; the bfloat16 linear is 2^16 times more."""
    summary = compare(dumps, "lowp")
    first = summary["first_divergence"]
    assert (first["name"], first["step"], first["kind"]) == ("Functional.linear.1.forward", 0, "precision"), first
    assert "bfloat16 vs float64" in first["reason"] and "float32" in first["reason"]
    errors = error_entries(dumps / "out_lowp", 0)
    assert errors[0] == "Functional.linear.1.forward" and len(errors) <= 3, errors


def test_a_noise_reference_accepts_a_known_difference_and_finds_the_new_bug(dumps, tmp_path):
    """The target stack always used a tanh GELU (the GELU run, known to train well, is the reference); now the
    learning rate is doubled too. Without the reference the GELU is named; with it, the update of step 0."""
    assert compare(dumps, "gelu_lr")["first_divergence"]["name"] == "Functional.gelu.1.forward"
    out = tmp_path / "gelu_lr"
    done = subprocess.run([PROBE, "compare", dumps / "gelu_lr", dumps / "bench", "-o", out, "--quiet",
                           "--noise-reference", dumps / "gelu"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    summary = read_summary(out)
    assert summary["noise_reference"] == [str(dumps / "gelu"), str(dumps / "bench")]
    first = summary["first_divergence"]
    assert (first["name"], first["step"], first["kind"]) == ("Tensor.add_.0.forward", 0, "update"), first
    assert error_entries(out, 0)[0] == "Tensor.add_.0.forward"
    known = [r for r in read_csv(result_csv(out, step=0)) if "known difference" in r["Err_message"]]
    assert known and {r["Result"] for r in known} == {"warning"}  # the GELU's "approximate" argument
    # the reference against itself names nothing; probe graph gives compare's answer
    itself = tmp_path / "gelu_ref"
    done = subprocess.run([PROBE, "compare", dumps / "gelu", dumps / "bench", "-o", itself, "--quiet",
                           "--noise-reference", dumps / "gelu", dumps / "bench"], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0 and read_summary(itself)["first_divergence"] is None, done.stderr
    graph = subprocess.run([PROBE, "graph", dumps / "gelu_lr", dumps / "bench", "-o", tmp_path / "graph",
                            "--noise-reference", dumps / "gelu"], capture_output=True, text=True, timeout=240)
    assert graph.returncode == 0, graph.stderr
    assert "first divergence of the job: step 0 rank 0: Tensor.add_.0.forward" in " ".join(graph.stdout.split())


def test_a_missing_noise_reference_is_a_clear_error(dumps, tmp_path):
    done = subprocess.run([PROBE, "compare", dumps / "clean", dumps / "bench", "-o", tmp_path / "out",
                           "--noise-reference", tmp_path / "nowhere"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--noise-reference" in done.stderr and "nowhere" in done.stderr
    three = subprocess.run([PROBE, "compare", dumps / "clean", dumps / "bench", "-o", tmp_path / "out",
                            "--noise-reference", dumps / "clean", dumps / "bench", dumps / "gelu"],
                           capture_output=True, text=True, timeout=240)
    assert three.returncode == 2 and "one dump" in three.stderr and "Traceback" not in three.stderr

"""Is ``probe acc-check`` right on real models? Errors and skips on clean float32 dumps of real clients.

For each client (a transformers Llama with eager attention, a transformers GPT-2 with SDPA attention and
dropout 0.1, a torchvision ResNet-18; built from configs, no downloads, one training step in train mode),
``probe run`` records a tensor-mode L1 dump (``--task tensor --level L1``), then ``probe acc-check`` re-runs
every API. The dumps are clean (float32, no bug): every error is a false alarm. Prints one table (APIs,
pass, warning, error, skipped per model) and each error's and skip's name and message.

``--plant`` also checks that the pre-check still finds a wrong kernel: it runs ``probe acc-check`` again in a
process where some ``torch.nn.functional`` operators (:data:`PLANTED`: SiLU, GELU, ReLU, SDPA, BatchNorm,
max pooling) return 1.001 x their result on the tested run only (the float64 benchmark stays right); every
call of those must be an error (the table shows found/calls per operator).

    python benchmarks/acc_check_real.py [--models llama gpt2 resnet] [--plant] [--workdir DIR]
    python benchmarks/acc_check_real.py --train llama       # the training script itself (what probe run runs)

torchvision needs the shim of examples/shim on PYTHONPATH (set here for the subprocesses).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = [sys.executable, "-c", "import sys; from probe_core.cli import main; sys.exit(main(sys.argv[1:]))"]
MODELS = ("llama", "gpt2", "resnet")
#: the tested run of these operators is planted with a 0.1% error (``--plant``): model -> operators
PLANTED = {"llama": ("silu", "scaled_dot_product_attention"), "gpt2": ("gelu", "scaled_dot_product_attention"),
           "resnet": ("relu", "batch_norm", "max_pool2d")}
PLANT = """
import torch, torch.nn.functional as F
def _planted(original):
    def wrong(*args, **kwargs):
        out = original(*args, **kwargs)
        return out * 1.001 if out.dtype != torch.float64 else out  # the tested run only (the bench is float64)
    return wrong
for _op in {ops!r}:
    setattr(F, _op, _planted(getattr(F, _op)))
"""


def _model(name: str):
    import torch

    torch.manual_seed(0)
    if name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                            attn_implementation="eager"))
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                          attn_implementation="sdpa"))
    import torchvision

    return torchvision.models.resnet18(num_classes=10)


def train(name: str) -> None:
    """One training step of ``name`` (train mode: dropout and BatchNorm's batch statistics on)."""
    import torch
    import torch.nn.functional as F

    model = _model(name)
    model.train()
    torch.manual_seed(1)
    if name == "resnet":
        images, labels = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
        F.cross_entropy(model(images), labels).backward()
    else:
        tokens = torch.randint(0, 64, (2, 16))
        model(input_ids=tokens, labels=tokens).loss.backward()


def _env() -> dict[str, str]:
    shim = str(ROOT / "examples" / "shim")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (shim, os.environ.get("PYTHONPATH")))),
            "COLUMNS": "200"}


def dump(name: str, workdir: Path) -> Path:
    """A tensor-mode L1 dump of one training step of ``name``."""
    config = workdir / "config.json"
    config.write_text(json.dumps({"task": "tensor", "level": "L1", "dump_path": str(workdir / f"dump_{name}")}))
    subprocess.run([*PROBE, "run", "-c", str(config), "--overwrite", str(Path(__file__).resolve()), "--train", name],
                   check=True, capture_output=True, env=_env(), cwd=workdir)
    return workdir / f"dump_{name}" / "step0" / "rank0"


def check(step_dump: Path, out: Path, prelude: str = "") -> dict:
    """``probe acc-check`` on ``step_dump`` (``prelude``: Python run first in its process); its summary."""
    command = list(PROBE)
    command[2] = prelude + "\n" + command[2]
    done = subprocess.run([*command, "acc-check", "-api_info", str(step_dump / "dump.json"), "-o", str(out)],
                          capture_output=True, text=True, env=_env())
    if done.returncode not in (0, 1):
        raise SystemExit(f"probe acc-check failed on {step_dump}:\n{done.stderr[-2000:]}")
    return json.loads((out / "summary.json").read_text())


def _rows(out: Path) -> list[dict[str, str]]:
    import csv

    [result] = out.glob("accuracy_checking_result_*.csv")
    with open(result, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--plant", action="store_true", help="also check with a planted operator bug")
    parser.add_argument("--workdir", type=Path, help="keep the dumps and results here (default: a temporary folder)")
    parser.add_argument("--train", choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.train:
        return train(args.train)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="acc_real_"))
    workdir.mkdir(parents=True, exist_ok=True)
    table, notes = [], []
    for name in args.models:
        step_dump = dump(name, workdir)
        start = time.perf_counter()
        summary = check(step_dump, workdir / f"acc_{name}")
        seconds = time.perf_counter() - start
        rows = _rows(workdir / f"acc_{name}")
        bad = [r for r in rows if "error" in (r["Forward Test Success"], r["Backward Test Success"])]
        skips = [r for r in rows if r["Forward Test Success"] == "SKIP"]
        line = [name, summary["apis"], summary["pass"], summary["warning"], summary["error"], summary["skipped"],
                f"{summary['skipped'] / max(summary['apis'], 1):.1%}", f"{seconds:.0f}"]
        notes += [f"  {name} error  {r['API Name']}: {r['Message'][:150]}" for r in bad]
        notes += [f"  {name} SKIP   {r['API Name']}: {r['Message'][:150]}" for r in skips]
        if args.plant:
            planted = check(step_dump, workdir / f"acc_{name}_planted", PLANT.format(ops=PLANTED[name]))
            failing = [r["API Name"] for r in _rows(workdir / f"acc_{name}_planted")
                       if "error" in (r["Forward Test Success"], r["Backward Test Success"])]
            found = []
            for op in PLANTED[name]:
                calls = sum(f".{op}." in r["API Name"] for r in rows)
                if calls:
                    found.append(f"{op} {sum(f'.{op}.' in api for api in failing)}/{calls}")
            line.append(", ".join(found) + f" ({planted['error']} errors)")
        table.append(line)
    header = ["model", "APIs", "pass", "warning", "error", "skipped", "skip %", "check s"]
    header += ["planted bug found"] if args.plant else []
    widths = [max(len(str(row[i])) for row in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        print("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)))
    print("\n".join(notes))
    print(f"(dumps and results in {workdir})")


if __name__ == "__main__":
    main()

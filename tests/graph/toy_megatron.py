"""A toy Megatron-style model run under torch.distributed (gloo, CPU) and dumped by probe.

``python toy_megatron.py OUT WORLD TP PP`` starts WORLD processes; ranks are
laid out Megatron's way (tp fastest, then dp, then pp). Each layer is a
column-parallel linear, gelu, and a row-parallel linear whose partial sums
are all-reduced over the tensor-parallel group; pipeline stages pass the
activation on with send/recv. Weights come from one seeded full model and
are sliced per rank, so any layout computes the same numbers as WORLD=1.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

HIDDEN, FFN, LAYERS, BATCH = 8, 16, 2, 4


class ColumnParallelLinear(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, tp: int, tp_rank: int) -> None:
        super().__init__()
        rows = weight.shape[0] // tp
        self.weight = nn.Parameter(weight[tp_rank * rows:(tp_rank + 1) * rows].clone())
        self.bias = nn.Parameter(bias[tp_rank * rows:(tp_rank + 1) * rows].clone())

    def forward(self, x):
        return nn.functional.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    def __init__(self, weight: torch.Tensor, tp: int, tp_rank: int, group) -> None:
        super().__init__()
        cols = weight.shape[1] // tp
        self.weight = nn.Parameter(weight[:, tp_rank * cols:(tp_rank + 1) * cols].clone())
        self.tp, self.group = tp, group

    def forward(self, x):
        out = nn.functional.linear(x, self.weight)
        if self.tp > 1:
            dist.all_reduce(out, group=self.group)
        # A fresh view (taken on every layout, so all graphs have it): c10d's in-place all_reduce does
        # not bump the tensor's version counter, so a collector caching statistics per tensor object
        # would otherwise report the partial sums for the reduced tensor.
        return out.view_as(out)


class ParallelMLP(nn.Module):
    def __init__(self, full: dict, layer: int, tp: int, tp_rank: int, group) -> None:
        super().__init__()
        self.dense_h_to_4h = ColumnParallelLinear(full[f"{layer}.w1"], full[f"{layer}.b1"], tp, tp_rank)
        self.dense_4h_to_h = RowParallelLinear(full[f"{layer}.w2"], tp, tp_rank, group)

    def forward(self, x):
        return self.dense_4h_to_h(nn.functional.gelu(self.dense_h_to_4h(x)))


class ParallelTransformer(nn.Module):
    def __init__(self, full: dict, first: int, count: int, tp: int, tp_rank: int, group) -> None:
        super().__init__()
        self.layers = nn.ModuleList(ParallelMLP(full, first + i, tp, tp_rank, group) for i in range(count))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


def full_weights() -> dict:
    gen = torch.Generator().manual_seed(7)
    full = {}
    for layer in range(LAYERS):
        full[f"{layer}.w1"] = torch.randn(FFN, HIDDEN, generator=gen) * 0.3
        full[f"{layer}.b1"] = torch.randn(FFN, generator=gen) * 0.1
        full[f"{layer}.w2"] = torch.randn(HIDDEN, FFN, generator=gen) * 0.3
    full["x"] = torch.randn(BATCH, HIDDEN, generator=gen)
    return full


def worker(rank: int, world: int, tp: int, pp: int, out: str, port: int) -> None:
    from probe_torch import PrecisionDebugger

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    dp = world // (tp * pp)
    tp_rank, pp_rank = rank % tp, rank // (tp * dp)
    dp_rank = (rank // tp) % dp
    groups = {}
    for p in range(pp):  # every process creates every group, in the same order
        for d in range(dp):
            members = [p * tp * dp + d * tp + t for t in range(tp)]
            groups[(p, d)] = dist.new_group(members)
    full = full_weights()
    per_stage = LAYERS // pp
    model = ParallelTransformer(full, pp_rank * per_stage, per_stage, tp, tp_rank, groups[(pp_rank, dp_rank)])
    debugger = PrecisionDebugger(task="statistics", level="mix", dump_path=out)
    x = full["x"].clone()
    if pp_rank > 0:  # before start(): c10d writes in place without bumping the version counter
        dist.recv(x, src=rank - tp * dp)
        x.requires_grad_()  # as Megatron marks received activations
    debugger.start(model)
    y = model(x)
    if pp_rank < pp - 1:
        dist.send(y, dst=rank + tp * dp)
    debugger.stop()
    debugger.step()
    dist.barrier()
    dist.destroy_process_group()


def main(out: str, world: int, tp: int, pp: int) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    Path(out).mkdir(parents=True, exist_ok=True)
    mp.spawn(worker, args=(world, tp, pp, out, port), nprocs=world, join=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))

"""A small GPT-like training script with injected bugs and noise variants (no knowledge of probe).

    python train.py --side bench  --variant same                 # the clean reference run
    python train.py --side target --variant same --case gelu_tanh  # the run with one injected bug

``--side bench`` never has a bug (the case is ignored), so one bench run per variant serves every case.
``--side reference`` is a second benign target (no bug, the target's precision and kernels) whose model is
permuted with another seed: the same function, other reduction orders than both the target and the bench.
Against the bench it shows what benign noise looks like, for ``probe compare --noise-reference``.
The variant decides how the bench computes (the target always runs float32, or bf16 autocast in ``bf16``):

* ``same``       both float32, same kernels;
* ``reordered``  the bench model is a permuted copy of the target (residual-stream channels, head
                 channels and MLP hidden units reordered): the same function, every reduction summed in
                 another order (noise ~1e-7);
* ``f64-bench``  the bench runs in float64, the target in float32;
* ``bf16``       both under ``torch.autocast(cpu, bfloat16)``, the bench permuted as in ``reordered`` and
                 with another bf16 GEMM kernel (:class:`SplitKBf16`: the reduction in two bf16-rounded halves).

With ``--world 2`` the script is meant for ``torchrun --nproc_per_node=2``: gloo data parallelism, each rank
trains on its half of the batch, the gradients are averaged with one ``all_reduce`` per step. A case named
``rank1_*`` puts its bug on rank 1 only.

Case knobs live in :data:`BUGS`; ``cases.py`` declares, for each case, which entries a correct answer names.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

VOCAB, SEQ, DIM, HEADS, LAYERS, BATCH = 64, 16, 32, 4, 2, 8
LR, BETAS, EPS, WD, CLIP = 1e-3, (0.9, 0.95), 1e-8, 0.1, 1.0
MASK_FILL = -1e9

#: case -> knobs that differ from the clean run (target side only)
BUGS: dict[str, dict] = {
    "control": {},
    "softmax_scale": {"scale_pow": {1: 1.0}},          # block 1: scores / d instead of / sqrt(d)
    "gelu_tanh": {"gelu_tanh": {0}},                    # block 0: GELU with the tanh approximation
    "lowp_matmul": {"lowp_scores": {1}},               # block 1: q @ k^T below the run's precision
    "causal_mask": {"mask_diag": 1},                    # causal mask off by one: each token sees the next
    "data_token": {"data_token": True},                 # one token of the step-0 batch changed
    "inplace_mask": {"no_clone": {0}},                  # block 0 turns the shared mask into a bias in place
    "backward_gelu": {"bad_gelu_grad": {0}},            # block 0: custom GELU backward drops x*pdf(x)
    "label_smoothing": {"label_smoothing": 0.1},        # loss: label smoothing on
    "lr": {"lr": 2e-3},                                 # AdamW lr doubled
    "weight_decay": {"weight_decay": 0.0},              # AdamW weight decay off
    "adam_eps": {"eps": 1e-5},                          # AdamW eps 1e-5 instead of 1e-8
    "clip_off": {"clip": None},                         # gradient clipping off
    "grad_accum": {"accum_zero": True},                 # zero_grad inside the accumulation loop
    "rank1_gelu_tanh": {"gelu_tanh": {0}},              # 2 ranks: rank 1's block 0 GELU tanh
}


def _fp32(x: torch.Tensor) -> torch.Tensor:
    return aten._to_copy.default(x, dtype=torch.float32)


class SplitKBf16(TorchDispatchMode):
    """Another bf16 GEMM kernel: the reduction split in two halves, each rounded to bfloat16, then added.

    The same function as the one-pass kernel with another summation order and rounding (as between two
    accelerators' bf16 kernels). It works below the torch API and calls aten ops only (a Python `+` would be a
    recorded `Tensor.__add__`, only in the bench), so a dump records the same calls.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (aten.mm.default, aten.addmm.default, aten.bmm.default) and not kwargs:
            with torch._C.DisableTorchFunction():
                bias, (a, b) = (args[0], args[1:3]) if func is aten.addmm.default else (None, args[:2])
                if a.dtype == torch.bfloat16 and a.shape[-1] >= 2:
                    k = a.shape[-1] // 2
                    mm = aten.bmm.default if func is aten.bmm.default else aten.mm.default
                    # aten calls only: a collector that wraps the torch API (Tensor.__add__, ...) sees none
                    n, cut = a.shape[-1], aten.narrow.default
                    out = aten.add.Tensor(_fp32(mm(cut(a, -1, 0, k), cut(b, -2, 0, k))),
                                          _fp32(mm(cut(a, -1, k, n - k), cut(b, -2, k, n - k))))
                    if bias is not None:
                        out = aten.add.Tensor(out, _fp32(bias))
                    return aten._to_copy.default(out, dtype=torch.bfloat16)
        return func(*args, **kwargs)


class GeluFn(torch.autograd.Function):
    """GELU with a hand-written backward (as custom kernels have)."""

    @staticmethod
    def forward(ctx, x, approximate, bad_grad):
        ctx.save_for_backward(x)
        ctx.bad_grad = bad_grad
        return F.gelu(x, approximate=approximate)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        if ctx.bad_grad:  # the bug: the x * pdf(x) term is forgotten
            return grad * cdf, None, None
        pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return grad * (cdf + x * pdf), None, None


class Gelu(nn.Module):
    def __init__(self, approximate: str = "none", bad_grad: bool = False) -> None:
        super().__init__()
        self.approximate, self.bad_grad = approximate, bad_grad

    def forward(self, x):
        return GeluFn.apply(x, self.approximate, self.bad_grad)


class Attention(nn.Module):
    def __init__(self, layer: int, bug: dict, low_dtype: torch.dtype) -> None:
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.scale_pow = bug.get("scale_pow", {}).get(layer, 0.5)
        self.lowp = layer in bug.get("lowp_scores", ())
        self.low_dtype = low_dtype
        self.clone_mask = layer not in bug.get("no_clone", ())

    def forward(self, x, keep):
        b, t, d = x.shape
        hd = d // HEADS
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, HEADS, hd).transpose(1, 2) for z in (q, k, v))
        if self.lowp:  # the bug: this matmul runs below the run's precision
            if self.low_dtype == torch.bfloat16:
                with torch.autocast("cpu", enabled=False):
                    scores = torch.matmul(q.to(torch.bfloat16), k.transpose(-2, -1).to(torch.bfloat16)).to(q.dtype)
            else:  # the run is bf16 already: round the operands to float8
                kt = k.transpose(-2, -1)
                scores = torch.matmul(q.to(self.low_dtype).to(q.dtype), kt.to(self.low_dtype).to(kt.dtype))
        else:
            scores = torch.matmul(q, k.transpose(-2, -1))
        scores = scores / hd ** self.scale_pow
        # the shared keep-mask (1 = may attend) becomes an additive bias; the bug forgets the clone
        bias = keep.clone() if self.clone_mask else keep
        bias.sub_(1.0).mul_(-MASK_FILL)
        att = torch.softmax(scores + bias, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, layer: int, bug: dict) -> None:
        super().__init__()
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.act = Gelu("tanh" if layer in bug.get("gelu_tanh", ()) else "none", layer in bug.get("bad_gelu_grad", ()))
        self.fc2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, layer: int, bug: dict, low_dtype: torch.dtype) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.attn = Attention(layer, bug, low_dtype)
        self.ln2 = nn.LayerNorm(DIM)
        self.mlp = MLP(layer, bug)

    def forward(self, x, keep):
        x = x + self.attn(self.ln1(x), keep)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, bug: dict, low_dtype: torch.dtype) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(VOCAB, DIM)
        self.pos_emb = nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList(Block(i, bug, low_dtype) for i in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.mask_diag = bug.get("mask_diag", 0)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(t))
        keep = torch.ones(t, t, dtype=x.dtype).tril(diagonal=self.mask_diag)
        for block in self.blocks:
            x = block(x, keep)
        return self.head(self.ln_f(x))


def init_weights(model: nn.Module) -> None:
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.02)
            elif p.dim() == 1:  # LayerNorm weights
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.3 if "emb" in name else 1.0 / math.sqrt(p.shape[1]))


def permute(model: GPT, seed: int = 7) -> None:
    """Reorder channels so that the model computes the same function with every reduction reordered."""
    g = torch.Generator().manual_seed(seed)
    pd = torch.randperm(DIM, generator=g)                       # residual stream
    hd = DIM // HEADS
    with torch.no_grad():
        def rows(w, p):
            w.copy_(w[p])

        def cols(w, p):
            w.copy_(w[:, p])

        for emb in (model.tok_emb, model.pos_emb):
            cols(emb.weight, pd)
        for ln in [model.ln_f] + [m for b in model.blocks for m in (b.ln1, b.ln2)]:
            rows(ln.weight, pd)
            rows(ln.bias, pd)
        cols(model.head.weight, pd)
        for block in model.blocks:
            a, m = block.attn, block.mlp
            within = torch.randperm(hd, generator=g)           # q and k channels of each head, same order
            vperm = torch.randperm(hd, generator=g)            # v channels of each head
            qk = torch.cat([h * hd + within for h in range(HEADS)])
            vv = torch.cat([h * hd + vperm for h in range(HEADS)])
            qkv_rows = torch.cat([qk, DIM + qk, 2 * DIM + vv])
            cols(a.qkv.weight, pd)
            rows(a.qkv.weight, qkv_rows)
            rows(a.qkv.bias, qkv_rows)
            cols(a.proj.weight, vv)
            rows(a.proj.weight, pd)
            rows(a.proj.bias, pd)
            ph = torch.randperm(4 * DIM, generator=g)          # MLP hidden units
            cols(m.fc1.weight, pd)
            rows(m.fc1.weight, ph)
            rows(m.fc1.bias, ph)
            cols(m.fc2.weight, ph)
            rows(m.fc2.weight, pd)
            rows(m.fc2.bias, pd)


def batches(steps: int, bug: dict) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    out = [torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g) for _ in range(steps)]
    if bug.get("data_token"):
        out[0][3, 5] = (out[0][3, 5] + 1) % VOCAB
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--side", choices=("bench", "target", "reference"), required=True)
    parser.add_argument("--variant", choices=("same", "reordered", "f64-bench", "bf16"), required=True)
    parser.add_argument("--case", default="control", choices=sorted(BUGS))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--world", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(1)
    rank = 0
    if args.world > 1:
        dist.init_process_group("gloo")
        rank = dist.get_rank()
    bug = {} if args.side in ("bench", "reference") else dict(BUGS[args.case])
    if args.case.startswith("rank1_") and rank != 1:
        bug = {}
    bf16 = args.variant == "bf16"
    dtype = torch.float64 if args.side == "bench" and args.variant == "f64-bench" else torch.float32

    model = GPT(bug, torch.float8_e4m3fn if bf16 else torch.bfloat16)
    init_weights(model)
    if args.side == "bench" and args.variant in ("reordered", "bf16"):
        permute(model)
    elif args.side == "reference":
        permute(model, seed=11)
    model.to(dtype)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": bug.get("weight_decay", WD)},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=bug.get("lr", LR), betas=BETAS, eps=bug.get("eps", EPS), foreach=False)
    clip = bug.get("clip", CLIP)
    data = batches(args.steps, bug)
    loss_dtype = torch.promote_types(dtype, torch.float32)

    kernel = SplitKBf16() if args.side == "bench" and bf16 else contextlib.nullcontext()
    with kernel:
        fit(args, model, optimizer, data, bug, clip, rank, bf16, loss_dtype)
    if args.world > 1:
        dist.destroy_process_group()


def fit(args, model, optimizer, data, bug, clip, rank, bf16, loss_dtype) -> None:
    accum = 2
    for step in range(args.steps):
        rows = data[step]
        if args.world > 1:
            rows = rows[rank::args.world]
        optimizer.zero_grad(set_to_none=True)
        parts = rows.chunk(accum)
        for micro, part in enumerate(parts):
            if micro and bug.get("accum_zero"):  # the bug: the first micro-batch's gradients are dropped
                optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(part[:, :-1])  # the loss in float32 at least (float64 in a float64 run)
                loss = F.cross_entropy(logits.reshape(-1, VOCAB).to(loss_dtype), part[:, 1:].reshape(-1),
                                       label_smoothing=bug.get("label_smoothing", 0.0))
            (loss / accum).backward()
        if args.world > 1:
            grads = [p.grad for p in model.parameters()]
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat)
            flat /= args.world
            offset = 0
            for g in grads:
                g.copy_(flat[offset:offset + g.numel()].view_as(g))
                offset += g.numel()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip) if clip else None
        optimizer.step()
        if rank == 0 and os.environ.get("LOCALISE_VERBOSE"):
            print(f"step {step}: loss {loss.item():.6f} grad norm {float(norm) if norm is not None else 'n/a'}")


if __name__ == "__main__":
    main()

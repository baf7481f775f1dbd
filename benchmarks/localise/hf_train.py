"""Real library models for the localisation suite: a transformers Llama (RoPE, RMSNorm, GQA, SwiGLU, eager
attention with a causal mask from ``finfo``), built from a config (no downloads), trained as real loops train:
an eval forward inside the step, 2 accumulated micro-batches, clipping, AdamW with parameter groups.

    python hf_train.py --side bench --variant f64-bench            # the clean bench (float64)
    python hf_train.py --side target --variant f64-bench --case rms_eps

Knows nothing of probe. ``--side bench`` never has a bug. Variants: ``same`` (both float32), ``reordered`` (the
bench model a permuted copy, :func:`permute`: the same function, every reduction summed in another order),
``f64-bench`` (the bench in float64, msprobe's documented high-precision benchmark), ``bf16`` (both under bf16
autocast; the bench with another bf16 GEMM kernel, :class:`SplitKBf16` of train.py).
"""

from __future__ import annotations

import argparse
import contextlib

import torch

#: case -> what it changes on the target side (each first acts at step 0; cases.py says where)
HF_BUGS = {
    "control": {},
    "rms_eps": {"rms_eps": 1e-2},          # layer 1's post-attention RMSNorm: eps 1e-2 instead of 1e-6
    "rope_theta": {"rope_theta": 5000.0},  # rotary base 5000 instead of 10000
    "silu_gelu": {"act": "gelu"},          # layer 0's MLP activation: GELU instead of SiLU
    "lr": {"lr": 2e-3},                    # AdamW lr doubled (acts in the update of step 0)
    "mask_off": {"mask_off": True},        # layer 1 attends to the future (the mask dropped)
}


def build(case: str, dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    knobs = HF_BUGS[case]
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         rope_theta=knobs.get("rope_theta", 10000.0), attn_implementation="eager")
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(dtype)
    if "rms_eps" in knobs:
        model.model.layers[1].post_attention_layernorm.variance_epsilon = knobs["rms_eps"]
    if knobs.get("act") == "gelu":
        model.model.layers[0].mlp.act_fn = torch.nn.GELU()
    if knobs.get("mask_off"):
        attn = model.model.layers[1].self_attn
        forward = attn.forward

        def no_mask(*args, **kwargs):
            kwargs["attention_mask"] = None
            return forward(*args, **kwargs)

        attn.forward = no_mask
    return model


def permute(model, seed: int = 7) -> None:
    """Reorder channels so that ``model`` computes the same function with every reduction summed in another order.

    Permuted: the residual-stream channels (embedding columns, every RMSNorm weight, the input dim of the q/k/v,
    gate and up projections and of the LM head, the output dim of o_proj and down_proj), the MLP hidden units
    and the attention heads: the key/value groups, and the query heads within each group. RoPE rotates dim pairs
    (i, i + head_dim/2) inside a head at a frequency set by i, so the dims inside a head keep their order.
    """
    config = model.config
    if config.attention_bias or config.mlp_bias:
        raise ValueError("permute: the config has projection biases (attention_bias/mlp_bias), which it does not "
                         "reorder; build the model without them")
    head_dim = model.model.layers[0].self_attn.head_dim
    groups, per_group = config.num_key_value_heads, config.num_attention_heads // config.num_key_value_heads
    g = torch.Generator().manual_seed(seed)
    residual = torch.randperm(config.hidden_size, generator=g)

    def channels(heads: torch.Tensor) -> torch.Tensor:  # the rows of these heads, each head's dims in order
        return (heads[:, None] * head_dim + torch.arange(head_dim)).reshape(-1)

    with torch.no_grad():
        def rows(w, p):
            w.copy_(w[p])

        def cols(w, p):
            w.copy_(w[:, p])

        cols(model.model.embed_tokens.weight, residual)
        if model.lm_head.weight is not model.model.embed_tokens.weight:
            cols(model.lm_head.weight, residual)
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            for norm in (layer.input_layernorm, layer.post_attention_layernorm):
                rows(norm.weight, residual)
            kv_heads = torch.randperm(groups, generator=g)
            q_heads = torch.cat([kv * per_group + torch.randperm(per_group, generator=g) for kv in kv_heads])
            for proj, heads in ((attn.q_proj, q_heads), (attn.k_proj, kv_heads), (attn.v_proj, kv_heads)):
                cols(proj.weight, residual)
                rows(proj.weight, channels(heads))
            cols(attn.o_proj.weight, channels(q_heads))
            rows(attn.o_proj.weight, residual)
            units = torch.randperm(config.intermediate_size, generator=g)
            for proj in (mlp.gate_proj, mlp.up_proj):
                cols(proj.weight, residual)
                rows(proj.weight, units)
            cols(mlp.down_proj.weight, units)
            rows(mlp.down_proj.weight, residual)
        rows(model.model.norm.weight, residual)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=("bench", "target"), required=True)
    parser.add_argument("--variant", choices=("same", "reordered", "f64-bench", "bf16"), default="f64-bench")
    parser.add_argument("--case", default="control", choices=sorted(HF_BUGS))
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    case = args.case if args.side == "target" else "control"
    dtype = torch.float64 if args.side == "bench" and args.variant == "f64-bench" else torch.float32
    model = build(case, dtype)
    if args.side == "bench" and args.variant == "reordered":
        permute(model)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=HF_BUGS[case].get("lr", 1e-3), betas=(0.9, 0.95), eps=1e-8)
    torch.manual_seed(1)
    tokens = torch.randint(0, 64, (args.steps, 2, 4, 16))
    held_out = torch.randint(0, 64, (2, 16))
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if args.variant == "bf16"
                else contextlib.nullcontext())
    kernel = contextlib.nullcontext()
    if args.variant == "bf16" and args.side == "bench":
        from train import SplitKBf16

        kernel = SplitKBf16()
    with kernel:
        for step in range(args.steps):
            model.train()
            for micro in tokens[step]:
                with autocast:
                    loss = model(input_ids=micro, labels=micro).loss / 2
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            model.eval()
            with torch.no_grad(), autocast:
                eval_loss = model(input_ids=held_out, labels=held_out).loss
            print(f"step {step} loss {loss.item() * 2:.6f} eval {eval_loss.item():.6f}")


if __name__ == "__main__":
    main()

"""The injected-bug cases of the localisation suite and what a correct answer names.

A case's bug lives in ``train.py`` (:data:`train.BUGS`); here each case says where a correct answer points:

* ``step`` / ``rank``: the step and rank where the bug first acts (the answer must be there);
* ``hit``: entry patterns, each ``NAME_REGEX`` or ``NAME_REGEX @ PARENT_REGEX`` (full matches; the parent is
  the entry's parent module in the dump's construct.json). An answer hits when its entry (target name or
  bench name) matches one of them;
* ``update``: the bug acts in the optimizer update of ``step``, which the dump does not record as calls
  (optimizer calls are no entries): a ``parameters_grad`` entry of that step, or an entry recorded after the
  step's last backward entry (the gradient clipping calls, a collective on the gradients), is a hit;
* ``near``: patterns of answers that point at the first visible consequence rather than the cause (the
  first entry that reads the diverged parameters at a later step, the block that reads a clobbered
  tensor); ``near_steps`` the steps where a near answer may be. Near answers are counted apart, never as
  hits.

The control case has no bug: its correct answer names nothing.

``model``: ``gpt`` (``train.py``, the suite's own model, every variant) or ``llama`` (``hf_train.py``: a
transformers ``LlamaForCausalLM`` built from a config, variants :data:`MODEL_VARIANTS`); a Llama case's name is
``llama_`` + its ``hf_train.py --case``, and it shares its bench with the other Llama cases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: the first entries of a step that read parameters (where a step-N update divergence first shows)
FIRST_PARAM_READERS = (r"Functional\.(embedding|linear|layer_norm)\.\d+\.forward", r"Module\..*\.forward\.\d+")


@dataclass(frozen=True)
class Case:
    name: str
    kind: str
    what: str
    hit: tuple[str, ...] = ()
    step: int = 0
    rank: int = 0
    update: bool = False
    near: tuple[str, ...] = ()
    near_steps: tuple[int, ...] = ()
    world: int = 1
    control: bool = field(default=False)
    model: str = "gpt"

    @property
    def script_case(self) -> str:
        """The case as the model's training script names it (``--case``)."""
        return self.name.removeprefix(f"{self.model}_") if self.model != "gpt" else self.name


#: the variants each model's training script has
MODEL_VARIANTS = {"gpt": ("same", "reordered", "f64-bench", "bf16"),
                  "llama": ("same", "reordered", "f64-bench", "bf16")}


CASES: tuple[Case, ...] = (
    Case("softmax_scale", "forward", "block 1 attention divides the scores by d instead of sqrt(d)",
         hit=(r"Tensor\.__truediv__\.\d+\.forward @ Module\.blocks\.1\.attn\.Attention\.forward\.0",
              r"Module\.blocks\.1\.attn\.Attention\.forward\.0")),
    Case("gelu_tanh", "forward", "block 0 MLP: GELU with the tanh approximation",
         hit=(r"Functional\.gelu\.\d+\.forward @ Module\.blocks\.0\.mlp\.act\.Gelu\.forward\.0",
              r"Module\.blocks\.0\.mlp\.act\.Gelu\.forward\.0")),
    Case("lowp_matmul", "low precision",
         "block 1 attention: q @ k^T in bfloat16 (float8-rounded operands in the bf16 variant)",
         hit=(r"(Torch\.matmul|Tensor\.to)\.\d+\.forward @ Module\.blocks\.1\.attn\.Attention\.forward\.0",
              r"Module\.blocks\.1\.attn\.Attention\.forward\.0")),
    Case("causal_mask", "mask", "causal mask off by one (tril diagonal=1: each token sees the next)",
         hit=(r"Tensor\.tril\.0\.forward",),
         near=(r".* @ Module\.blocks\.0\.attn\.Attention\.forward\.0",), near_steps=(0,)),
    Case("data_token", "data", "one token of the step-0 batch changed",
         hit=(r"Functional\.embedding\.0\.forward", r"Module\.tok_emb\.Embedding\.forward\.0",
              r"Tensor\.__getitem__\.0\.forward")),
    Case("inplace_mask", "in-place",
         "block 0 turns the shared causal mask into a bias in place (clone forgotten): block 1 reads a clobbered mask",
         hit=(r"Tensor\.(clone|sub_|mul_)\.\d+\.forward @ Module\.blocks\.0\.attn\.Attention\.forward\.0",),
         near=(r".* @ Module\.blocks\.1\.attn\.Attention\.forward\.0",
               r"Module\.blocks\.1\.attn\.Attention\.forward\.0"), near_steps=(0,)),
    Case("backward_gelu", "backward", "block 0: the custom GELU's backward forgets the x*pdf(x) term",
         hit=(r"Module\.blocks\.0\.mlp\.act\.Gelu\.backward\.0", r"Functional\.gelu\.0\.backward",
              r".* @ Module\.blocks\.0\.mlp\.act\.Gelu\.backward\.0")),  # a call of its Python backward
    Case("label_smoothing", "loss", "cross-entropy with label smoothing 0.1",
         hit=(r"Functional\.cross_entropy\.0\.forward",)),
    Case("lr", "optimizer", "AdamW learning rate doubled", update=True,
         near=FIRST_PARAM_READERS, near_steps=(1, 2)),
    Case("weight_decay", "optimizer", "AdamW weight decay 0 instead of 0.1", update=True,
         near=FIRST_PARAM_READERS, near_steps=(1, 2)),
    Case("adam_eps", "optimizer", "AdamW eps 1e-5 instead of 1e-8", update=True,
         near=FIRST_PARAM_READERS, near_steps=(1, 2)),
    Case("clip_off", "clipping", "gradient clipping (max norm 1.0, active: norm ~1.4) switched off", update=True,
         near=FIRST_PARAM_READERS, near_steps=(1, 2)),
    Case("grad_accum", "accumulation", "zero_grad inside the 2-micro-batch accumulation loop", update=True,
         near=FIRST_PARAM_READERS, near_steps=(1, 2)),
    Case("rank1_gelu_tanh", "multi-rank", "2-rank gloo data parallel; rank 1's block 0 GELU uses tanh",
         hit=(r"Functional\.gelu\.\d+\.forward @ Module\.blocks\.0\.mlp\.act\.Gelu\.forward\.0",
              r"Module\.blocks\.0\.mlp\.act\.Gelu\.forward\.0"), rank=1, world=2),
    Case("control", "control", "no bug: the correct answer names nothing", control=True),
    # a transformers Llama (hf_train.py): RoPE, RMSNorm, GQA, SwiGLU, eager attention, a causal mask from finfo
    Case("llama_rms_eps", "forward", "layer 1's post-attention RMSNorm: eps 1e-2 instead of 1e-6", model="llama",
         hit=(r".* @ Module\.model\.layers\.1\.post_attention_layernorm\.LlamaRMSNorm\.forward\.0",
              r"Module\.model\.layers\.1\.post_attention_layernorm\.LlamaRMSNorm\.forward\.0")),
    Case("llama_rope_theta", "position encoding", "rotary base 5000 instead of 10000", model="llama",
         hit=(r".* @ Module\.model\.rotary_emb\.LlamaRotaryEmbedding\.forward\.0",
              r"Module\.model\.rotary_emb\.LlamaRotaryEmbedding\.forward\.0")),
    Case("llama_silu_gelu", "forward", "layer 0's MLP activation: GELU instead of SiLU", model="llama",
         hit=(r"Functional\.(gelu|silu)\.0\.forward", r"Module\.model\.layers\.0\.mlp\.act_fn\.\w+\.forward\.0")),
    Case("llama_lr", "optimizer", "AdamW learning rate doubled", model="llama", update=True,
         near=FIRST_PARAM_READERS, near_steps=(1, 2)),
    Case("llama_mask_off", "mask", "layer 1 attends to the future (its attention mask dropped)", model="llama",
         hit=(r".* @ Module\.model\.layers\.1\.self_attn\.LlamaAttention\.forward\.0",
              r"Module\.model\.layers\.1\.self_attn\.LlamaAttention\.forward\.0")),
    Case("llama_control", "control", "no bug: the correct answer names nothing", control=True, model="llama"),
)

BY_NAME = {case.name: case for case in CASES}


def _compiled(patterns: tuple[str, ...]) -> list[tuple[re.Pattern, re.Pattern | None]]:
    out = []
    for pattern in patterns:
        name, _, parent = pattern.partition(" @ ")
        out.append((re.compile(name.strip()), re.compile(parent.strip()) if parent else None))
    return out


def matches(patterns: tuple[str, ...], names: list[tuple[str, str]], parent_of) -> bool:
    """Whether one of ``names`` ((name, side) pairs) fully matches a pattern, its parent the pattern's parent part."""
    for name_re, parent_re in _compiled(patterns):
        for name, side in names:
            if name_re.fullmatch(name) and (parent_re is None or parent_re.fullmatch(parent_of(name, side) or "")):
                return True
    return False


def judge(case: Case, answer: dict | None, parent_of, is_update) -> str:
    """``hit``, ``near``, ``miss`` or ``none`` (the answer names nothing) — ``hit`` for a silent control.

    ``answer``: ``{"step", "rank", "name", "bench_name"}`` or None (``name`` is the target dump's entry,
    ``bench_name`` the bench dump's, used only when ``name`` is empty); ``parent_of(step, rank, name, side)``
    and ``is_update(step, rank, name, side)`` look the entry up in that side's dump (``"target"``/``"bench"``).
    """
    if case.control:
        return "hit" if answer is None else "miss"
    if answer is None:
        return "none"
    step, rank = answer.get("step"), answer.get("rank")
    # the answer's place is the target's entry; the bench's only for an entry the target does not have
    names = [(answer["name"], "target")] if answer.get("name") else [(answer.get("bench_name") or "", "bench")]
    parent = lambda name, side: parent_of(step, rank, name, side)  # noqa: E731
    if step == case.step and rank == case.rank:
        if matches(case.hit, names, parent):
            return "hit"
        if case.update and any(is_update(step, rank, n, side) for n, side in names):
            return "hit"
    if rank == case.rank and step in case.near_steps and matches(case.near, names, parent):
        return "near"
    return "miss"

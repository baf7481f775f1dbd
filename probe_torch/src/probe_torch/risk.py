"""How much a PyTorch API risks precision, for config.json's ``risk_level`` (msprobe's classification).

``CORE`` APIs do the heavy arithmetic where precision problems start (matrix
products, convolutions, normalisations, embeddings, attention, fused
optimizers, collectives); ``LOW`` APIs only move, copy, cast or create values
(views and shape changes, splits and joins, dtype casts, factories); everything
else is ``FOCUS``. ``risk_level: FOCUS`` (the default) records CORE and FOCUS,
``CORE`` only CORE, ``ALL`` every API. The class goes by the API's name without
its prefix (``Tensor.reshape`` → ``reshape``), so ``Torch.cat`` and ``Tensor.cat``
share it.

One deliberate difference from msprobe 26.2: its CORE table misses ``linear``
and ``chain_matmul`` (two names run together), so ``risk_level: CORE`` there
leaves ``Functional.linear`` out; probe keeps them CORE.
"""

from __future__ import annotations

from probe_torch.apis import DISTRIBUTED

_MATRIX = ("matmul", "__matmul__", "mm", "bmm", "mv", "addmm", "addmm_", "addbmm", "addbmm_", "baddbmm",
           "baddbmm_", "addmv", "addmv_", "addr", "addr_", "chain_matmul", "linear", "bilinear",
           "linalg.matmul", "linalg.multi_dot", "linalg.vecdot")
_CONVOLUTION = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                "conv_tbc", "convolution", "_convolution")
_NORMALISATION = ("batch_norm", "instance_norm", "layer_norm", "group_norm", "local_response_norm",
                  "_batch_norm_impl_index", "batch_norm_elemt", "batch_norm_stats", "batch_norm_update_stats",
                  "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts", "batch_norm_backward_elemt",
                  "batch_norm_backward_reduce")
_EMBEDDING_ATTENTION = ("embedding", "embedding_bag", "multi_head_attention_forward",
                        "scaled_dot_product_attention")
_FUSED_OPTIMIZERS = ("_fused_adam_", "_fused_adamw_")
_COLLECTIVES = (*DISTRIBUTED, "_reduce_scatter_base", "_all_gather_base")

CORE = frozenset((*_MATRIX, *_CONVOLUTION, *_NORMALISATION, *_EMBEDDING_ATTENTION, *_FUSED_OPTIMIZERS,
                  *_COLLECTIVES))

_SHAPE = ("reshape", "reshape_as", "view", "view_as", "flatten", "unflatten", "ravel", "squeeze", "unsqueeze",
          "expand", "expand_as", "repeat", "repeat_interleave", "tile", "unfold", "transpose", "permute",
          "moveaxis", "movedim", "swapaxes", "swapdims", "atleast_1d", "atleast_2d", "atleast_3d", "align_as",
          "align_to")
_SPLIT_JOIN = ("chunk", "unsafe_chunk", "split", "split_with_sizes", "unsafe_split", "unsafe_split_with_sizes",
               "tensor_split", "hsplit", "vsplit", "dsplit", "unbind", "stack", "cat", "concat", "concatenate",
               "hstack", "vstack", "dstack", "column_stack", "row_stack")
_CAST_COPY = ("to", "type_as", "float", "double", "half", "bfloat16", "int", "long", "byte", "char", "bool",
              "cfloat", "numpy", "clone", "clamp", "__bool__", "stride")
_FACTORY = ("empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "arange",
            "linspace", "logspace", "eye", "identity", "diag", "diagflat", "diag_embed", "triu", "tril",
            "triu_indices", "tril_indices")

LOW = frozenset((*_SHAPE, *_SPLIT_JOIN, *_CAST_COPY, *_FACTORY))


def api_risk(api: str) -> str:
    """``CORE``, ``FOCUS`` or ``LOW`` for an API named msprobe's way (``Functional.layer_norm``)."""
    short = api.split(".", 1)[-1]
    if short in CORE:
        return "CORE"
    return "LOW" if short in LOW else "FOCUS"

"""Checker ``env``: environment variables that change numerics or communication.

Only variables whose names start with one of the prefixes below (plus
``config_check.env_prefixes``) are collected. Values of secret-like names
(tokens, keys, passwords, credentials, cookies, ...) are replaced by
``<redacted>`` at collection time, and credentials inside other values
(``https://user:pass@host``) are cut out: they never reach the pack
(:mod:`probe_config_check.secrets`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from probe_core.api import CheckContext, CheckRow

from probe_config_check.common import diff_rows, option_list
from probe_config_check.secrets import REDACTED, is_secret, redact

__all__ = ["REDACTED", "collect", "compare", "is_secret"]

PREFIXES = (
    "HCCL_", "NCCL_", "GLOO_", "CUDA_", "CUDNN_", "CUBLAS_", "CUBLASLT_", "NVIDIA_TF32", "ASCEND_", "ACL_",
    "NPU_", "ATB_", "LCCL_", "PYTORCH_", "TORCH_", "TORCHINDUCTOR_", "OMP_", "MKL_", "OPENBLAS_", "XLA_", "TF_",
    "MS_", "GLOG_", "HF_", "TOKENIZERS_PARALLELISM", "PYTHONHASHSEED", "TASK_QUEUE_ENABLE",
    "INF_NAN_MODE_ENABLE", "COMBINED_ENABLE", "MULTI_STREAM_MEMORY_REUSE", "CPU_AFFINITY_CONF",
    "ENABLE_DETERMINISTIC", "DETERMINISTIC", "MEGATRON_", "DS_", "ACCELERATE_",
)


def select(environ: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The checker's data for a whole environment: the variables with a known prefix, secrets redacted."""
    prefixes = PREFIXES + tuple(option_list(options, "env_prefixes"))
    variables = {name: redact(name, str(value)) for name, value in environ.items() if name.startswith(prefixes)}
    return {"variables": dict(sorted(variables.items()))}


def collect(ctx: CheckContext) -> dict[str, Any]:
    return select(os.environ, ctx.options)


def _same(a: Any, b: Any) -> bool:
    return a == b


def compare(bench: dict[str, Any], target: dict[str, Any]) -> list[CheckRow]:
    rows = diff_rows(bench.get("variables", {}), target.get("variables", {}), _same)
    return [CheckRow(r.item, r.bench, r.target, True, "secret: redacted, not compared")
            if REDACTED in (r.bench, r.target) and r.bench == r.target else r for r in rows]

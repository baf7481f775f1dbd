"""Checker ``pip``: versions of the installed framework and training packages.

Every installed distribution is recorded; the ones compared are the
framework/training packages below plus ``config_check.packages``. Versions
are compared as versions (``2.1`` equals ``2.1.0``).
"""

from __future__ import annotations

import importlib.metadata as md
import re
from collections.abc import Iterable, Mapping
from typing import Any

from probe_core.api import CheckContext, CheckRow

from probe_config_check.common import option_list

COMPARED = (
    "torch", "torch-npu", "torchvision", "torchaudio", "mindspore", "mindformers", "mindspeed", "numpy",
    "transformers", "deepspeed", "megatron-core", "accelerate", "datasets", "peft", "apex", "flash-attn",
    "triton", "tokenizers", "safetensors", "sentencepiece", "transformer-engine", "einops", "xformers",
    "trl", "vllm", "jax", "tensorflow", "scipy", "tiktoken", "bitsandbytes",
)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def record(installed: Iterable[tuple[str, str]], options: Mapping[str, Any]) -> dict[str, Any]:
    """The checker's data for (name, version) pairs: every package, and which of them are compared."""
    packages: dict[str, str] = {}
    for name, version in installed:
        if name:
            packages.setdefault(normalise(name), version)
    compared = sorted({normalise(n) for n in COMPARED + tuple(option_list(options, "packages"))})
    return {"packages": dict(sorted(packages.items())), "compared": compared}


def collect(ctx: CheckContext) -> dict[str, Any]:
    return record(((dist.metadata["Name"], dist.version) for dist in md.distributions()), ctx.options)


def same_version(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return a == b
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def compare(bench: dict[str, Any], target: dict[str, Any]) -> list[CheckRow]:
    b_pkgs, t_pkgs = bench.get("packages", {}), target.get("packages", {})
    names = sorted(set(bench.get("compared", [])) | set(target.get("compared", [])))
    rows = []
    for name in names:
        b, t = b_pkgs.get(name), t_pkgs.get(name)
        if b is None and t is None:
            continue
        note = "" if b is not None and t is not None else f"not installed in {'bench' if b is None else 'target'}"
        rows.append(CheckRow(name, b, t, same_version(b, t), note))
    return rows

"""Checker ``hyperparameters``: training arguments from shell scripts, YAML/JSON configs or Megatron.

Names are normalised so equivalent spellings compare (``--lr``, ``lr:``,
``learning_rate``, ``--learning-rate`` are all ``learning_rate``); values are
parsed (``1e-4`` equals ``0.0001``). Keys naming paths, folders, logging or
addresses are not compared (extend with ``config_check.hyperparameters_ignore``);
values of secret-like names (``--hf-token``, ``--api-key``) are never packed.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probe_core.api import CheckContext, CheckError, CheckRow, loads, MAX_DEPTH, parse_yaml, read_capped

from probe_config_check.common import option_list, values_equal
from probe_config_check.secrets import redact

ALIASES = {
    "learning_rate": ("lr", "learning_rate", "learningrate", "base_lr", "max_lr"),
    "min_learning_rate": ("min_lr", "min_learning_rate"),
    "micro_batch_size": ("micro_batch_size", "mbs", "per_device_train_batch_size", "micro_batch",
                         "train_micro_batch_size_per_gpu"),
    "global_batch_size": ("global_batch_size", "gbs", "train_batch_size"),
    "seq_length": ("seq_length", "seq_len", "max_seq_len", "max_seq_length", "sequence_length"),
    "epochs": ("epochs", "num_epochs", "num_train_epochs", "epoch", "max_epochs"),
    "train_iters": ("train_iters", "max_steps", "train_steps", "total_steps", "max_iters"),
    "weight_decay": ("weight_decay", "wd"),
    "seed": ("seed", "random_seed"),
    "gradient_accumulation_steps": ("gradient_accumulation_steps", "grad_accum_steps", "accumulate_grad_batches"),
    "warmup_steps": ("warmup_steps", "lr_warmup_iters", "lr_warmup_steps", "warmup_iters"),
    "warmup_ratio": ("warmup_ratio", "lr_warmup_fraction"),
    "clip_grad": ("clip_grad", "max_grad_norm", "gradient_clipping", "grad_clip"),
    "adam_epsilon": ("adam_eps", "adam_epsilon"),
    "tensor_model_parallel_size": ("tensor_model_parallel_size", "tp", "tensor_parallel_size", "tp_size"),
    "pipeline_model_parallel_size": ("pipeline_model_parallel_size", "pp", "pipeline_parallel_size", "pp_size"),
    "lr_decay_style": ("lr_decay_style", "lr_scheduler_type", "lr_scheduler"),
}
CANONICAL = {alias: name for name, aliases in ALIASES.items() for alias in aliases}
IGNORED = re.compile(r"(^|[._])(paths?|dirs?|files?|folders?|save|load|logs?|wandb|tensorboard|output|"
                     r"addr|master_addr|master_port|port|host|url|exp_name|run_name|project|cache|"
                     r"tokenizer_model|vocab_file|merge_file)([._]|$)", re.IGNORECASE)


def canonical(name: str) -> str:
    """``--Learning-Rate`` → ``learning_rate``; a dotted YAML path keeps its prefix unless the leaf is known."""
    name = name.strip().lstrip("-").replace("-", "_").lower()
    leaf = name.rsplit(".", 1)[-1]
    return CANONICAL.get(leaf, CANONICAL.get(name, name))


def parse_value(value: Any) -> Any:
    """Shell words become numbers/booleans where they look like them."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


# -- shell scripts ---------------------------------------------------------------

_ASSIGN = re.compile(r"^\s*(?:export\s+|local\s+|declare\s+(?:-\w+\s+)?)?([A-Za-z_]\w*)=(.*)$")
_VAR = re.compile(r"\$\{(\w+)(?:\[[@*]\])?\}|\$(\w+)")


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined and bash arrays ``NAME=( ... )`` folded onto one line."""
    lines, pending = [], ""
    for raw in text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines():
        if pending:
            pending += " " + raw
            if ")" in raw.split("#", 1)[0]:
                lines.append(pending)
                pending = ""
            continue
        if re.match(r"^\s*(?:export\s+)?[A-Za-z_]\w*=\(", raw) and ")" not in raw.split("#", 1)[0]:
            pending = raw
            continue
        lines.append(raw)
    if pending:
        lines.append(pending)
    return lines


def _expand(text: str, variables: dict[str, str]) -> str:
    return _VAR.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text)


def parse_shell(text: str) -> dict[str, Any]:
    """``--name value`` / ``--name=value`` / ``--flag`` arguments of a shell script, variables expanded."""
    variables: dict[str, str] = {}
    args: dict[str, Any] = {}
    for line in _logical_lines(text):
        assign = _ASSIGN.match(line)
        if assign:
            value = _expand(assign.group(2).strip(), variables)
            if value.startswith("(") and value.endswith(")"):
                value = value[1:-1]
            try:
                words = shlex.split(value, comments=True)
            except ValueError:
                words = [value]
            variables[assign.group(1)] = " ".join(words)
            continue
        try:
            words = shlex.split(_expand(line, variables), comments=True)
        except ValueError:
            continue
        args.update(_arguments(words))
    return args


def _arguments(words: list[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for i, word in enumerate(words):
        if not word.startswith("--") or len(word) < 3:
            continue
        if "=" in word:
            name, value = word[2:].split("=", 1)
            args[name] = value
        elif i + 1 < len(words) and not (words[i + 1].startswith("--") and len(words[i + 1]) > 2):
            args[word[2:]] = words[i + 1]
        else:
            args[word[2:]] = True
    return args


# -- config files ------------------------------------------------------------------


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: obj} if prefix else {}


def parse_file(path: str) -> dict[str, Any]:
    """Raw name -> value of one script or config file (at most 64 MiB, YAML aliases bounded)."""
    raw = read_capped(path, error=CheckError)
    suffix = Path(path).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _flatten(parse_yaml(raw, where=path, error=CheckError) or {})
    if suffix == ".json":
        try:
            return _flatten(loads(raw, max_depth=MAX_DEPTH))
        except ValueError as exc:
            raise CheckError(f"{path}: not valid JSON ({exc}); fix the config file") from None
    return parse_shell(raw.decode("utf-8", errors="replace"))


def megatron_args() -> dict[str, Any]:
    """Megatron's parsed arguments, when Megatron is running in this process (never imported here)."""
    for module in ("megatron.training.global_vars", "megatron.training", "megatron.global_vars"):
        get_args = getattr(sys.modules.get(module), "get_args", None)
        if get_args is None:
            continue
        try:
            args = get_args()
        except Exception:
            return {}
        return {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, bool, type(None)))}
    return {}


def normalise(sources: list[tuple[str, dict[str, Any]]], options: Mapping[str, Any]) -> dict[str, Any]:
    """The checker's data for (source name, raw name -> value) pairs: names made canonical, values parsed,
    paths/logging and ``config_check.hyperparameters_ignore`` left out, secrets redacted."""
    ignored = [re.compile(p, re.IGNORECASE) for p in option_list(options, "hyperparameters_ignore")]
    params: dict[str, dict[str, Any]] = {}
    for source, raw in sources:
        for name, value in raw.items():
            key = canonical(name)
            if IGNORED.search(key) or any(p.search(key) for p in ignored):
                continue
            value = redact(key, parse_value(value))
            params[key] = {"value": value, "source": f"{source}: {name}"}
    return {"parameters": dict(sorted(params.items())), "sources": [s for s, raw in sources if raw]}


def collect(ctx: CheckContext) -> dict[str, Any] | None:
    sources = [(Path(p).name, parse_file(p)) for p in ctx.shell_paths]
    if ctx.model is not None:
        sources.append(("megatron args", megatron_args()))
    return normalise(sources, ctx.options) if sources else None


def compare(bench: dict[str, Any], target: dict[str, Any]) -> list[CheckRow]:
    b, t = bench.get("parameters", {}), target.get("parameters", {})
    rows = []
    for key in sorted(set(b) | set(t)):
        if key not in b or key not in t:
            side = "bench" if key not in b else "target"
            have = (b.get(key) or t.get(key))
            rows.append(CheckRow(key, b.get(key, {}).get("value"), t.get(key, {}).get("value"), False,
                                 f"missing in {side} ({have['source']})"))
            continue
        same = values_equal(b[key]["value"], t[key]["value"])
        spelled = f"{b[key]['source']} vs {t[key]['source']}"
        rows.append(CheckRow(key, b[key]["value"], t[key]["value"], same, spelled))
    return rows

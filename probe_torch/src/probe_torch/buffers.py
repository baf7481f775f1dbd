"""Buffers a call writes without reading them, recorded as null (as msprobe records them).

A collective's output tensor (``all_gather_into_tensor(output, input)``), a receive buffer, an ``out=``
tensor: before the call their memory holds whatever it held (FSDP2 allocates its all-gather buffers with
``torch.empty`` at every forward), so their statistics are noise that a compare would flag. msprobe 26.2
shows such arguments as ``null`` in ``input_args`` (its ``builtin_ignore_ops.yaml``, by position); probe does
the same, and also where the buffer is passed by keyword (msprobe records ``output_tensor=`` as given). The
call's output shows the buffer as the call left it.
"""

from __future__ import annotations

from typing import Any

#: API -> the (position, keyword) of each argument it writes without reading. msprobe 26.2's table for
#: torch.distributed, torch 2.13's ``all_gather_single``/``reduce_scatter_single`` (which FSDP2 calls), and
#: FSDP2's ``torch.ops.fsdp.all_gather_copy_in``, which copies this rank's shard into a fresh all-gather buffer.
UNREAD_INPUTS: dict[str, tuple[tuple[int, str], ...]] = {
    "Distributed.recv": ((0, "tensor"),),
    "Distributed.irecv": ((0, "tensor"),),
    "Distributed.all_gather": ((0, "tensor_list"),),
    "Distributed.gather": ((1, "gather_list"),),
    "Distributed.scatter": ((0, "tensor"),),
    "Distributed.reduce_scatter": ((0, "output"),),
    "Distributed.all_to_all_single": ((0, "output"),),
    "Distributed.all_to_all": ((0, "output_tensor_list"),),
    "Distributed.all_gather_into_tensor": ((0, "output_tensor"),),
    "Distributed.reduce_scatter_tensor": ((0, "output"),),
    "Distributed.all_gather_single": ((0, "output_tensor"),),
    "Distributed.reduce_scatter_single": ((0, "output"),),
    "Torch.all_gather_copy_in": ((1, "all_gather_output"),),
}
#: API -> the positions of its recorded output shown as null: the whole all-gather buffer ``all_gather_copy_in``
#: returns (only this rank's part is written; its first output is that part). msprobe also hides the tensor
#: ``isend`` sends from its output; probe records it at ``wait()``, as sent, and keeps it.
UNREAD_OUTPUTS: dict[str, tuple[int, ...]] = {"Torch.all_gather_copy_in": (1,)}


def recorded_inputs(api: str, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """``(args, kwargs)`` with the buffers ``api`` writes without reading replaced by None."""
    rule = UNREAD_INPUTS.get(api)
    has_out = bool(kwargs) and kwargs.get("out") is not None
    if rule is None and not has_out:
        return args, kwargs
    args, kwargs = list(args), dict(kwargs)
    if has_out:
        kwargs["out"] = None
    for position, keyword in rule or ():
        if position < len(args):
            args[position] = None
        elif keyword in kwargs:
            kwargs[keyword] = None
    return tuple(args), kwargs


def recorded_output(api: str, kwargs: dict[str, Any], output: Any) -> Any:
    """The output shown: a call that fills ``out=`` and returns nothing (FSDP2's ``split_with_sizes_copy``)
    shows its ``out=`` tensors; the positions :data:`UNREAD_OUTPUTS` names are None."""
    if output is None and kwargs and kwargs.get("out") is not None:
        return kwargs["out"]
    positions = UNREAD_OUTPUTS.get(api)
    if positions is None or not isinstance(output, (list, tuple)):
        return output
    return [None if i in positions else value for i, value in enumerate(output)]

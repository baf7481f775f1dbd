"""What the engine needs from a framework (:class:`TensorOps`) and what a data mode may ask of the engine (:class:`TensorSink`)."""

from __future__ import annotations

from typing import Any, Protocol

#: The statistic keys of a tensor record, in msprobe's order.
STAT_KEYS = ("Max", "Min", "Mean", "Norm")


class TensorOps(Protocol):
    """Tensor operations a collector supplies; data modes use only these.

    ``stats`` starts computing Max/Min/Mean/Norm on the tensor's own device
    and returns an opaque handle at once (no host sync); ``fetch_stats``
    resolves every handle issued since the last fetch in one batch.
    """

    framework: str

    def is_tensor(self, value: Any) -> bool: ...

    def describe(self, tensor: Any) -> dict[str, Any]:
        """``{"type", "dtype", "shape"}`` of a tensor, as msprobe spells them."""

    def requires_grad(self, tensor: Any) -> bool: ...

    def stats(self, tensor: Any) -> Any:
        """A handle for the tensor's statistics (``None`` when they do not apply)."""

    def fetch_stats(self, handles: list[Any]) -> list[tuple[Any, Any, Any, Any] | None]:
        """(Max, Min, Mean, Norm) as Python numbers for each handle, with one host transfer."""

    def raw_bytes(self, tensor: Any) -> Any:
        """A buffer with the tensor's raw bytes (C-contiguous, host memory)."""

    def snapshot(self, tensor: Any) -> Any:
        """A private copy that later in-place changes cannot touch (for saving off-thread)."""

    def save(self, tensor: Any, path: str) -> None:
        """Write a snapshot to ``path`` (loadable safely, e.g. ``torch.load(weights_only=True)``)."""

    tensor_suffix: str

    def encode_other(self, value: Any) -> dict[str, Any] | None:
        """A record for a framework object that is not a tensor (dtype, device, Size), or ``None``."""

    # Optional: ``cached_checksum(tensor, compute)`` returns ``compute()`` once per tensor and version
    # within a batch (md5 mode uses it when present); ``alias(view, source)`` declares equal values.


class TensorSink(Protocol):
    """What the collection offers a data mode while it encodes one tensor."""

    def defer_stats(self, record: dict[str, Any], handle: Any) -> None:
        """Fill ``record``'s Max/Min/Mean/Norm from ``handle`` at the next flush."""

    def save_tensor(self, tensor: Any, label: str) -> str:
        """Save ``tensor`` under the current entry and ``label``; returns its ``data_name``."""


class DataMode(Protocol):
    """A data mode's collection side (registered through ``probe_data_modes``; framework-neutral).

    ``encode`` turns one tensor into its dump.json record, using only ``ops``
    and ``sink``; ``label`` says where the tensor sits in its entry
    (``input.0``, ``output.1``, ``parameters.weight``, ...). When
    ``only_overflow`` is true the collection keeps only entries holding a
    NaN/Inf statistic.
    """

    name: str
    only_overflow: bool

    def encode(self, tensor: Any, ops: TensorOps, sink: TensorSink, label: str) -> dict[str, Any]: ...

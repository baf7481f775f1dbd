"""What the engine needs from a framework (:class:`TensorOps`) and what a data mode may ask of it (:class:`TensorSink`).

The data mode itself is :class:`probe_core.modes.DataMode`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Protocol

#: The statistic keys of a tensor record, in msprobe's order.
STAT_KEYS = ("Max", "Min", "Mean", "Norm")

#: The operations of :class:`TensorOps` a framework may leave out (the base class has neutral defaults).
OPTIONAL_OPERATIONS = frozenset({"new_batch", "values_changed", "once_per_batch", "alias", "nbytes"})
#: Operations the base class builds from the others (a framework overrides those instead).
DERIVED_OPERATIONS = frozenset({"cached_checksum"})


class TensorOps:
    """The tensor operations a collector supplies; the engine and data modes use only these.

    A collector's ops class subclasses this one. The **required** operations
    (``is_tensor`` ... ``encode_other``, plus the ``framework`` and
    ``tensor_suffix`` attributes) raise :class:`NotImplementedError` here.

    ``stats`` starts computing Max/Min/Mean/Norm on the tensor's own device
    and returns an opaque handle at once (no host sync); ``fetch_stats``
    resolves the handles of one batch with one host transfer. The engine
    calls ``new_batch()`` before each such fetch, and ``values_changed()``
    before every in-place call or collective and at the end of each step, so
    no cache outlives the values it describes.

    The **optional** operations (:data:`OPTIONAL_OPERATIONS`) have neutral
    defaults, so the engine and data modes call them unconditionally:

    * ``new_batch()`` — forget per-batch caches (default: nothing to forget);
    * ``values_changed()`` — tensors may have changed where the framework
      cannot see it (an in-place call through another handle, a collective,
      the code between two steps): forget every cached value (default:
      ``new_batch()``);
    * ``once_per_batch(tensor, kind, compute)`` — ``compute()`` at most once
      per tensor (and version) and ``kind`` within a batch, later calls get the
      first result (default: ``compute()`` every time): one checksum per
      tensor, one file for a tensor saved twice;
    * ``alias(view, source)`` — ``view`` holds exactly ``source``'s values, so
      its statistics may be reused (default: a hint that is ignored);
    * ``nbytes(tensor)`` — the size of its data, which bounds the snapshots
      waiting for the writer (default: 0, not counted).

    :attr:`capabilities` names the optional operations a class really
    implements (overrides), so tools and tests can tell a framework's
    shortcuts from the defaults without probing attributes.
    """

    #: The ``framework`` field of dump.json (``"pytorch"``, ``"mindspore"``).
    framework: ClassVar[str] = ""
    #: The file suffix of saved tensors (``".pt"``, ``".npy"``).
    tensor_suffix: ClassVar[str] = ""
    #: The optional operations (names from :data:`OPTIONAL_OPERATIONS`) this class overrides.
    capabilities: ClassVar[frozenset[str]] = frozenset()

    # -- required ---------------------------------------------------------------------

    def is_tensor(self, value: Any) -> bool:
        raise NotImplementedError

    def describe(self, tensor: Any) -> dict[str, Any]:
        """``{"type", "dtype", "shape"}`` of a tensor, as msprobe spells them."""
        raise NotImplementedError

    def requires_grad(self, tensor: Any) -> bool | None:
        """Whether the tensor takes part in autograd (``None``: the framework cannot tell)."""
        raise NotImplementedError

    def stats(self, tensor: Any) -> Any:
        """A handle for the tensor's statistics (``None`` when they do not apply)."""
        raise NotImplementedError

    def fetch_stats(self, handles: list[Any]) -> list[tuple[Any, Any, Any, Any] | None]:
        """(Max, Min, Mean, Norm) as Python numbers for each handle, with one host transfer."""
        raise NotImplementedError

    def raw_bytes(self, tensor: Any) -> Any:
        """A buffer with the tensor's raw bytes (C-contiguous, host memory)."""
        raise NotImplementedError

    def snapshot(self, tensor: Any) -> Any:
        """A private copy that later in-place changes cannot touch (for saving off-thread)."""
        raise NotImplementedError

    def save(self, tensor: Any, path: str) -> int | None:
        """Write a snapshot to ``path`` (loadable safely, e.g. ``torch.load(weights_only=True)``); return the
        bytes written when known (``None``: the writer reads the file's size)."""
        raise NotImplementedError

    def encode_other(self, value: Any) -> dict[str, Any] | None:
        """A record for a framework object that is not a tensor (dtype, device, Size), or ``None``."""
        raise NotImplementedError

    # -- optional (neutral defaults; list what you override in ``capabilities``) -----------------

    def new_batch(self) -> None:
        """Forget what was cached for the batch just fetched (statistics, checksums, aliases)."""

    def values_changed(self) -> None:
        """Tensors may have changed without the framework noticing: forget every cached value."""
        self.new_batch()

    def once_per_batch(self, tensor: Any, kind: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, at most once per tensor, version and ``kind`` within a batch where the framework can
        tell (later calls return the first result)."""
        return compute()

    def alias(self, view: Any, source: Any) -> None:
        """``view`` holds exactly ``source``'s values (reshape, transpose, identity): reuse its statistics."""

    def cached_checksum(self, tensor: Any, compute: Callable[[], str]) -> str:
        """``once_per_batch(tensor, "checksum", compute)``: kept for data modes written before it."""
        return self.once_per_batch(tensor, "checksum", compute)

    def nbytes(self, tensor: Any) -> int:
        """The size of the tensor's data in bytes (0: unknown, not counted against the writer's bound)."""
        return 0


class TensorSink(Protocol):
    """What the collection offers a data mode while it encodes one tensor."""

    def defer_stats(self, record: dict[str, Any], handle: Any) -> None:
        """Fill ``record``'s Max/Min/Mean/Norm from ``handle`` at the next flush."""

    def save_tensor(self, tensor: Any, label: str) -> str:
        """Save ``tensor`` under the current entry and ``label``; returns its ``data_name``."""

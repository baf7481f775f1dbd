"""``torch.save`` of a tensor dump file, with the zip records' CRC-32s from zlib-ng.

A ``.pt`` file is a zip archive, and ``torch.save`` computes each record's CRC-32 with its own routine:
half the time of saving a large tensor (4 MiB of float32: 2.7 ms, 1.4 ms of it the CRC). zlib-ng's CRC-32
runs at memory speed, so :func:`save` writes the archive with torch's writer told to skip the CRCs, then
writes them in itself: where each record's data descriptor and central directory entry hold them (the
local headers of torch's archives carry none). The storage record's CRC comes from the tensor's memory,
the few small records' from the file. The file is ``torch.save``'s, byte for byte, but for its
random serialization id; ``zipfile`` verifies it like any other.

The writer and ``torch.serialization._save`` are torch's private API: on any version where they are not
as expected, on a name that is not ASCII, for a tensor too small to gain (under :data:`MIN_BYTES`), not a
plain dense tensor in host memory, and for an archive that needs zip64 (4 GiB and more), :func:`save` is
plain ``torch.save``. The global ``torch.serialization.set_crc32_options`` is never touched: the training
script's own saves keep it.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import struct
from typing import Any

import torch

try:
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - zlib-ng comes with probe-modes
    from zlib import crc32

_serialization: Any = torch.serialization  # its private _save, _get_storage_alignment
#: below this many bytes a tensor saves with torch.save: its CRC costs less than reading the archive back
MIN_BYTES = 1 << 20

_END = struct.Struct("<IHHHHIIH")  # end of central directory record
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")  # central directory file header
_LOCAL = struct.Struct("<IHHHHHIIIHH")  # local file header
_END_SIG, _CENTRAL_SIG, _LOCAL_SIG = 0x06054B50, 0x02014B50, 0x04034B50
_DESCRIPTOR = struct.pack("<I", 0x08074B50)


def save(tensor: torch.Tensor, path: str) -> None:
    """``torch.save(tensor, path)``, faster for a large tensor (see the module)."""
    storage = _host_storage(tensor)
    if storage is None or storage.nbytes() < MIN_BYTES or not path.isascii() or not _save_unchecked(tensor, path):
        torch.save(tensor, path)
        return
    memory = (ctypes.c_ubyte * storage.nbytes()).from_address(storage.data_ptr())  # what data/0 holds
    fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    try:
        written = _write_crcs(fd, memory)
    finally:
        os.close(fd)
    if not written:
        torch.save(tensor, path)


def _host_storage(tensor: torch.Tensor) -> Any:
    """The storage of a plain dense CPU tensor (``None`` for sparse, quantized, meta, subclasses, devices)."""
    if type(tensor) is not torch.Tensor or tensor.layout != torch.strided or tensor.device.type != "cpu" \
            or tensor.is_quantized:
        return None
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


def _save_unchecked(tensor: torch.Tensor, path: str) -> bool:
    """torch.save's archive with no CRC-32 computed; False where torch's private API is not as expected."""
    try:
        writer = torch._C.PyTorchFileWriter(path, False, _serialization._get_storage_alignment())
        _serialization._save(tensor, writer, pickle, _serialization.DEFAULT_PROTOCOL, False)
        writer.write_end_of_file()
    except (AttributeError, TypeError):
        return False
    return True


def _write_crcs(fd: int, storage: Any) -> bool:
    """Write each record's CRC-32 into its data descriptor and central directory entry (the tensor's storage
    record from ``storage``, its memory; the small ones read back); False when the archive is not laid out
    as torch writes it (zip64, a comment, no data descriptors): nothing is changed then."""
    size = os.fstat(fd).st_size
    if size < _END.size:
        return False
    signature, _, _, _, count, length, directory, comment = _END.unpack(os.pread(fd, _END.size, size - _END.size))
    if signature != _END_SIG or comment or directory == 0xFFFFFFFF or count == 0xFFFF:
        return False
    listing = os.pread(fd, length, directory)
    patches = []
    at = 0
    for _ in range(count):
        if at + _CENTRAL.size > len(listing):
            return False
        fields = _CENTRAL.unpack_from(listing, at)
        flags, method, stored, local, name_n = fields[3], fields[4], fields[8], fields[16], fields[10]
        if fields[0] != _CENTRAL_SIG or not flags & 0x8 or method != 0 or 0xFFFFFFFF in (stored, fields[9], local):
            return False  # not a stored record with a data descriptor, or zip64
        name = listing[at + _CENTRAL.size:at + _CENTRAL.size + name_n]
        head = _LOCAL.unpack(os.pread(fd, _LOCAL.size, local))
        start = local + _LOCAL.size + head[9] + head[10]
        stop = start + stored
        if head[0] != _LOCAL_SIG or stop + 8 > directory or os.pread(fd, 4, stop) != _DESCRIPTOR:
            return False
        whole = name.endswith(b"/data/0") and stored == len(storage)
        value = crc32(storage if whole else os.pread(fd, stored, start)) & 0xFFFFFFFF
        patches.append((stop + 4, directory + at + 16, struct.pack("<I", value)))
        at += _CENTRAL.size + name_n + fields[11] + fields[12]
    for descriptor, central, value in patches:
        os.pwrite(fd, value, descriptor)
        os.pwrite(fd, value, central)
    return True

"""``torch.save`` of a tensor dump file, written with one system call from the tensor's memory.

A ``.pt`` file is a zip archive of stored records: ``data.pkl`` (the pickled tensor, pointing at the storage
record ``data/0``), a few small records, the storage's bytes, and a serialization id. ``torch.save`` pays
for each file: a pickler class made per call, the records written one at a time, and a CRC-32 of each by
torch's own routine (half the time of saving 4 MiB of float32). A tensor dump writes thousands of files a
step, most of them small: on the benchmark's model that per-file cost was a tenth of what a tensor dump adds
to a step (5.6x -> 4.7-4.9x the step's CPU time once written here).

:func:`save` writes the same bytes itself. Every record of the archive but ``data/0`` depends only on the
tensor's *layout* (dtype, shape, strides, storage offset and size, requires_grad, metadata) and on torch's
settings, so torch writes the archive once per layout, into memory: its records, but the storage's bytes,
are the layout's :class:`_Template`. A file of that layout is then the template's records around the
tensor's memory, laid out as torch's writer lays them out: each record's data at the storage alignment, a
data descriptor after it, then the central directory and its end records (zip64's too), under the file's
own archive name (the file name without its extension). The storage's CRC-32 comes from zlib-ng at memory
speed; the serialization id is torch's: the template's hash of the record names, and the hash-combine of
the records' CRC-32s. The file is ``torch.save``'s byte for byte; the tests hold it to that, and each
template is checked when it is made: rebuilt under torch's in-memory archive name, it must give torch's
own bytes, or its layout keeps ``torch.save``.

``torch.save`` itself writes the file for anything else: a name that is not ASCII, a tensor that is not a
plain dense tensor in host memory (sparse, quantized, meta, a subclass, one with attributes of its own),
an archive that would need zip64 (4 GiB and more), and any torch whose private writer is not as expected.
The global ``torch.serialization.set_crc32_options`` is never touched.
"""

from __future__ import annotations

import ctypes
import io
import os
import pickle
import struct
import zipfile
from dataclasses import dataclass
from typing import Any

import torch

try:
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - zlib-ng comes with probe-modes
    from zlib import crc32

_serialization: Any = torch.serialization  # its private _save, _get_storage_alignment
_utils: Any = torch._utils  # its private get_tensor_metadata, _get_obj_state

_LOCAL = struct.Struct("<IHHHHHIIIHH")  # local file header
_DESCRIPTOR = struct.Struct("<IIII")  # data descriptor (signature, CRC-32, sizes)
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")  # central directory file header
_END64 = struct.Struct("<IQHHIIQQQQ")  # zip64 end of central directory record (torch writes one always)
_LOCATOR = struct.Struct("<IIQI")  # zip64 end of central directory locator
_END = struct.Struct("<IHHHHIIH")  # end of central directory record
_LOCAL_SIG, _DESCRIPTOR_SIG, _CENTRAL_SIG, _END_SIG = 0x04034B50, 0x08074B50, 0x02014B50, 0x06054B50
_END64_SIG, _LOCATOR_SIG = 0x06064B50, 0x07064B50
_FLAGS = 0x0808  # sizes in a data descriptor; UTF-8 names
_ID_RECORD = b".data/serialization_id"
_BUFFER_ARCHIVE = b"archive"  # the archive name of torch's in-memory writer
#: larger storages take torch.save: the archive would need zip64 sizes and offsets
MAX_BYTES = 0xFFFFFFFF - (1 << 20)
MAX_TEMPLATES = 4096  # layouts remembered (each a few hundred bytes); beyond, the cache starts again
_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class _Template:
    """The records of torch's archive for one tensor layout, in the order written: (name within the archive,
    data, CRC-32), the storage's data ``None``; the serialization id's first half (a hash of the record
    names), and the storage alignment."""

    records: tuple[tuple[bytes, bytes | None, int], ...]
    names_hash: bytes
    alignment: int


_templates: dict[tuple, _Template | None] = {}  # layout -> its template (None: torch.save for it)


def save(tensor: torch.Tensor, path: str) -> int | None:
    """``torch.save(tensor, path)``, in one system call for a plain dense host tensor (see the module); the
    file's size when this module wrote it (``None`` when torch.save did)."""
    storage = _host_storage(tensor)
    if storage is None or not _archive_name(path) or storage.nbytes() > MAX_BYTES:
        torch.save(tensor, path)
        return None
    memory = _memory(storage)
    layout = _layout(tensor, storage)
    template = _templates.get(layout, False)
    if template is False:
        template = _template(tensor, memory)
        if len(_templates) >= MAX_TEMPLATES:
            _templates.clear()
        _templates[layout] = template
    if template is None:
        torch.save(tensor, path)
        return None
    parts = _archive(template, _archive_name(path), memory)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        return _write_all(fd, parts)
    finally:
        os.close(fd)


def _archive_name(path: str) -> str:
    """The archive name torch's writer gives the file: its name without the extension (``""`` where this
    module leaves the name to torch: not ASCII, a backslash, nothing before the extension)."""
    name = os.path.basename(path)
    if not name.isascii() or "\\" in name:
        return ""
    return name[:name.rfind(".")] if "." in name else name


def _host_storage(tensor: torch.Tensor) -> Any:
    """The storage of a plain dense CPU tensor with no attributes of its own (``None`` for sparse, quantized,
    meta tensors, subclasses, devices, and tensors that pickle their ``__dict__``)."""
    if type(tensor) is not torch.Tensor or tensor.layout != torch.strided or tensor.device.type != "cpu" \
            or tensor.is_quantized:
        return None
    try:
        if _utils._get_obj_state(tensor):
            return None
        return tensor.untyped_storage()
    except (AttributeError, RuntimeError, NotImplementedError):
        return None


def _memory(storage: Any) -> Any:
    """The storage's bytes, without a copy (what ``data/0`` holds)."""
    size = storage.nbytes()
    return (ctypes.c_ubyte * size).from_address(storage.data_ptr()) if size else b""


def _layout(tensor: torch.Tensor, storage: Any) -> tuple:
    """What every record of the archive but the storage's bytes depends on."""
    metadata = _utils.get_tensor_metadata(tensor)
    return (tensor.dtype, tuple(tensor.shape), tensor.stride(), tensor.storage_offset(), storage.nbytes(),
            tensor.requires_grad, tuple(sorted(metadata.items())) if metadata else (),
            _serialization._get_storage_alignment(), _serialization.DEFAULT_PROTOCOL)


def _template(tensor: torch.Tensor, memory: Any) -> _Template | None:
    """The template of ``tensor``'s layout from torch's own archive of it, written into memory; ``None`` when
    torch's private writer is not as expected, or the template does not give torch's bytes back."""
    try:
        alignment = _serialization._get_storage_alignment()
        buffer = io.BytesIO()
        writer = torch._C.PyTorchFileWriter(buffer, True, alignment)
        _serialization._save(tensor, writer, pickle, _serialization.DEFAULT_PROTOCOL, False)
        writer.write_end_of_file()
        expected = buffer.getvalue()
        prefix = _BUFFER_ARCHIVE + b"/"
        records = []
        with zipfile.ZipFile(io.BytesIO(expected)) as archive:
            for info in sorted(archive.infolist(), key=lambda info: info.header_offset):
                name = info.filename.encode()
                if not name.startswith(prefix):
                    return None
                name = name[len(prefix):]
                data = archive.read(info)
                records.append((name, None if name == b"data/0" else data, info.CRC))
    except (AttributeError, TypeError, RuntimeError, ValueError, zipfile.BadZipFile):
        return None
    if [name for name, data, _ in records if data is None] != [b"data/0"] or records[-1][0] != _ID_RECORD \
            or len(records[-1][1] or b"") != 40:
        return None
    template = _Template(tuple(records[:-1]), records[-1][1][:20], alignment)  # type: ignore[index]
    if b"".join(map(bytes, _archive(template, _BUFFER_ARCHIVE.decode(), memory))) != expected:
        return None
    return template


def _archive(template: _Template, archive: str, memory: Any) -> list[Any]:
    """The file's bytes, as buffers to write in order: ``template``'s records under ``archive``/, the storage's
    from ``memory``, each record's data at the alignment as torch's writer places it."""
    folder = archive.encode() + b"/"
    parts: list[Any] = []
    directory: list[bytes] = []
    at = combined = 0
    records = list(template.records)
    records.append((_ID_RECORD, None, 0))
    for name, data, crc in records:
        if name == _ID_RECORD:  # torch's id: the names' hash, then the hash-combine of every CRC before it
            data = template.names_hash + b"%020d" % combined
            crc = crc32(data) & 0xFFFFFFFF
        elif data is None:
            data, crc = memory, crc32(memory) & 0xFFFFFFFF
        full = folder + name
        size = len(data)
        padding = -(at + _LOCAL.size + len(full) + 4) % template.alignment
        extra = b"FB" + struct.pack("<H", padding) + b"Z" * padding
        parts += (_LOCAL.pack(_LOCAL_SIG, 0, _FLAGS, 0, 0, 0, 0, 0, 0, len(full), len(extra)) + full + extra, data,
                  _DESCRIPTOR.pack(_DESCRIPTOR_SIG, crc, size, size))
        directory.append(_CENTRAL.pack(_CENTRAL_SIG, 0, 0, _FLAGS, 0, 0, 0, crc, size, size, len(full), 0, 0, 0, 0,
                                       0, at) + full)
        at += _LOCAL.size + len(full) + len(extra) + size + _DESCRIPTOR.size
        combined = (combined ^ ((crc + 0x9E3779B9 + (combined << 6) + (combined >> 2)) & _U64)) & _U64
    listing = b"".join(directory)
    count, end64 = len(records), at + len(listing)
    parts += (listing, _END64.pack(_END64_SIG, _END64.size - 12, 0x031E, 45, 0, 0, count, count, len(listing), at)
              + _LOCATOR.pack(_LOCATOR_SIG, 0, end64, 1) + _END.pack(_END_SIG, 0, 0, count, count, len(listing), at, 0))
    return parts


def _write_all(fd: int, parts: list[Any]) -> int:
    """Write every buffer of ``parts``, in order (``writev`` may write less than asked); return the bytes."""
    views = [memoryview(part).cast("B") for part in parts]
    total = sum(map(len, views))
    while views:
        written = os.writev(fd, views[:1024])  # IOV_MAX
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if written:
            views[0] = views[0][written:]
    return total

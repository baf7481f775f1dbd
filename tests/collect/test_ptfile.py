"""Tensor files: ``probe_torch.ptfile.save`` writes ``torch.save``'s archive, its CRC-32s computed by zlib-ng.

Every file is held to ``torch.save``'s of the same tensor: the same records, each with the same CRC-32 (but
the random serialization id's), verified by ``zipfile`` and read back by ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
import zipfile

import pytest
import torch

from probe_torch import ptfile


def _records(path) -> dict[str, tuple[int, int]]:
    """{record name without the archive folder: (CRC-32, size)}, after zipfile has checked every CRC."""
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None  # every record's data matches its CRC-32
        return {info.filename.split("/", 1)[1]: (info.CRC, info.file_size) for info in archive.infolist()}


TENSORS = {
    "float32": lambda: torch.randn(1 << 20),
    "bfloat16 view of a larger storage": lambda: torch.randn(3, 512, 1024).to(torch.bfloat16)[1],
    "int64 matrix": lambda: torch.arange(400_000, dtype=torch.int64).reshape(800, 500),
    "small": lambda: torch.randn(16),  # under MIN_BYTES: torch.save itself
    "empty": lambda: torch.empty(0),
    "sparse": lambda: torch.eye(1200).to_sparse(),  # not dense: torch.save itself
    "parameter": lambda: torch.nn.Parameter(torch.randn(1 << 19)),  # a subclass: torch.save itself
}


@pytest.mark.parametrize("make", TENSORS.values(), ids=TENSORS.keys())
def test_the_file_is_torch_saves(tmp_path, make):
    tensor = make()
    ours, theirs = tmp_path / "ours.pt", tmp_path / "theirs.pt"
    ptfile.save(tensor, str(ours))
    torch.save(tensor, str(theirs))
    got, wanted = _records(ours), _records(theirs)
    assert got.keys() == wanted.keys()
    assert {k: v for k, v in got.items() if k != ".data/serialization_id"} == \
        {k: v for k, v in wanted.items() if k != ".data/serialization_id"}
    loaded = torch.load(ours, weights_only=True)
    assert type(loaded) is type(tensor) and loaded.dtype == tensor.dtype
    assert torch.equal(loaded.to_dense(), tensor.to_dense())


def test_the_large_record_is_checked_from_the_file_too(tmp_path, monkeypatch):
    """The storage record's CRC-32 comes from the tensor's memory; it is the CRC of what the file holds."""
    tensor = torch.randn(1 << 19)
    seen = []
    original = ptfile.crc32
    monkeypatch.setattr(ptfile, "crc32", lambda data: seen.append(len(data)) or original(data))
    ptfile.save(tensor, str(tmp_path / "t.pt"))
    assert tensor.numel() * 4 in seen  # the storage, from memory
    assert _records(tmp_path / "t.pt")["data/0"][1] == tensor.numel() * 4


def test_without_torchs_private_writer_it_is_torch_save(tmp_path, monkeypatch):
    """Where torch's private API is not as expected, torch.save writes the file (the global CRC option is
    never switched off)."""
    import types

    without = types.SimpleNamespace(DEFAULT_PROTOCOL=2, _get_storage_alignment=lambda: 64)  # no _save
    monkeypatch.setattr(ptfile, "_serialization", without)
    path = tmp_path / "t.pt"
    ptfile.save(torch.randn(1 << 19), str(path))
    assert _records(path)["data/0"][1] == (1 << 19) * 4
    assert torch.serialization.get_crc32_options()


def test_an_archive_not_laid_out_as_torchs_is_left_alone(tmp_path):
    """A zip with a comment (or zip64, or no data descriptors) is no archive of torch's writer: nothing is
    patched."""
    path = tmp_path / "other.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a/data/0", b"x" * 100)
        archive.comment = b"not torch"
    before = path.read_bytes()
    fd = os.open(path, os.O_RDWR)
    try:
        assert ptfile._write_crcs(fd, memoryview(b"x" * 100)) is False
    finally:
        os.close(fd)
    assert path.read_bytes() == before


def test_a_non_ascii_name_is_saved_by_torch(tmp_path):
    path = tmp_path / "ténsor.pt"
    tensor = torch.randn(1 << 19)
    ptfile.save(tensor, str(path))
    assert torch.equal(torch.load(path, weights_only=True), tensor)
    _records(path)

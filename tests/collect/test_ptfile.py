"""Tensor files: ``probe_torch.ptfile.save`` writes ``torch.save``'s file itself, from a template per layout.

Every file is held to ``torch.save``'s of the same tensor under the same name, byte for byte (the
serialization id included), checked by ``zipfile`` and read back by ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import zipfile

import pytest
import torch

from probe_torch import ptfile

TENSORS = {
    "float32": lambda: torch.randn(1 << 20),
    "small": lambda: torch.randn(16),
    "0-d": lambda: torch.tensor(3.5),
    "empty": lambda: torch.empty(0),  # torch's writer places an empty record otherwise: torch.save itself
    "bfloat16 view of a larger storage": lambda: torch.randn(3, 512, 1024).to(torch.bfloat16)[1],
    "int64 matrix": lambda: torch.arange(400_000, dtype=torch.int64).reshape(800, 500),
    "transposed": lambda: torch.randn(30, 40).t(),
    "bool": lambda: torch.tensor([True, False, True]),
    "requires_grad": lambda: torch.randn(5, requires_grad=True),
    "conjugate view": lambda: torch.randn(4, dtype=torch.complex64).conj(),
    "negative view": lambda: torch.randn(4, dtype=torch.complex64).conj().imag,
    "sparse": lambda: torch.eye(1200).to_sparse(),  # not dense: torch.save itself
    "parameter": lambda: torch.nn.Parameter(torch.randn(1 << 19)),  # a subclass: torch.save itself
}
SAVED_BY_TORCH = {"empty", "sparse", "parameter"}
NAMES = ["Functional.linear.0.forward.input.0.pt", "t.pt", "no_extension", "x" * 150 + ".pt", "a.b.c.d.pt"]


def _same_as_torch_save(tmp_path, tensor, name):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir(exist_ok=True)
    theirs.mkdir(exist_ok=True)
    written = ptfile.save(tensor, str(ours / name))
    torch.save(tensor, str(theirs / name))
    assert written in (None, (ours / name).stat().st_size)
    assert (ours / name).read_bytes() == (theirs / name).read_bytes()
    with zipfile.ZipFile(ours / name) as archive:
        assert archive.testzip() is None  # every record's data matches its CRC-32
    return torch.load(ours / name, weights_only=True), written


@pytest.mark.parametrize("kind", TENSORS)
def test_the_file_is_torch_saves_byte_for_byte(tmp_path, kind):
    tensor = TENSORS[kind]()
    for name in NAMES:  # the archive name (the file's name) moves every record: each pads to the alignment
        loaded, written = _same_as_torch_save(tmp_path, tensor, name)
        assert (written is None) == (kind in SAVED_BY_TORCH)  # the others: written by ptfile itself
        assert type(loaded) is type(tensor) and loaded.dtype == tensor.dtype and loaded.shape == tensor.shape
        assert torch.equal(loaded.to_dense().resolve_conj().resolve_neg(),
                           tensor.detach().to_dense().resolve_conj().resolve_neg())


def test_files_of_one_layout_share_a_template_and_keep_their_own_bytes(tmp_path, monkeypatch):
    """The second tensor of a layout is written from the first one's template: its own data, CRC-32 and
    serialization id, not the first's."""
    made = []
    original = ptfile._template
    monkeypatch.setattr(ptfile, "_template", lambda *args: made.append(1) or original(*args))
    monkeypatch.setattr(ptfile, "_templates", {})
    first, second = torch.randn(300, 7), torch.randn(300, 7)
    _same_as_torch_save(tmp_path, first, "first.pt")
    loaded, written = _same_as_torch_save(tmp_path, second, "second.pt")
    assert written is not None
    assert torch.equal(loaded, second)
    assert len(made) == 1 and len(ptfile._templates) == 1
    ids = {zipfile.ZipFile(tmp_path / "ours" / name).read(f"{name[:-3]}/.data/serialization_id")
           for name in ("first.pt", "second.pt")}
    assert len(ids) == 2  # torch's id holds the records' CRC-32s


def test_the_storage_crc_comes_from_the_tensors_memory(tmp_path, monkeypatch):
    tensor = torch.randn(1 << 19)
    seen = []
    original = ptfile.crc32
    monkeypatch.setattr(ptfile, "crc32", lambda data: seen.append(len(data)) or original(data))
    assert ptfile.save(tensor, str(tmp_path / "t.pt")) == (tmp_path / "t.pt").stat().st_size
    assert tensor.numel() * 4 in seen


def test_a_template_that_does_not_give_torchs_bytes_back_leaves_its_layout_to_torch_save(tmp_path, monkeypatch):
    """Each template is checked when made: laid out under torch's in-memory archive name, it must be torch's
    archive. A layout whose check fails (here: a wrong alignment) is torch.save's from then on."""
    monkeypatch.setattr(ptfile, "_templates", {})
    original = ptfile._Template
    monkeypatch.setattr(ptfile, "_Template", lambda records, names, alignment: original(records, names, alignment + 1))
    tensor = torch.randn(1000)
    assert ptfile.save(tensor, str(tmp_path / "t.pt")) is None  # written by torch.save
    assert list(ptfile._templates.values()) == [None]
    assert (tmp_path / "t.pt").read_bytes() == _torch_bytes(tmp_path, tensor, "t.pt")


def _torch_bytes(tmp_path, tensor, name):
    (tmp_path / "ref").mkdir(exist_ok=True)
    torch.save(tensor, str(tmp_path / "ref" / name))
    return (tmp_path / "ref" / name).read_bytes()


def test_without_torchs_private_writer_it_is_torch_save(tmp_path, monkeypatch):
    """Where torch's private API is not as expected, torch.save writes the file (the global CRC option is
    never switched off)."""
    import types

    without = types.SimpleNamespace(DEFAULT_PROTOCOL=2, _get_storage_alignment=lambda: 64)  # no _save
    monkeypatch.setattr(ptfile, "_serialization", without)
    monkeypatch.setattr(ptfile, "_templates", {})
    path = tmp_path / "t.pt"
    tensor = torch.randn(1 << 19)
    assert ptfile.save(tensor, str(path)) is None
    assert torch.equal(torch.load(path, weights_only=True), tensor)
    assert torch.serialization.get_crc32_options()


@pytest.mark.parametrize("name", ["ténsor.pt", "back\\slash.pt"])
def test_names_torch_reads_its_own_way_are_saved_by_torch(tmp_path, name):
    tensor = torch.randn(100)
    assert ptfile.save(tensor, str(tmp_path / name)) is None
    assert torch.equal(torch.load(tmp_path / name, weights_only=True), tensor)


def test_a_name_torch_refuses_is_refused_as_torch_refuses_it(tmp_path):
    with pytest.raises(RuntimeError, match="invalid file name"):  # nothing before the extension
        ptfile.save(torch.randn(100), str(tmp_path / ".pt"))


def test_a_tensor_with_attributes_of_its_own_is_saved_by_torch(tmp_path):
    """torch pickles a tensor's ``__dict__``: such a tensor has no template."""
    tensor = torch.randn(100)
    tensor.note = "kept"
    assert ptfile.save(tensor, str(tmp_path / "t.pt")) is None
    assert torch.load(tmp_path / "t.pt", weights_only=False).note == "kept"


def test_a_symbolic_link_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere.pt"
    target.write_bytes(b"untouched")
    (tmp_path / "link.pt").symlink_to(target)
    with pytest.raises(OSError):
        ptfile.save(torch.randn(100), str(tmp_path / "link.pt"))
    assert target.read_bytes() == b"untouched"

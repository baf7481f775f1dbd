"""The dump reader on msprobe's real dumps and on damaged files."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

import probe_core.dump.jsonstream as jsonstream
from probe_core.dump import RankDump, discover, parse_entry_name
from probe_core.errors import DumpError
from probe_core.plugins import ProbeWarning, current_registry
from probe_core.selection import spans

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PT = FIXTURES / "msprobe_pytorch_stat_mix"
MS = FIXTURES / "msprobe_mindspore_stat_mix"
PT_FILE = PT / "step0" / "proc11440" / "dump.json"


@pytest.mark.parametrize("chunk", [7, 61, 1 << 22])
def test_streamed_entries_equal_json_load_at_any_chunk_size(monkeypatch, chunk):
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    reference = json.loads(PT_FILE.read_text())["data"]
    dump = RankDump(PT_FILE)
    assert [(e.name, e.data) for e in dump.entries()] == list(reference.items())
    assert list(dump.values().items()) == list(reference.items())  # the same, without entry records
    with dump:
        refs = dump.index()
        assert [dump.load(r).data for r in reversed(refs)] == list(reversed(reference.values()))


def test_entries_streamed_flat_are_the_entries_of_init_and_stay_frozen():
    """RankDump.entries(known=...) makes its entries with DumpEntry.streamed: each is the entry __init__
    makes of the same fields (the flat ones read back by their span), and as frozen."""
    import dataclasses

    from probe_compare.columnar import Forms
    from probe_core.dump import DumpEntry

    dump, forms = RankDump(PT_FILE), Forms()
    dump.index_with(forms, known=forms.known)  # the skeletons met once, for the entries to come flat
    with dump:
        streamed = list(dump.entries(known=forms.known))
        decoded = {entry.index: entry for entry in dump.entries()}
        assert any(entry.flat is not None and entry.data is None for entry in streamed)
        for entry in streamed:
            fields = {f.name: getattr(entry, f.name) for f in dataclasses.fields(DumpEntry)}
            assert fields == vars(DumpEntry(**fields))
            assert dump.loaded(entry) == decoded[entry.index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        streamed[0].name = "changed"


def test_msprobe_pytorch_dump_header_parent_stack_and_leaves():
    (dump,) = discover(PT)
    assert (dump.step, dump.rank, dump.framework, dump.level) == (0, 0, "pytorch", "mix")
    assert dump.mode(current_registry()).name == "statistics"
    entry = next(dump.entries())
    assert entry.name == "Functional.layer_norm.0.forward"
    assert entry.parent == "Module.blocks.0.ln1.LayerNorm.forward.0"
    assert "return F.layer_norm(" in entry.stack[0]
    leaves = entry.leaves()
    assert [leaf.name for leaf in leaves] == [
        "Functional.layer_norm.0.forward.input.0", "Functional.layer_norm.0.forward.input.1.0",
        "Functional.layer_norm.0.forward.input.2", "Functional.layer_norm.0.forward.input.3",
        "Functional.layer_norm.0.forward.input.4", "Functional.layer_norm.0.forward.output.0"]
    assert leaves[0].shape == (4, 8, 64) and leaves[0].is_tensor and leaves[0].requires_grad is False
    assert leaves[1].value == 64 and not leaves[1].is_tensor
    grads = next(e for e in dump.entries() if e.parsed.kind == "parameters_grad")
    assert [leaf.name for leaf in grads.leaves()] == [f"{grads.name}.bias", f"{grads.name}.weight"]


def test_msprobe_mindspore_dump_without_rank_folder():
    (dump,) = discover(MS)
    assert (dump.step, dump.rank, dump.framework) == (0, None, "mindspore")
    names = [e.name for e in dump.entries()]
    assert "Cell.blocks.0.ln1.LayerNorm.forward.0" in names
    assert dump.construct["Cell.blocks.0.ln1.LayerNorm.forward.0"] == "Cell.blocks.0.Block.forward.0"


def test_entry_names_parse():
    api = parse_entry_name("Primitive.layer_norm.LayerNorm.0.forward")
    assert (api.kind, api.base, api.count, api.direction) == ("api", "Primitive.layer_norm.LayerNorm", 0, "forward")
    mod = parse_entry_name("Module.blocks.0.ln1.LayerNorm.backward.3")
    assert (mod.kind, mod.module_path, mod.module_class, mod.count) == ("module", "blocks.0.ln1", "LayerNorm", 3)
    assert mod.with_count(7) == "Module.blocks.0.ln1.LayerNorm.backward.7"
    assert parse_entry_name("Module.head.Linear.parameters_grad.0").kind == "parameters_grad"


def test_spans_list_numbers_as_runs():
    """A 1,024-rank job's ranks read 0-1023 in a message, not a thousand numbers."""
    assert spans(range(1024)) == "0-1023"
    assert spans([9, 0, 1, 2, 3, 5, 7, 8, 3]) == "0-3, 5, 7-9"
    assert spans([]) == "" and spans([4]) == "4"


def test_discover_layouts_and_filters(tmp_path):
    for step in (0, 1):
        for rank in (0, 1):
            folder = tmp_path / "root" / f"step{step}" / f"rank{rank}"
            folder.mkdir(parents=True)
            shutil.copy(PT_FILE, folder / "dump.json")
    root = tmp_path / "root"
    assert [(d.step, d.rank) for d in discover(root)] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [(d.step, d.rank) for d in discover(root / "step1")] == [(1, 0), (1, 1)]
    assert [(d.step, d.rank) for d in discover(root / "step1" / "rank1")] == [(1, 1)]
    assert [(d.step, d.rank) for d in discover(root / "step1" / "rank1" / "dump.json")] == [(1, 1)]
    assert [(d.step, d.rank) for d in discover(root, ranks=[1], steps=[0])] == [(0, 1)]
    with pytest.raises(DumpError, match=r"no rank 5 in this dump; ranks present: 0-1$"):
        discover(root, ranks=[5])
    with pytest.raises(DumpError, match=r"no step 7, 9-10 in this dump; steps present: 0-1$"):
        discover(root, steps=[10, 9, 7])
    with pytest.raises(DumpError, match="no such file or folder"):
        discover(tmp_path / "nope")
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(DumpError, match="no dump.json found"):
        discover(tmp_path / "emptydir")


def test_nan_and_infinity_tokens(tmp_path):
    path = tmp_path / "dump.json"
    path.write_text('{"task": "statistics", "data": {"Torch.div.0.forward": {"output": [{"type": "torch.Tensor", '
                    '"dtype": "torch.float32", "shape": [2], "Max": Infinity, "Min": -Infinity, "Mean": NaN, '
                    '"Norm": NaN}]}}}')
    leaf = next(RankDump(path).entries()).leaves()[0]
    assert leaf.max == float("inf") and leaf.min == float("-inf") and leaf.mean != leaf.mean


def _truncated(tmp_path: Path) -> Path:
    text = PT_FILE.read_text()
    path = tmp_path / "dump.json"
    path.write_text(text[: len(text) // 2])
    return path


def test_truncated_file_names_file_line_and_fix(tmp_path):
    path = _truncated(tmp_path)
    with pytest.raises(DumpError) as info:
        list(RankDump(path).entries())
    message = str(info.value)
    assert str(path) in message and "line " in message and "truncated" in message and "--lenient" in message


def test_lenient_keeps_the_readable_part_and_warns(tmp_path):
    path = _truncated(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entries = list(RankDump(path, lenient=True).entries())
    reference = list(json.loads(PT_FILE.read_text())["data"])
    assert 0 < len(entries) < len(reference)
    assert [e.name for e in entries] == reference[: len(entries)]
    assert any(issubclass(w.category, ProbeWarning) and "dropped the rest" in str(w.message) for w in caught)


def test_corrupt_file_is_not_valid_json(tmp_path):
    path = tmp_path / "dump.json"
    path.write_text(PT_FILE.read_text().replace('"Max": 3.9949018955230713,', '"Max": 3.99 13,', 1))
    with pytest.raises(DumpError, match=r"Expecting ',' delimiter: line 17, column \d+ .*not valid JSON"):
        list(RankDump(path).entries())


def test_empty_file(tmp_path):
    path = tmp_path / "dump.json"
    path.write_text("")
    with pytest.raises(DumpError, match="the file is empty"):
        list(RankDump(path).entries())


def test_bad_stack_json_is_named(tmp_path):
    folder = tmp_path / "rank0"
    folder.mkdir()
    shutil.copy(PT_FILE, folder / "dump.json")
    (folder / "stack.json").write_text('{"0": [')
    with pytest.raises(DumpError, match=r"stack.json: .* line 1"):
        RankDump(folder / "dump.json").stacks  # noqa: B018

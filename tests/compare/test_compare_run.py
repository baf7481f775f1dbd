"""probe compare end to end on generated dumps: divergence, metrics, output files, CLI errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import openpyxl
import pytest

from probe_compare.engine import CompareOptions, run_compare
from probe_core.errors import CompareError, DumpError
from probe_core.plugins import load_registry
from probe_core.specs import ComparatorSpec
from probe_core import hookimpl

from .helpers import FIXTURES, PROBE, read_csv, read_summary, result_csv, result_file, run_probe
from .dumps import tiny_model_entries, write_dump

PT = FIXTURES / "msprobe_pytorch_stat_mix"
MS = FIXTURES / "msprobe_mindspore_stat_mix"


def pair(tmp_path: Path, mode: str, scale: float = 1.01) -> tuple[Path, Path]:
    target = write_dump(tmp_path / "target" / "step0" / "rank0", tiny_model_entries(scale), mode)
    bench = write_dump(tmp_path / "bench" / "step0" / "rank0", tiny_model_entries(1.0), mode)
    return target.parents[1], bench.parents[1]


def compare(target, bench, out, **kw):
    options = CompareOptions(Path(target), Path(bench), Path(out), progress=False, **kw)
    return run_compare(options, load_registry())


def test_a_quiet_compare_does_not_import_the_progress_bar(tmp_path):
    """``--quiet`` draws no bar, so rich's progress module (a twentieth of a CPU second to import) stays out."""
    target, bench = pair(tmp_path, "statistics")
    proc = subprocess.run([sys.executable, "-X", "importtime", str(PROBE), "compare", "--quiet", str(target),
                           str(bench), "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "probe_compare.engine" in proc.stderr  # the import log is there
    assert "rich.progress" not in proc.stderr


@pytest.mark.parametrize("mode", ["statistics", "md5", "tensor"])
def test_perturbed_layer_is_the_first_divergence(tmp_path, mode):
    target, bench = pair(tmp_path, mode)
    summary = compare(target, bench, tmp_path / "out")
    first = summary["first_divergence"]
    assert first["name"] == "Module.fc1.Linear.forward.0"
    assert first["reason"].startswith("output.0") and "the entry adds error" in first["reason"]
    assert (first["kind"], first["step"], first["rank_id"], summary["rules"]) == ("adds error", 0, 0, "noise")
    assert "model.py, line 11" in first["stack"][0]
    rows = read_csv(result_csv(tmp_path / "out"))
    assert summary["counts"]["unmatched"] == 0
    # the noise judge: the one entry that adds error is the only error; what it feeds downstream passes
    assert [r["NPU Name"] for r in rows if r["Result"] != "pass"] == ["Module.fc1.Linear.forward.0.output.0"]
    assert summary["counts"]["error"] == 1
    # msprobe's legend, row by row (--rules msprobe)
    summary = compare(target, bench, tmp_path / "legend", rules="msprobe")
    assert summary["rules"] == "msprobe"
    rows = read_csv(result_csv(tmp_path / "legend"))
    before = [r for r in rows if r["NPU Name"].startswith("Functional.linear.0.forward")]
    assert before and all(r["Result"] == "pass" for r in before)
    fc1_out = next(r for r in rows if r["NPU Name"] == "Module.fc1.Linear.forward.0.output.0")
    legend_first = summary["first_divergence"]  # msprobe's rules: the first entry whose Result is error
    if mode == "md5":
        assert fc1_out["Result"] == "error" and fc1_out["NPU MD5"] != fc1_out["BENCH MD5"]
    elif mode == "tensor":  # every element is 1% off: error rule 2 (one-thousandth ratio 0 < 0.6)
        assert fc1_out["Result"] == "error" and "One Thousandth" in fc1_out["Err_message"]
    else:  # norm 1% off while inputs agree exactly: under the 0.1 msprobe's warning asks of it then, so it passes
        assert fc1_out["Result"] == "pass"
        assert legend_first is None
    if mode != "statistics":
        assert (legend_first["name"], legend_first["kind"]) == ("Module.fc1.Linear.forward.0", "rules")


def test_statistics_metrics_equal_numpy(tmp_path):
    target, bench = pair(tmp_path, "statistics")
    compare(target, bench, tmp_path / "out")
    rows = {r["NPU Name"]: r for r in read_csv(result_csv(tmp_path / "out"))}
    h = tiny_model_entries(1.0)[1][3][0]
    a = (h * np.float32(1.01)).astype(np.float32)
    row = rows["Module.fc1.Linear.forward.0.output.0"]
    a_norm, b_norm = float(np.linalg.norm(a.astype(np.float64))), float(np.linalg.norm(h.astype(np.float64)))
    assert float(row["L2norm diff"]) == pytest.approx(a_norm - b_norm, rel=1e-12)
    assert float(row["NormRelativeErr"].rstrip("%")) == pytest.approx(abs(a_norm - b_norm) / b_norm * 100, rel=1e-9)
    assert float(row["Max diff"]) == pytest.approx(float(a.max()) - float(h.max()), rel=1e-9)


def test_tensor_metrics_equal_numpy(tmp_path):
    target, bench = pair(tmp_path, "tensor")
    compare(target, bench, tmp_path / "out")
    rows = {r["NPU Name"]: r for r in read_csv(result_csv(tmp_path / "out"))}
    folder_t, folder_b = target / "step0" / "rank0" / "dump_tensor_data", bench / "step0" / "rank0" / "dump_tensor_data"
    name = "Module.fc2.Linear.forward.0.output.0"
    a = np.load(folder_t / f"{name}.npy").astype(np.float64).ravel()
    b = np.load(folder_b / f"{name}.npy").astype(np.float64).ravel()
    rel = np.abs(a - b) / np.abs(b)
    row = rows[name]
    assert float(row["Cosine"]) == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), rel=1e-12)
    assert float(row["EucDist"]) == pytest.approx(np.linalg.norm(a - b), rel=1e-12)
    assert float(row["MaxAbsErr"]) == pytest.approx(np.abs(a - b).max(), rel=1e-12)
    assert float(row["MaxRelativeErr"]) == pytest.approx(rel.max(), rel=1e-12)
    assert float(row["One Thousandth Err Ratio"]) == pytest.approx((rel < 0.001).mean())
    assert float(row["Five Thousandths Err Ratio"]) == pytest.approx((rel < 0.005).mean())
    assert row["Data_name"] == str([f"{name}.npy", f"{name}.npy"])


def test_xlsx_has_frozen_header_and_highlighted_rows(tmp_path):
    target, bench = pair(tmp_path, "md5")
    compare(target, bench, tmp_path / "out", xlsx=True)
    sheet = openpyxl.load_workbook(result_file(tmp_path / "out", suffix=".xlsx")).active
    assert sheet.freeze_panes == "A2"
    header = [c.value for c in sheet[1]]
    assert header[:4] == ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype"]
    result_col = header.index("Result")
    fills = {row[result_col].value: row[0].fill.fgColor.rgb for row in sheet.iter_rows(min_row=2)}
    assert fills["error"].endswith("FFC7CE") and fills["pass"] in (None, "00000000")
    assert len(list(sheet.iter_rows(min_row=2))) == len(read_csv(result_csv(tmp_path / "out")))


def test_identical_dumps_pass_and_workers_give_the_same_csv(tmp_path):
    target, bench = pair(tmp_path, "statistics", scale=1.0)
    one = compare(target, bench, tmp_path / "one")
    assert one["first_divergence"] is None and one["counts"]["error"] == one["counts"]["warning"] == 0
    import probe_compare.chunks as chunks

    old = chunks.CHUNK_ENTRIES
    chunks.CHUNK_ENTRIES = 2
    try:
        compare(target, bench, tmp_path / "two", workers=2)
    finally:
        chunks.CHUNK_ENTRIES = old
    assert (result_csv(tmp_path / "one")).read_text() == \
        (result_csv(tmp_path / "two")).read_text()


def test_unmatched_entries_get_rows_and_are_listed(tmp_path):
    entries = tiny_model_entries()
    target = write_dump(tmp_path / "t", entries)
    bench = write_dump(tmp_path / "b", entries[:-1])
    summary = compare(target, bench, tmp_path / "out")
    assert summary["ranks"][0]["unmatched"] == {"target": ["Tensor.sum.0.forward"], "bench": []}
    rows = read_csv(result_csv(tmp_path / "out"))
    unmatched = [r for r in rows if r["Result"] == "unmatched"]
    assert [r["NPU Name"] for r in unmatched] == ["Tensor.sum.0.forward.input.0", "Tensor.sum.0.forward.output.0"]
    assert all(r["Bench Name"] == "N/A" for r in unmatched)


class AbsMeanComparator:
    """A third-party metric: |mean difference|, appended after msprobe's columns."""

    columns = ("AbsMeanDiff",)

    def compare(self, pair):
        return {"AbsMeanDiff": abs(pair.npu.mean - pair.bench.mean) if pair.npu.is_tensor else None}


class ExtraMetricPlugin:
    @hookimpl
    def probe_comparators(self):
        return [ComparatorSpec("absmean", "statistics", "absolute mean difference", AbsMeanComparator)]


def test_third_party_comparator_adds_a_column(tmp_path):
    target, bench = pair(tmp_path, "statistics")
    registry = load_registry(extra=[("absmean-plugin", ExtraMetricPlugin())])
    run_compare(CompareOptions(target, bench, tmp_path / "out", progress=False), registry)
    rows = read_csv(result_csv(tmp_path / "out"))
    assert list(rows[0])[-1] == "AbsMeanDiff"
    assert list(rows[0])[:2] == ["NPU Name", "Bench Name"]
    row = next(r for r in rows if r["NPU Name"] == "Module.fc1.Linear.forward.0.output.0")
    assert float(row["AbsMeanDiff"]) == pytest.approx(abs(float(row["NPU mean"]) - float(row["Bench mean"])))


def test_msprobe_dump_against_itself_via_cli_with_msprobe_spellings(tmp_path):
    proc = run_probe("compare", "-tp", PT, "-gp", PT / "step0" / "proc11440", "-o", tmp_path / "out", "-fm")
    assert proc.returncode == 0, proc.stderr
    assert "No divergent entry" in proc.stdout and "rank0_step0" in proc.stdout
    summary = read_summary(tmp_path / "out")
    data = json.loads((PT / "step0" / "proc11440" / "dump.json").read_text())["data"]
    assert summary["counts"] == {"pass": len(data), "warning": 0, "error": 0, "unmatched": 0}
    rows = read_csv(result_csv(tmp_path / "out"))
    assert rows[0]["NPU Name"] == "Functional.layer_norm.0.forward.input.0"
    assert "normalization.py" in rows[0]["NPU_Stack_Info"]


def test_cross_framework_without_mapping_is_refused(tmp_path):
    proc = run_probe("compare", MS, PT, "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert "the target dump is mindspore" in proc.stderr and "needs a mapping: -lm" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cross_framework_with_builtin_table_matches_mint_and_torch(tmp_path):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    ms = write_dump(tmp_path / "ms", [("Mint.matmul.0.forward", "Cell.mm.MatMul.forward.0", [x, y], [x @ y]),
                                      ("Cell.mm.MatMul.forward.0", None, [x, y], [x @ y])], framework="mindspore")
    pt = write_dump(tmp_path / "pt", [("Torch.matmul.0.forward", "Module.mm.MatMul.forward.0", [x, y], [x @ y]),
                                      ("Module.mm.MatMul.forward.0", None, [x, y], [x @ y])], framework="pytorch")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    summary = compare(ms, pt, tmp_path / "out", mapping=empty)
    assert summary["counts"] == {"pass": 2, "warning": 0, "error": 0, "unmatched": 0}
    rows = read_csv(result_csv(tmp_path / "out"))
    assert (rows[0]["NPU Name"], rows[0]["Bench Name"]) == ("Mint.matmul.0.forward.input.0",
                                                            "Torch.matmul.0.forward.input.0")


def test_corrupt_dump_message(tmp_path):
    bad = tmp_path / "bad" / "dump.json"
    bad.parent.mkdir()
    bad.write_text((PT / "step0" / "proc11440" / "dump.json").read_text().replace('"Min"', '"Min" "', 1))
    proc = run_probe("compare", bad, PT, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert str(bad) in proc.stderr and "not valid JSON" in proc.stderr and "line 18" in proc.stderr


def test_truncated_dump_message_and_lenient(tmp_path):
    text = (PT / "step0" / "proc11440" / "dump.json").read_text()
    cut = tmp_path / "cut" / "dump.json"
    cut.parent.mkdir()
    cut.write_text(text[: len(text) // 3])
    proc = run_probe("compare", cut, PT, "-o", tmp_path / "out")
    assert proc.returncode == 2 and "truncated" in proc.stderr and "--lenient" in proc.stderr
    proc = run_probe("compare", cut, PT, "-o", tmp_path / "out", "--lenient", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "dropped the rest" in proc.stderr
    counts = read_summary(tmp_path / "out")["counts"]
    assert counts["pass"] > 0 and counts["unmatched"] > 0  # the bench's later entries have no partner


def test_empty_dump_message(tmp_path):
    empty = tmp_path / "empty" / "dump.json"
    empty.parent.mkdir()
    empty.write_text('{"task": "statistics", "level": "mix", "framework": "pytorch", "data": {}}')
    with pytest.raises(CompareError, match=r"the target dump .* has no entries \(\"data\" is empty\)"):
        compare(empty, PT, tmp_path / "out")


def test_missing_tensor_file_message_and_lenient(tmp_path):
    target, bench = pair(tmp_path, "tensor")
    missing = target / "step0" / "rank0" / "dump_tensor_data" / "Functional.relu.0.forward.output.0.npy"
    missing.unlink()
    with pytest.raises(DumpError, match=r"tensor file missing: .*Functional.relu.0.forward.output.0.npy"):
        compare(target, bench, tmp_path / "out")
    summary = compare(target, bench, tmp_path / "out2", lenient=True)
    rows = read_csv(result_csv(tmp_path / "out2"))
    row = next(r for r in rows if r["NPU Name"] == "Functional.relu.0.forward.output.0")
    assert row["Result"] == "error" and "tensor file missing" in row["Err_message"]
    assert summary["counts"]["error"] >= 1


def test_mode_mismatch_message(tmp_path):
    a = write_dump(tmp_path / "a", tiny_model_entries(), "md5")
    b = write_dump(tmp_path / "b", tiny_model_entries(), "statistics")
    with pytest.raises(CompareError, match="cannot compare a md5 dump .* with a statistics dump"):
        compare(a, b, tmp_path / "out")


def test_multi_rank_roots_pair_by_rank(tmp_path):
    for side, scale in (("t", 1.01), ("b", 1.0)):
        for rank in (0, 1):
            write_dump(tmp_path / side / "step0" / f"rank{rank}", tiny_model_entries(scale if rank else 1.0))
    summary = compare(tmp_path / "t", tmp_path / "b", tmp_path / "out")
    assert [r["label"] for r in summary["ranks"]] == ["rank0_step0", "rank1_step0"]
    assert summary["ranks"][0]["first_divergence"] is None
    assert summary["first_divergence"]["rank"] == "rank1_step0"
    names = sorted(p.name for p in (tmp_path / "out").glob("*.csv"))
    assert [n[:len("compare_result_rank0_")] for n in names] == ["compare_result_rank0_", "compare_result_rank1_"]
    assert [result_csv(tmp_path / "out", rank).name for rank in (0, 1)] == names
    only = compare(tmp_path / "t", tmp_path / "b", tmp_path / "out1", ranks=[1])
    assert [r["label"] for r in only["ranks"]] == ["rank1_step0"]
    shutil.rmtree(tmp_path / "out1")


def test_msprobe_mindspore_dump_against_itself(tmp_path):
    summary = compare(MS, MS / "step0", tmp_path / "out", fuzzy=True)
    data = json.loads((MS / "step0" / "dump.json").read_text())["data"]
    assert summary["counts"] == {"pass": len(data), "warning": 0, "error": 0, "unmatched": 0}
    assert summary["first_divergence"] is None
    rows = read_csv(result_csv(tmp_path / "out"))
    assert any(r["NPU Name"].startswith("Cell.blocks.0.ln1.LayerNorm.forward.0.") for r in rows)
    assert all(r["Requires_grad Consistent"] == "N/A" for r in rows)  # MindSpore dumps carry no requires_grad


def test_workers_across_ranks_give_the_same_results(tmp_path):
    for side, scale in (("t", 1.01), ("b", 1.0)):
        for rank in (0, 1, 2):
            write_dump(tmp_path / side / "step0" / f"rank{rank}", tiny_model_entries(scale if rank == 2 else 1.0))
    one = compare(tmp_path / "t", tmp_path / "b", tmp_path / "one")
    three = compare(tmp_path / "t", tmp_path / "b", tmp_path / "three", workers=3)
    assert [r["counts"] for r in one["ranks"]] == [r["counts"] for r in three["ranks"]]
    assert three["first_divergence"]["rank"] == "rank2_step0"
    for rank in (0, 1, 2):
        assert result_csv(tmp_path / "one", rank).read_text() == result_csv(tmp_path / "three", rank).read_text()


def test_brackets_in_paths_names_and_stacks_print_as_they_are(tmp_path):
    """rich reads [..] as markup: a folder named ``run[/x]`` crashed the error message with a traceback, and a
    stack line's ``layers[i](x)`` lost its ``[i]``. Every path, entry name and stack line prints literally."""
    target, bench = write_dump(tmp_path / "t[exp]", tiny_model_entries(1.01)), write_dump(tmp_path / "b[/x]",
                                                                                         tiny_model_entries())
    stacks = json.loads((target / "stack.json").read_text())
    for _, lines in stacks.values():
        lines[0] = lines[0].replace("y = op_", "y = self.layers[i](x) + op_")
    (target / "stack.json").write_text(json.dumps(stacks))
    done = run_probe("compare", target, bench, "-o", tmp_path / "out[/y]")
    assert done.returncode == 0, done.stderr
    assert "self.layers[i](x)" in done.stdout and "[/y]" in done.stdout, done.stdout
    assert "Traceback" not in done.stderr
    missing = run_probe("compare", tmp_path / "none[/x]", bench, "-o", tmp_path / "o2")
    assert missing.returncode == 2 and "none[/x]" in missing.stderr and "Traceback" not in missing.stderr, missing.stderr

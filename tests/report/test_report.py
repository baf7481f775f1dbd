"""``probe report``: the page of a real compare and a real monitor compare, what it shows, bad inputs, its size."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from probe_core import testing
from probe_core.api import ProbeError
from probe_report.command import write_report
from tests.report.helpers import TRAIN, Page, probe

CULPRIT = "Functional.gelu.0.forward"


def _csv_rows(folder: Path, pattern: str) -> int:
    import csv

    csv.field_size_limit(1 << 30)
    total = 0
    for path in folder.rglob(pattern):
        with open(path, newline="") as handle:
            total += sum(1 for _ in csv.DictReader(handle))
    return total


def _self_contained(text: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "the page loads something"
    assert "@import" not in text and "url(http" not in text


def _drawn(page: Page) -> list[dict[str, str]]:
    """The series drawn (a path of several points)."""
    return [p for p in page.all("path") if p.get("class", "").startswith("series-") and len(p.get("d", "")) > 20]


def test_compare_report_answers_with_the_culprit_its_line_and_what_to_run(dumps, tmp_path):
    done = probe("report", dumps / "cmp", "-o", tmp_path / "r.html", cwd=tmp_path)
    out = tmp_path / "r.html"
    assert done.stdout.strip() == f"report: {out}"
    text = out.read_text()
    _self_contained(text)
    page = Page(text)
    summary = json.loads((dumps / "cmp" / "summary.json").read_text())
    first = summary["first_divergence"]
    assert first["name"] == CULPRIT and first["step"] == 0
    assert page.texts["headline"].startswith(f"{CULPRIT} adds error at step 0")
    answer = page.texts["answer"]
    assert first["module"] in answer and first["reason"] in answer
    assert "return x + self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))" in answer  # the user's line
    assert "train.py:20 in forward" in answer  # file:line in function, as the terminal prints a frame
    assert f"--filter {CULPRIT.removesuffix('.forward')}" in answer and '"list": ["Functional.gelu.0.forward"]' in answer
    charts = page.all("svg", "chart")
    assert [c["aria-label"].split(" (")[0] for c in charts] == ["loss per step", "error of each entry, in execution order"]
    assert len(_drawn(page)) >= 3  # loss: target and bench; the entries' error
    assert len(page.all("line", "divergence")) == 2
    heat = page.all("svg", "heatmap")
    assert len(heat) == 1 and int(heat[0]["data-rows"]) >= 10
    assert len(page.all("rect", "culprit-cell")) == 1
    assert "Module.blocks.0.Block.forward.0" in page.texts["heatmap"]
    culprit = page.all("details", "culprit")
    assert len(culprit) == 1 and "open" in culprit[0]
    assert "Module.blocks.0.fc1.Linear.forward.0" in page.texts["tree"]  # a sibling of the culprit on its path
    entries = page.entries
    assert len(entries["rows"]) == _csv_rows(dumps / "cmp", "compare_result_rank*.csv")
    assert any(row[2] == f"{CULPRIT}.output.0" and row[3] == "error" for row in entries["rows"])
    assert len(entries["files"]) == 3 and all(Path(uri.removeprefix("file://")).is_file() for uri in entries["files"])


def test_two_dumps_are_compared_first(dumps, tmp_path):
    assert testing.command(["report", dumps / "target", dumps / "bench", "-o", tmp_path / "r.html"]) == 0
    page = Page((tmp_path / "r.html").read_text())
    assert page.texts["headline"].startswith(f"{CULPRIT} adds error at step 0")
    assert page.entries["files"] == [] and "scratch folder, removed" in page.texts["answer"] + (tmp_path / "r.html").read_text()


def test_monitor_compare_report_names_the_step_quantity_and_parameter(monitored, tmp_path):
    out = write_report(monitored / "cmp", tmp_path / "sub" / "m.html")
    page = Page(out.read_text())
    summary = json.loads((monitored / "cmp" / "summary.json").read_text())
    first = summary["first_divergence"]
    assert (first["step"], first["quantity"], first["name"]) == (2, "param_updated", "fc1.weight")
    assert page.texts["headline"] == "The runs part at step 2, rank 0: param_updated of fc1.weight"
    titles = [c["aria-label"] for c in page.all("svg", "chart")]
    assert titles == ["gradient norm per step (rank 0)", "param_updated of fc1.weight: norm per step",
                      "param_updated of fc1.weight: relative difference and threshold"]
    assert len(_drawn(page)) == 6 and len(page.all("line", "divergence")) == 3
    assert len(page.all("rect", "culprit-cell")) == 1
    culprit = page.all("details", "culprit")
    assert len(culprit) == 1 and "fc1.weight" in page.texts["tree"]
    assert len(page.entries["rows"]) == _csv_rows(monitored / "cmp", "monitor_compare.csv")


def test_a_monitor_page_says_which_logged_anomalies_it_cannot_show(monitored, tmp_path):
    shutil.copytree(monitored / "cmp", tmp_path / "cmp")
    shutil.copytree(monitored / "base", tmp_path / "base")
    (next((tmp_path / "base").glob("*-rank0-*")) / "anomalies.json").write_text('{"step": 1}')
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    summary["a"], summary["b"] = "moved-away", "base"  # relative; B is found beside the compare folder
    (tmp_path / "cmp" / "summary.json").write_text(json.dumps(summary))
    answer = Page(write_report(tmp_path / "cmp", tmp_path / "m.html").read_text()).texts["answer"]
    assert "A's logged anomalies (spikes) are not shown: its run folder 'moved-away' is not found from here" in answer
    assert "anomalies.json: not shown (not a list of anomalies with step, rank, metric" in answer
    assert "param_updated of fc1.weight" in answer  # the rest of the page as before


def test_two_monitor_outputs_are_compared_first(monitored, tmp_path):
    assert testing.command(["report", monitored / "lr", monitored / "base", "-o", tmp_path / "m.html"]) == 0
    assert "param_updated of fc1.weight" in Page((tmp_path / "m.html").read_text()).texts["headline"]


def test_identical_runs_say_they_agree(dumps, tmp_path):
    testing.compare(dumps / "bench", dumps / "bench", tmp_path / "same")
    page = Page(write_report(tmp_path / "same", tmp_path / "s.html").read_text())
    assert page.texts["headline"].startswith("No divergence")
    assert not page.all("rect", "culprit-cell") and "tree" not in page.texts


def test_bad_inputs_are_one_line_naming_the_file_and_the_fix(dumps, tmp_path):
    done = probe("report", tmp_path, "-o", tmp_path / "r.html", cwd=tmp_path, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and f"{tmp_path}: no summary.json in it" in done.stderr
    (tmp_path / "summary.json").write_text('{"counts": {}}')
    with pytest.raises(ProbeError, match="neither probe compare's"):
        write_report(tmp_path, tmp_path / "r.html")
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ProbeError, match=r"summary.json: cannot be read as JSON"):
        write_report(tmp_path, tmp_path / "r.html")
    moved = shutil.copytree(dumps / "cmp", tmp_path / "moved")
    for path in moved.rglob("*.csv"):
        path.unlink()
    with pytest.raises(ProbeError, match=r"ranks\[rank0_step0\]\.csv .* is not in"):
        write_report(moved, tmp_path / "r.html")
    with pytest.raises(ProbeError, match="is a folder; give the path of the HTML file"):
        write_report(dumps / "cmp", tmp_path)
    with pytest.raises(ProbeError, match="takes one output folder or two runs, got 3"):
        testing.command(["report", tmp_path, tmp_path, tmp_path])
    assert not (tmp_path / "r.html").exists()


def test_a_moved_compare_folder_still_reads(dumps, tmp_path):
    moved = shutil.copytree(dumps / "cmp", tmp_path / "elsewhere" / "renamed")
    page = Page(write_report(moved, tmp_path / "r.html").read_text())
    assert page.texts["headline"].startswith(CULPRIT)
    assert all(str(moved) in uri for uri in page.entries["files"])


@pytest.mark.slow
def test_size_budget_of_a_three_step_400_entry_compare(tmp_path):
    for name, extra in (("bench", []), ("target", ["--tanh-block", "0"])):
        testing.collect(TRAIN, tmp_path / name, args=["--steps", "3", "--blocks", "25", *extra])
    summary = testing.compare(tmp_path / "target", tmp_path / "bench", tmp_path / "cmp")
    assert len(summary["ranks"]) == 3 and all(sum(r["counts"].values()) >= 400 for r in summary["ranks"])
    out = write_report(tmp_path / "cmp", tmp_path / "r.html")
    size = out.stat().st_size
    assert size < 2 * 1024 * 1024, f"{size} bytes"
    assert Page(out.read_text()).texts["headline"].startswith(CULPRIT)

"""``--html FILE`` on compare, monitor compare, locate and acc-check: each writes probe report's page of its own
output, with the sections that apply (locate's stages, acc-check's failing APIs); refused before any work when
probe report is not enabled."""

from __future__ import annotations

import json

from probe_core import testing
from tests.report.helpers import Page, probe

CULPRIT = "Functional.gelu.0.forward"


def test_compare_and_monitor_compare_write_their_page(dumps, monitored, tmp_path):
    page = tmp_path / "c.html"
    assert testing.command(["compare", dumps / "target", dumps / "bench", "-o", tmp_path / "c", "--quiet",
                            "--html", page]) == 0
    assert Page(page.read_text()).texts["headline"].startswith(f"{CULPRIT} adds error at step 0")
    page = tmp_path / "m.html"
    assert testing.command(["monitor", "compare", monitored / "lr", monitored / "base", "-o", tmp_path / "m",
                            "--no-xlsx", "--html", page]) == 0
    assert "param_updated of fc1.weight" in Page(page.read_text()).texts["headline"]


def test_locate_page_shows_its_stages_verdict_and_the_compare_sections(dumps, located):
    seen = Page((located / "locate.html").read_text())
    assert seen.texts["headline"].startswith(f"module: {CULPRIT} adds error first")
    stages = seen.texts["stages"]
    assert "1 monitor" in stages and "skipped" in stages and "not run" in stages  # stage 4 never ran
    assert f"probe compare {dumps / 'target'} {dumps / 'bench'}" in stages and "s wall" in stages
    assert "approximate 'tanh' vs 'none'" in seen.texts["cause"]  # stage 2's culprit, cause first
    assert [c["aria-label"].split(":")[0] for c in seen.all("svg", "chart")] == ["stage 2 l0"] * 2
    assert len(seen.all("svg", "heatmap")) == 1 and len(seen.all("details", "culprit")) == 1
    assert len(seen.entries["rows"]) > 100


def test_acc_check_page_lists_the_failing_apis_with_their_standards(acc_checked):
    root, printed = acc_checked  # printed to a 60-column pipe
    summary = json.loads((root / "acc" / "summary.json").read_text())
    failing = summary["failing"]
    assert failing, "bfloat16 linear calls meet the float64 standard: nothing to show"
    seen = Page((root / "acc.html").read_text())
    assert seen.texts["headline"].startswith(f"{summary['error']} of {summary['apis']} APIs fail")
    listed = seen.texts["failing"]
    assert all(f["api"] in listed and f["standard"] in listed for f in failing)
    assert seen.entries["columns"][:2] == ["API Name", "Status"]
    assert len(seen.entries["rows"]) >= summary["apis"]  # one row per output checked
    words = set(printed.split())
    for f in failing:  # the terminal's table: no number or name broken at 60 columns
        assert {f["api"] + ":", f"{f['cosine']:.6f},", f"{f['max_rel_err']:.3g},"} <= words, printed


def test_html_is_refused_before_the_work_without_probe_report(dumps, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"plugins": {"disable": ["report"]}}))
    done = probe("compare", dumps / "target", dumps / "bench", "-o", tmp_path / "out", "--html", tmp_path / "x.html",
                 "-c", config, cwd=tmp_path, check=False)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "--html" in done.stderr and "pip install probe-report" in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "x.html").exists()  # nothing compared

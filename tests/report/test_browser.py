"""The report rendered by headless Chromium (Debian's ``chromium``): what a person sees, no console error."""

from __future__ import annotations

import json
import re

import pytest

from probe_report.command import write_report
from tests.report.helpers import CHROMIUM, NO_CHROMIUM, Page, chromium, console_messages, seen_in_chromium, visible

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)


def _rendered(path, tmp_path, fragment: str = "") -> tuple[Page, str]:
    done = chromium(path.resolve().as_uri() + fragment, "--dump-dom", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    return Page(done.stdout), done.stdout


def _rows(dom: str) -> list[str]:
    body = dom.split('id="entries-table"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr.*?</tr>", body)


def test_compare_report_in_a_browser(dumps, tmp_path):
    out = write_report(dumps / "cmp", tmp_path / "r.html")
    page, dom = _rendered(out, tmp_path)
    assert page.texts["headline"].startswith("Functional.gelu.0.forward adds error at step 0")
    assert all(len(p.get("d", "")) > 20 for p in page.all("path") if p.get("class", "").startswith("series-"))
    assert len(page.all("svg", "chart")) == 2 and len(page.all("svg", "heatmap")) == 1
    rows = _rows(dom)
    total = len(page.entries["rows"])
    assert len(rows) == min(total, 500) > 100  # the script ran
    assert page.texts["entries-count"].startswith(f"{total} of {total} rows match")
    page, dom = _rendered(out, tmp_path, "#q=gelu.0.forward.output")
    rows = _rows(dom)
    assert len(rows) == 3 and all("Functional.gelu.0.forward.output.0" in row for row in rows)  # one per step
    assert page.texts["entries-count"].startswith("3 of ")


def test_monitor_report_screenshot_shows_the_answer_card(monitored, tmp_path):
    from PIL import Image

    out = write_report(monitored / "cmp", tmp_path / "m.html")
    page, _ = _rendered(out, tmp_path)
    assert page.texts["headline"] == "The runs part at step 2, rank 0: param_updated of fc1.weight"
    done = chromium(out.resolve().as_uri(), f"--screenshot={tmp_path / 'm.png'}", "--window-size=1200,900",
                    cwd=tmp_path)
    assert done.returncode == 0 and console_messages(done.stderr) == []
    with Image.open(tmp_path / "m.png") as image:
        assert image.size == (1200, 900)
        red = dict((colour, n) for n, colour in image.convert("RGB").getcolors(1 << 24)).get((0xc6, 0x28, 0x28), 0)
    assert red > 500  # the answer card's red edge and the divergence marks are drawn


def test_locate_report_in_a_browser(located, tmp_path):
    seen = seen_in_chromium(located / "locate.html", tmp_path)
    assert visible(seen, "headline").startswith("module: Functional.gelu.0.forward adds error first")
    assert "approximate 'tanh' vs 'none'" in visible(seen, "cause")
    stages = seen["rows"]["stages"]  # the stage table: each stage, what it ran and found
    assert [row.split(" | ")[0].split()[:2] for row in stages] == [["1", "monitor"], ["2", "l0"], ["3", "mix"],
                                                                   ["4", "replay"]]
    assert stages[0].endswith("skipped: no commands and no monitor outputs (starting from the dumps)")
    assert "probe compare " in stages[1] and " s wall, " in stages[1] and stages[3].endswith("not run")
    assert len(seen["rows"]["entries"]) > 100  # the script drew the entries
    assert "Functional.gelu.0.forward" in visible(seen, "answer")


def test_acc_check_report_in_a_browser(acc_checked, tmp_path):
    root, _ = acc_checked
    summary = json.loads((root / "acc" / "summary.json").read_text())
    seen = seen_in_chromium(root / "acc.html", tmp_path)
    worst = summary["failing"][0]
    assert visible(seen, "headline") == (f"{summary['error']} of {summary['apis']} APIs fail their precision "
                                         f"standard ({summary['warning']} warn); the worst: {worst['api']} "
                                         f"({worst['standard']})")
    failing = seen["rows"]["failing"]  # a row per failing API, its standard beside it
    assert len(failing) == len(summary["failing"])
    for row, expected in zip(failing, summary["failing"]):
        cells = row.split(" | ")
        assert cells[0] == expected["api"] and cells[1] == expected["status"] and cells[8] == expected["standard"]
    assert "failing" in seen["ids"] and visible(seen, "failing")
    entries = seen["rows"]["entries"]
    assert len(entries) >= summary["apis"] and all(row.split(" | ")[1] in ("pass", "warning", "error", "skip")
                                                   for row in entries)


def test_monitor_report_marks_the_logged_spikes_on_the_curves(monitored, tmp_path):
    logged = json.loads(next((monitored / "lr").glob("*/anomalies.json")).read_text())
    spikes = [a for a in logged if a["kind"] == "AnomalyZScore" and a["step"] == 3]
    assert any(a["metric"] == "grad_norm" for a in spikes)  # the loss 1000x at step 3: every gradient spikes
    out = write_report(monitored / "cmp", tmp_path / "m.html")
    html = out.read_text()
    titles = re.findall(r'<path class="anomaly spike"[^>]*><title>(.*?)</title>', html)
    assert f"step 3: {len(spikes)} spikes in A: " in " ".join(titles)
    assert len(titles) == 2 * len({a["step"] for a in logged})  # on both norm curves, one mark a step
    seen = seen_in_chromium(out, tmp_path)
    rows = [row.split(" | ")[:6] for row in seen["rows"]["anomalies"]]  # the logged anomalies, listed by step
    assert len(rows) == len(logged) and ["3", "0", "A", "grad_norm", "global", "AnomalyZScore"] in rows
    assert "spike" in visible(seen, "curves")  # the marks' labels

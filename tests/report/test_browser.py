"""The report rendered by headless Chromium (Debian's ``chromium``): what a person sees, no console error."""

from __future__ import annotations

import re

import pytest

from probe_report.command import write_report
from tests.report.helpers import CHROMIUM, NO_CHROMIUM, Page, chromium, console_messages

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

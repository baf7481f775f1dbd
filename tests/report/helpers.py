"""Helpers for the report tests: real runs of a tiny model, the real CLI, the page parsed, headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAIN = HERE / "train.py"
PROBE = str(Path(sys.executable).parent / "probe")
#: Debian's package (apt-get install -y chromium); `make test` installs it where apt can
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = "headless Chromium is not installed: apt-get install -y chromium (Debian package; needs root)"


def probe(*args: object, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROBE_")} | {"COLUMNS": "200",
                                                                                 "OMP_NUM_THREADS": "1"}
    done = subprocess.run([PROBE, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


class Page(HTMLParser):
    """The page's elements (tag, attributes), the text under each id, and its JSON entries data."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.texts: dict[str, str] = {}
        self._open: list[tuple[str, str | None]] = []
        self.feed(text)
        self.entries = json.loads(self.texts.get("entries-data", "null") or "null")

    def handle_starttag(self, tag, attrs):
        attributes = {k: v or "" for k, v in attrs}
        self.elements.append((tag, attributes))
        if tag not in ("br", "meta", "input", "img", "hr", "link"):  # the void elements
            self._open.append((tag, attributes.get("id")))
            if attributes.get("id"):
                self.texts[attributes["id"]] = ""

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for _, ident in self._open:
            if ident:
                self.texts[ident] += data

    def all(self, tag: str, cls: str | None = None) -> list[dict[str, str]]:
        """The attributes of every ``tag`` element (of class ``cls``)."""
        return [a for t, a in self.elements if t == tag and (cls is None or cls in a.get("class", "").split())]


def chromium(url: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Headless Chromium on ``url`` with console messages logged to stderr (``INFO:CONSOLE`` lines)."""
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
               "--enable-logging=stderr", "--v=0", f"--user-data-dir={cwd / 'chromium-profile'}", *args, url]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


#: appended to a copy of a page: after the page's own script ran, records each element with an id as laid out
#: (its rendered text and box; an element a person cannot see has an empty box) and the text of every table row
#: (cells joined by " | ") in ``<pre id="seen-by-test">``
_OBSERVER = """<script>(function () {
  var seen = {ids: {}, rows: {}};
  document.querySelectorAll("[id]").forEach(function (el) {
    var box = el.getBoundingClientRect();
    seen.ids[el.id] = {text: el.innerText, width: box.width, height: box.height};
  });
  document.querySelectorAll("section[id] table").forEach(function (table) {
    var rows = seen.rows[table.closest("section").id] = [];
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      if (tr.getBoundingClientRect().height > 0) rows.push(Array.from(tr.cells, function (td) {
        return td.innerText; }).join(" | "));
    });
  });
  var out = document.createElement("pre");
  out.id = "seen-by-test";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();</script>"""


def seen_in_chromium(page: Path, cwd: Path) -> dict:
    """What headless Chromium lays out of ``page`` (1200x900): ``ids`` (id -> rendered text, width, height) and
    ``rows`` (section id -> the rendered rows of its tables); fails on any console message."""
    copy = cwd / f"seen-{page.name}"
    head, end, tail = page.read_text(encoding="utf-8").rpartition("</body>")
    copy.write_text(head + _OBSERVER + end + tail, encoding="utf-8")
    done = chromium(copy.resolve().as_uri(), "--window-size=1200,900", "--dump-dom", cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    assert console_messages(done.stderr) == []
    dom = done.stdout.split('<pre id="seen-by-test">', 1)[1].split("</pre>", 1)[0]
    return json.loads(unescape(dom))


def visible(seen: dict, ident: str) -> str:
    """The text a person sees of the element ``ident`` (it must be laid out: a box wider and taller than 0)."""
    element = seen["ids"][ident]
    assert element["width"] > 0 and element["height"] > 0, f"#{ident} is not shown: {element}"
    return element["text"]

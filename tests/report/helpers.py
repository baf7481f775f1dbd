"""Helpers for the report tests: real runs of a tiny model, the real CLI, the page parsed, headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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

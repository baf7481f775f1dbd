"""What a person reads in a terminal, a pipe or a CI log: compare names the cause first (the culprit's arguments
that differ, and the other calls changed the same way); no table cuts or breaks a name or a number at 60 columns."""

from __future__ import annotations

import json
import os
import re
import subprocess
from html import unescape

from probe_core import testing
from tests.report.helpers import PROBE, TRAIN, Page


def _narrow(*args, cwd) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROBE_")} | {"COLUMNS": "60",
                                                                                 "OMP_NUM_THREADS": "1"}
    done = subprocess.run([PROBE, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_compare_leads_with_the_arguments_that_differ_in_every_block(dumps, tmp_path):
    testing.collect(TRAIN, tmp_path / "both", args=["--steps", "1", "--tanh-block", "0", "1"])
    out = _narrow("compare", tmp_path / "both", dumps / "bench" / "step0", "-o", tmp_path / "cmp", cwd=tmp_path)
    cause = ("First divergence (step 0, rank 0): Functional.gelu.0.forward is called differently: approximate "
             "'tanh' vs 'none' (target vs bench); the same change in 2 calls of Functional.gelu: "
             "Functional.gelu.0.forward, Functional.gelu.1.forward")
    lines = out.splitlines()
    assert cause in lines, out  # one line, whatever the width: a pipe keeps it whole
    assert lines[lines.index(cause) + 1].startswith("  effect: output.0: Max ")
    assert "\u2026" not in out and "rank0_step0: pass 47" in out  # the table's row as one line, not cut at 60 columns
    frames = lines[lines.index("  module: Module.blocks.0.Block.forward.0") + 1:][:3]
    assert frames[0] == f"  {TRAIN}:20 in forward \u2014 return x + self.fc2(F.gelu(self.fc1(x), " \
                        "approximate=self.approximate))", out  # a frame per line: file:line in function - code
    assert all(re.fullmatch(rf"  {re.escape(str(TRAIN))}:\d+ in \w+ \u2014 \S.*", frame) for frame in frames), out
    assert testing.command(["report", tmp_path / "cmp", "-o", tmp_path / "r.html"]) == 0
    html = (tmp_path / "r.html").read_text()
    page = Page(html)
    assert page.texts["cause"] == "Cause: " + cause.split("differently: ")[1]
    assert page.texts["headline"].endswith(": called with approximate 'tanh' vs 'none'")
    items = re.findall(r'<li class="(user|lib)">(.*?)</li>', html.split('<ol class="stack">', 1)[1].split("</ol>")[0],
                       re.S)  # the full stack, a frame per item, each on one line as the terminal prints it
    assert [f"  {unescape(text)}" for kind, text in items if kind == "user"][:3] == frames
    assert all("\n" not in text for _, text in items)


def test_plugins_names_are_whole_at_60_columns_and_in_a_wide_table(tmp_path):
    names = [p["name"] for p in json.loads(_narrow("plugins", "--json", cwd=tmp_path))]
    narrow = _narrow("plugins", cwd=tmp_path)
    starts = [line.split(":")[0] for line in narrow.splitlines() if not line.startswith(" ")]
    assert set(names) <= set(starts) and "\u2026" not in narrow
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROBE_")} | {"COLUMNS": "250"}
    wide = subprocess.run([PROBE, "plugins"], cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    assert "\u2503 name" in wide and all(f"\u2502 {name} " in wide for name in names)  # the table, names whole

"""Fuzz every reader for minutes: hypothesis generates damaged dumps, journals, tensor files, packs,
safetensors and torch checkpoints and config.json files; any exception other than a ProbeError (one
clear line) is a finding, printed with the input that caused it (then the next reader runs).

    .venv/bin/python scripts/fuzz_readers.py --minutes 5            # every reader, 5 minutes each
    .venv/bin/python scripts/fuzz_readers.py --minutes 1 --reader safetensors --reader config.json

The same targets run a few hundred examples per CI run in tests/robustness/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.robustness

from hypothesis import HealthCheck, settings  # noqa: E402

from tests.robustness.fuzz_targets import all_targets  # noqa: E402

TARGETS, _ = all_targets()

BATCH = 200  # examples per hypothesis run; runs repeat with fresh random seeds until the time is up


def fuzz(name: str, seconds: float) -> tuple[int, list[str]]:
    """(examples run, findings) of one reader fuzzed for ``seconds``."""
    counter = {"n": 0}
    findings: list[str] = []
    make = TARGETS[name]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        run = make(settings(max_examples=BATCH, deadline=None, database=None, derandomize=False,
                            suppress_health_check=list(HealthCheck), report_multiple_bugs=False))
        inner = run.hypothesis.inner_test

        def counted(*args, _inner=inner, **kwargs):
            counter["n"] += 1
            return _inner(*args, **kwargs)

        run.hypothesis.inner_test = counted
        try:
            run()
        except Exception:  # a finding: hypothesis has shrunk it and says which input
            text = traceback.format_exc(limit=-6)
            findings.append(text if len(text) < 4000 else text[:2000] + "\n...\n" + text[-2000:])
            if len(findings) >= 3:
                break
    return counter["n"], findings


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="minutes per reader (default 5)")
    parser.add_argument("--reader", action="append", choices=list(TARGETS), help="only this reader (repeatable)")
    args = parser.parse_args()
    names = args.reader or list(TARGETS)
    total_findings = 0
    print(f"{'reader':28} {'examples':>9} {'minutes':>8}  findings", flush=True)
    for name in names:
        start = time.monotonic()
        examples, findings = fuzz(name, args.minutes * 60)
        total_findings += len(findings)
        print(f"{name:28} {examples:9d} {(time.monotonic() - start) / 60:8.1f}  {len(findings)}", flush=True)
        for finding in findings:
            print(finding, flush=True)
    return 1 if total_findings else 0


if __name__ == "__main__":
    sys.exit(main())

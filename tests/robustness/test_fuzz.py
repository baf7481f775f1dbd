"""Property-based fuzz tests of every reader (issue 11, item 4): a few hundred examples each per run.

Long runs: ``.venv/bin/python scripts/fuzz_readers.py --minutes 5`` (per reader).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.robustness.fuzz_targets import all_targets

#: every reader's target and its examples per CI run; the whole module stays well under a minute
TARGETS, EXAMPLES = all_targets()


@pytest.mark.parametrize("name", list(TARGETS))
def test_reader_never_raises_anything_but_a_probe_error(name):
    ci = settings(max_examples=EXAMPLES[name], deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
    TARGETS[name](ci)()

"""The record journal: torn last lines, recovery, atomic final files."""

from __future__ import annotations

import json

import pytest

from probe_core.collect import recover_step
from probe_core.collect.journal import JOURNAL_NAME, Journal, StepRecords, write_step_files
from probe_core.errors import DumpError


def test_recover_ignores_a_torn_last_line(tmp_path):
    journal = Journal(tmp_path)
    journal.append([json.dumps(["H", {"task": "statistics", "level": "L1", "framework": "pytorch",
                                      "dump_data_dir": None}]),
                    json.dumps(["S", 0, ["File a.py, line 1, in f, \n x()"]]),
                    json.dumps(["e", "Torch.add.0.forward", 0, {"output": [{"type": "float", "value": 1.0}]}]),
                    json.dumps(["c", "Torch.add.0.forward", None])])
    journal.close(remove=False)
    with open(tmp_path / JOURNAL_NAME, "a") as handle:
        handle.write('["e", "Torch.add.1.forward", 0, {"out')  # the process died mid-write
    recover_step(tmp_path)
    dump = json.loads((tmp_path / "dump.json").read_text())
    assert dump["level"] == "L1" and list(dump["data"]) == ["Torch.add.0.forward"]
    assert json.loads((tmp_path / "stack.json").read_text()) == \
        {"0": [["Torch.add.0.forward"], ["File a.py, line 1, in f, \n x()"]]}


def test_recover_without_journal_is_a_clear_error(tmp_path):
    with pytest.raises(DumpError, match="no .journal.jsonl"):
        recover_step(tmp_path)


def test_final_files_leave_no_temporaries(tmp_path):
    records = StepRecords()
    records.add_line(["e", "Tensor.__add__.0.forward", None, {"a": float("nan")}])
    write_step_files(tmp_path, {"task": "statistics"}, records)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["construct.json", "dump.json", "stack.json"]
    assert "NaN" in (tmp_path / "dump.json").read_text()

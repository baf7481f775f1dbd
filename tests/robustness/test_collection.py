"""Issue 11, item 5: nothing lost, nothing mixed. Real training scripts under the real ``probe run``."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.compare.helpers import read_summary
from tests.robustness.helpers import PROBE, assert_clean_error, env, run_probe

SCRIPTS = Path(__file__).parent / "scripts"
SIGNAL_SCRIPT = SCRIPTS / "train_signal.py"


def _run(dump: Path, *script_args: str, options: tuple[str, ...] = (), preexec=None,
         script: Path = SIGNAL_SCRIPT) -> subprocess.CompletedProcess:
    return subprocess.run([PROBE, "run", "--dump-path", str(dump), *options, str(script), *script_args],
                          capture_output=True, text=True, env=env(), cwd=dump.parent, timeout=300,
                          preexec_fn=preexec)


def _journal(rank_dir: Path) -> list[list]:
    path = rank_dir / ".journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _header(path: Path) -> dict:
    data = json.loads(path.read_text())
    data.pop("data")
    return data


# -- every record reaches the journal --------------------------------------------------------------


def test_every_record_is_journaled_before_the_next_top_level_call_returns(tmp_path):
    import torch
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path / "d"), level="L1")
    debugger.start()
    x = torch.ones(3)
    try:
        for i in range(6):
            torch.add(x, i)
            if i:  # call i returned: every earlier call is in the journal (a SIGKILL now keeps them)
                names = [item[1] for item in _journal(tmp_path / "d" / "step0" / "rank0") if item[0] == "e"]
                assert f"Torch.add.{i - 1}.forward" in names, names
    finally:
        debugger.stop()
        debugger.close()


def test_sigkill_keeps_the_step_and_compare_graph_recover_read_it(tmp_path):
    # killed once the writer thread has written step 0's files (it does while step 1 runs; killed before,
    # step 0 would be left as its journal, which `probe recover` finishes as it does step 1's below)
    step0_file = tmp_path / "killed" / "step0" / "rank0" / "dump.json"
    killed = _run(tmp_path / "killed", "--signal", "KILL", "--signal-after", str(step0_file))
    assert killed.returncode == -signal.SIGKILL
    step1 = tmp_path / "killed" / "step1" / "rank0"
    assert (tmp_path / "killed" / "step0" / "rank0" / "dump.json").is_file()
    assert not (step1 / "dump.json").exists()
    forwards = [item[1] for item in _journal(step1) if item[0] == "e"]
    assert "Module.0.Linear.forward.0" in forwards and "Module.2.Linear.forward.0" in forwards
    full = _run(tmp_path / "full")
    assert full.returncode == 0, full.stderr

    result = run_probe("compare", tmp_path / "killed", tmp_path / "full", "-o", tmp_path / "cmp", "--step", "1")
    assert result.returncode == 0, result.stderr
    assert "no dump.json, only the record journal" in result.stderr and "probe recover" in result.stderr
    summary = read_summary(tmp_path / "cmp")
    assert summary["counts"]["pass"] >= 3 and summary["partial"]
    graph = run_probe("graph", "-tp", step1, "-gp", tmp_path / "full" / "step1" / "rank0", "-o", tmp_path / "g")
    assert graph.returncode == 0, graph.stderr
    assert "no dump.json, only the record journal" in graph.stderr

    recovered = run_probe("recover", tmp_path / "killed")
    assert recovered.returncode == 0, recovered.stderr
    assert "recovered" in recovered.stdout
    header = _header(step1 / "dump.json")
    assert header["partial"] is True and header["recovered"] is True and header["level"] == "mix"
    assert not (step1 / ".journal.jsonl").exists()
    again = run_probe("compare", tmp_path / "killed", tmp_path / "full", "-o", tmp_path / "cmp2", "--step", "1")
    assert again.returncode == 0 and "partial" in again.stderr


@pytest.mark.parametrize("sig, code", [("TERM", 128 + 15), ("INT", 130)])
def test_sigterm_and_sigint_write_the_step_marked_partial(tmp_path, sig, code):
    result = _run(tmp_path / "d", "--signal", sig)
    assert result.returncode == code, result.stderr[-2000:]
    assert "still running after the signal" not in result.stdout
    step1 = tmp_path / "d" / "step1" / "rank0"
    header = _header(step1 / "dump.json")
    assert header["partial"] is True and header["interrupted"] == f"SIG{sig}"
    assert "partial" not in _header(tmp_path / "d" / "step0" / "rank0" / "dump.json")
    data = json.loads((step1 / "dump.json").read_text())["data"]
    assert "Module.2.Linear.forward.0" in data  # the forward before the signal is kept
    full = _run(tmp_path / "full")
    cmp = run_probe("compare", tmp_path / "d", tmp_path / "full", "-o", tmp_path / "cmp", "--step", "1")
    assert cmp.returncode == 0, cmp.stderr
    assert f"interrupted by SIG{sig}" in cmp.stderr
    assert read_summary(tmp_path / "cmp")["partial"] == [str(step1 / "dump.json")]
    assert full.returncode == 0


def test_a_kill_between_the_renames_leaves_no_dump_json_without_its_neighbours(tmp_path, monkeypatch):
    from probe_core.collect import journal as journal_module
    from probe_core.collect.journal import Journal, StepRecords, write_step_files
    from probe_core.dump import discover

    rank_dir = tmp_path / "step0" / "rank0"
    journal = Journal(rank_dir)
    lines = [["H", {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None}],
             ["S", 0, ["File a.py, line 1, in f, \n x()"]],
             ["e", "Torch.add.0.forward", 0, {"output": [{"type": "float", "value": 1.0}]}]]
    journal.append(json.dumps(line) for line in lines)
    journal.close(remove=False)
    records = StepRecords()
    for line in lines:
        records.add_line(line)
    renamed = []
    real_replace = os.replace

    def killed_at_the_second_rename(src, dst):
        if renamed:
            raise SystemExit("killed")  # the process dies between two renames
        renamed.append(Path(dst).name)
        real_replace(src, dst)

    monkeypatch.setattr(journal_module.os, "replace", killed_at_the_second_rename)
    with pytest.raises(SystemExit):
        write_step_files(rank_dir, lines[0][1], records)
    monkeypatch.undo()
    assert not (rank_dir / "dump.json").exists()  # dump.json comes last: a present dump.json is whole
    with pytest.warns(Warning, match="only the record journal"):
        dumps = discover(tmp_path)
        assert [e.name for e in dumps[0].entries()] == ["Torch.add.0.forward"]


# -- nothing mixed ---------------------------------------------------------------------------------------


def test_a_dump_path_holding_a_run_is_refused_unless_overwrite(tmp_path):
    first = _run(tmp_path / "d", "--steps", "3")
    assert first.returncode == 0, first.stderr
    second = _run(tmp_path / "d", "--steps", "1")
    assert_clean_error(second, "already holds a run", "step0, step1, step2", "--overwrite")
    assert "step 0 done" not in second.stdout  # refused before the script ran
    third = _run(tmp_path / "d", "--steps", "1", options=("--overwrite",))
    assert third.returncode == 0, third.stderr
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["step0"]  # the old steps are gone


def test_a_second_live_writer_is_refused(tmp_path):
    dump, gate = tmp_path / "d", tmp_path / "gate"
    first = subprocess.Popen([PROBE, "run", "--dump-path", str(dump), str(SIGNAL_SCRIPT), "--wait-file", str(gate)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    try:
        deadline = time.time() + 120
        while not Path(str(gate) + ".ready").exists():
            assert first.poll() is None and time.time() < deadline, first.communicate()
            time.sleep(0.1)
        for options in ((), ("--overwrite",)):
            second = _run(dump, "--steps", "1", options=options)
            assert_clean_error(second, "being written by another probe run", f"pid {first.pid}")
        assert_clean_error(run_probe("recover", dump), "a probe run is still writing here")
    finally:
        gate.write_text("go")
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert sorted(p.name for p in dump.iterdir()) == ["step0", "step1", "step2"]  # its run is whole, alone


_RANK_WRITER = """
import sys
from pathlib import Path
from probe_core.collect.runlock import RunLock
from probe_core.errors import CollectionError
root, rank = Path(sys.argv[1]), sys.argv[2]
lock = RunLock(root, overwrite=sys.argv[3:] == ["overwrite"])
try:
    lock.acquire()
except CollectionError as exc:
    print(exc)
    sys.exit(3)
(root / "step0" / f"rank{rank}").mkdir(parents=True)
(root / "step0" / f"rank{rank}" / "dump.json").write_text("{}")
lock.release()
"""


def test_a_rank_that_starts_writing_after_its_sibling_finished_joins_the_run(tmp_path):
    """Ranks of one job neither start nor end together: rank 1's first write may come after rank 0 closed."""
    def rank(number: int, port: str) -> subprocess.CompletedProcess:
        job = dict(env(), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE="2")
        return subprocess.run([sys.executable, "-c", _RANK_WRITER, str(tmp_path / "dump"), str(number)],
                              capture_output=True, text=True, env=job, timeout=120)

    assert rank(0, "29999").returncode == 0
    late = rank(1, "29999")  # same launcher (this process) and rendezvous: the same job
    assert late.returncode == 0, late.stdout + late.stderr
    assert sorted(p.name for p in (tmp_path / "dump" / "step0").iterdir()) == ["rank0", "rank1"]
    assert (tmp_path / "dump" / ".probe_run.json").exists()  # a distributed run keeps its job marker
    other_job = rank(2, "30001")
    assert other_job.returncode == 3 and "already holds a run" in other_job.stdout


def test_the_ranks_of_a_job_replacing_an_earlier_run_start_together(tmp_path):
    """Two ranks of a job started with --overwrite over an earlier distributed run (whose marker stays): the
    rank that takes the lock replaces the old steps while its sibling waits to join; neither is refused as a
    second writer."""
    dump = tmp_path / "dump"
    old = dump / "step0" / "rank0"
    old.mkdir(parents=True)
    (old / "dump.json").write_text("{}")
    for i in range(3000):  # replacing them takes a while: the sibling arrives meanwhile
        (old / f"{i}.npy").write_bytes(b"")
    (dump / ".probe_run.json").write_text(json.dumps({"job": "job ppid=1 MASTER_PORT=1", "pid": 1}))
    job = dict(env(), MASTER_ADDR="127.0.0.1", MASTER_PORT="30007", WORLD_SIZE="2")
    ranks = [subprocess.Popen([sys.executable, "-c", _RANK_WRITER, str(dump), str(rank), "overwrite"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job) for rank in (0, 1)]
    for process in ranks:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, out + err
    assert sorted(p.name for p in (dump / "step0").iterdir()) == ["rank0", "rank1"]
    assert not (dump / "step0" / "rank0" / "0.npy").exists()  # the earlier run is gone


def test_no_write_follows_a_symlink_inside_the_dump_path(tmp_path):
    dump, elsewhere = tmp_path / "d", tmp_path / "elsewhere"
    dump.mkdir()
    elsewhere.mkdir()
    (dump / "step0").symlink_to(elsewhere, target_is_directory=True)
    result = _run(dump, "--steps", "2")
    assert_clean_error(result, str(dump / "step0"), "symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_a_full_disk_stops_collection_at_once_keeping_what_was_written(tmp_path):
    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as ENOSPC would
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))  # no file over 60 kB

    result = _run(tmp_path / "d", options=("--level", "L1"), preexec=small_disk, script=SCRIPTS / "train_many.py")
    line = assert_clean_error(result, "cannot write the record journal", "collection stopped at once")
    assert ".journal.jsonl" in line
    done = [n for n in result.stdout.splitlines() if n.startswith("step ")]
    written = sorted((tmp_path / "d").glob("step*/rank0/dump.json"))
    assert 3 <= len(written) and len(done) <= len(written) + 1 < 150  # stopped in the step that failed
    for path in written:  # what was written before the failure is whole
        assert json.loads(path.read_text())["data"]
    failed = tmp_path / "d" / f"step{len(written)}" / "rank0" / ".journal.jsonl"
    assert failed.is_file() and not failed.with_name("dump.json").exists()

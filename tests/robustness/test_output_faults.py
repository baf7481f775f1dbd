"""Issue 32: safe on hostile inputs and honest under faults: the output folder (checked before any work), a
disk that fills up mid-way, two runs into one folder, hostile merge-result inputs, a hostile dump header,
and --lenient dumps nothing could be read from. Every test runs the real CLI on real files."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.compare.dumps import tiny_model_entries, write_dump
from tests.compare.helpers import read_csv
from tests.robustness.helpers import assert_clean_error, dump_pair, env, error_lines, run_probe

#: the probe CLI in a child that first limits the size of any file it writes (``limit`` bytes, 0: none; writes
#: past it fail with EFBIG, as on a full disk), reports ``free`` bytes free on every disk (-1: the truth), and
#: stamps its results at ``stamp`` (""; the clock)
CHILD = """
import resource, shutil, signal, sys, time
limit, free, stamp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
if free >= 0:
    usage = shutil.disk_usage
    shutil.disk_usage = lambda path: usage(path)._replace(free=free)
if stamp:
    fixed = time.strptime(stamp, "%Y%m%d%H%M%S")
    time.localtime = lambda *_: fixed
from probe_core.cli import main
sys.exit(main(sys.argv[4:]))
"""


def child(*args: object, limit: int = 0, free: int = -1, stamp: str = "") -> list[str]:
    return [sys.executable, "-c", CHILD, str(limit), str(free), stamp, *map(str, args)]


def run_child(*args: object, **kwargs: object) -> subprocess.CompletedProcess:
    return subprocess.run(child(*args, **kwargs), capture_output=True, text=True, env=env(), timeout=300)


def two_rank_results(tmp_path: Path, *flags: str) -> Path:
    """A real two-rank compare's results (what merge-result reads)."""
    for side, scale in (("t", 1.01), ("b", 1.0)):
        for rank in (0, 1):
            write_dump(tmp_path / side / "step0" / f"rank{rank}", tiny_model_entries(scale if rank else 1.0))
    done = run_probe("compare", tmp_path / "t", tmp_path / "b", "-o", tmp_path / "results", "--quiet", *flags)
    assert done.returncode == 0, done.stderr
    (tmp_path / "merge.yaml").write_text("api: [Functional.linear]\n")
    return tmp_path / "results"


# -- the output folder, checked before any work -----------------------------------------------------------


def _command(name: str, tmp_path: Path, out: Path) -> list[object]:
    if name == "merge-result":
        return ["merge-result", "-i", two_rank_results(tmp_path), "-o", out, "-config", tmp_path / "merge.yaml"]
    target, bench = dump_pair(tmp_path)
    if name == "overflow-check":
        return ["overflow-check", "-i", target, "-o", out]
    return [name, target, bench, "-o", out]


def _read_only_folder(tmp_path: Path) -> Path:
    """A folder this process cannot write to: read-only permissions, or (for root, whom permissions do not
    stop) a folder on a read-only file system."""
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    for folder in (Path("/proc/sys"), Path("/sys/fs/cgroup")):
        if folder.is_dir() and not os.access(folder, os.W_OK):
            return folder
    pytest.skip("running as root with no read-only file system mounted: no folder root cannot write to")


COMMANDS = ["compare", "graph", "merge-result", "overflow-check"]


@pytest.mark.parametrize("name", COMMANDS)
def test_an_output_path_that_is_a_file_or_under_a_file_is_one_line(tmp_path, name):
    taken = tmp_path / "taken.txt"
    taken.write_text("someone's notes\n")
    assert_clean_error(run_probe(*_command(name, tmp_path, taken)), f"-o {taken}", "not a folder")
    under = taken / "out"
    assert_clean_error(run_probe(*_command(name, tmp_path, under)), f"-o {under}", "is a file")
    assert taken.read_text() == "someone's notes\n"


@pytest.mark.parametrize("name", COMMANDS)
def test_a_read_only_output_folder_is_one_line(tmp_path, name):
    folder = _read_only_folder(tmp_path)
    before = sorted(os.listdir(folder))
    assert_clean_error(run_probe(*_command(name, tmp_path, folder)), f"-o {folder}", "not writable")
    assert sorted(os.listdir(folder)) == before


@pytest.mark.parametrize("name", COMMANDS)
def test_no_space_for_the_output_is_one_line_before_any_work(tmp_path, name):
    out = tmp_path / "out"
    done = run_child(*_command(name, tmp_path, out), free=4096)
    assert_clean_error(done, f"-o {out}", "4096 bytes free", "free some space")
    assert not out.exists()  # nothing was written, the check came first: no folder is left behind


# -- a disk that fills up mid-way ------------------------------------------------------------------------


def _many_entries(copies: int) -> list[tuple]:
    """The tiny model ``copies`` times over, under other names (a bigger rank dump)."""
    entries = []
    for k in range(copies):
        def renamed(name: str | None, k: int = k) -> str | None:
            if name is None:
                return None
            return name.replace("Functional.", f"Functional.f{k}_").replace("Module.", f"Module.b{k}.")
        entries += [(renamed(e[0]), renamed(e[1]), *e[2:]) for e in tiny_model_entries()]
    return entries


def test_a_full_disk_mid_compare_names_what_was_written_completely(tmp_path):
    for side in ("t", "b"):
        write_dump(tmp_path / side / "step0" / "rank0", tiny_model_entries())
        write_dump(tmp_path / side / "step0" / "rank1", _many_entries(20))
    whole = run_probe("compare", tmp_path / "t", tmp_path / "b", "-o", tmp_path / "whole", "--quiet")
    assert whole.returncode == 0, whole.stderr
    sizes = {int(p.name.split("_")[2].removeprefix("rank")): p.stat().st_size
             for p in (tmp_path / "whole").glob("compare_result_rank*.csv")}
    assert sizes[1] > 10 * sizes[0]
    out = tmp_path / "out"
    done = run_child("compare", tmp_path / "t", tmp_path / "b", "-o", out, "--quiet", limit=3 * sizes[0])
    line = assert_clean_error(done, "the disk is full", "rank1", "written completely")
    (kept,) = out.glob("compare_result_rank0_*.csv")
    assert str(kept) in line  # named as complete, and it is: every row of rank 0, as the unlimited run wrote it
    (reference,) = (tmp_path / "whole").glob("compare_result_rank0_*.csv")
    assert kept.read_bytes() == reference.read_bytes()
    assert not list(out.glob(".*.rows"))  # no spool left behind
    assert not (out / "summary.json").exists()  # no summary of results that are not all there


def test_a_full_disk_mid_graph_is_one_line_and_leaves_no_file(tmp_path):
    target, bench = dump_pair(tmp_path)
    out = tmp_path / "out"
    done = run_child("graph", target, bench, "-o", out, limit=8000)
    assert_clean_error(done, str(out / "compare_"), ".vis.db", "nothing was written completely")
    assert not out.exists()  # no half-written database, no reserved name: the folder it made is gone again


# -- two runs into one folder in the same second ----------------------------------------------------------


def test_two_compares_into_one_folder_in_the_same_second_keep_both_results(tmp_path):
    target, bench = dump_pair(tmp_path)
    drifted = write_dump(tmp_path / "drifted" / "step0" / "rank0", tiny_model_entries(scale=1.5))
    out = tmp_path / "out"
    runs = [subprocess.Popen(child("compare", side, bench, "-o", out, stamp="20260102030405"), env=env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for side in (target, drifted)]
    results = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 0 for run in runs), results
    summaries = sorted(out.glob("summary*.json"))
    assert [p.name for p in summaries] == ["summary.json", "summary_1.json"]
    csvs = sorted(out.glob("compare_result_rank0_20260102030405*.csv"))
    assert [p.name for p in csvs] == ["compare_result_rank0_20260102030405.csv",
                                      "compare_result_rank0_20260102030405_1.csv"]
    by_target = {}
    for path in summaries:
        summary = json.loads(path.read_text())
        (rank,) = summary["ranks"]
        rows = read_csv(Path(rank["csv"]))
        # each summary names its own CSV, complete: as many rows as it counted, with the results it counted
        assert sum(summary["row_counts"].values()) == len(rows)
        assert sum(row["Result"] == "error" for row in rows) == summary["row_counts"]["error"]
        by_target[summary["target"]] = (summary, path, Path(rank["csv"]))
    assert set(by_target) == {str(target), str(drifted)}
    assert by_target[str(target)][0]["first_divergence"] is None
    assert by_target[str(drifted)][0]["first_divergence"] is not None
    for (stdout, _), side in zip(results, (target, drifted)):
        _, summary_file, csv_file = by_target[str(side)]
        assert f"{summary_file.name}, {csv_file.name}" in stdout.replace("\n", "")  # the CLI says which files


# -- merge-result on hostile results ------------------------------------------------------------------------


def _merge(results: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return run_probe("merge-result", "-i", results, "-o", tmp_path / "merged", "-config", tmp_path / "merge.yaml",
                     timeout=60)


def test_merge_result_short_row_is_one_line_naming_file_and_row(tmp_path):
    results = two_rank_results(tmp_path)
    (path,) = results.glob("compare_result_rank1_*.csv")
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = lines[3][:40] + "\r\n"
    path.write_text("".join(lines))
    assert_clean_error(_merge(results, tmp_path), str(path), "line 4", "cells where the header has", "run probe compare")


def test_merge_result_bytes_that_are_not_utf8_are_one_line(tmp_path):
    results = two_rank_results(tmp_path)
    (path,) = results.glob("compare_result_rank0_*.csv")
    data = path.read_bytes()
    at = data.index(b"Functional.linear.0.forward.output.0")
    path.write_bytes(data[:at] + b"\xff\xfe" + data[at:])
    assert_clean_error(_merge(results, tmp_path), str(path), "line 4", "0xff", "not UTF-8")


def test_merge_result_xlsx_that_is_not_a_zip_is_one_line(tmp_path):
    results = two_rank_results(tmp_path, "--xlsx")
    (path,) = results.glob("compare_result_rank1_*.xlsx")
    path.write_bytes(b"rank,NPU Name\n1,x\n")  # a CSV saved under the .xlsx name
    assert_clean_error(_merge(results, tmp_path), str(path), "XLSX (zip)", "give the .xlsx")


def _xlsx_with_sheet(path: Path, sheet: bytes) -> None:
    with zipfile.ZipFile(path) as source:
        members = [(info.filename, source.read(info.filename)) for info in source.infolist()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as book:
        for name, data in members:
            book.writestr(name, sheet if name == "xl/worksheets/sheet1.xml" else data)
    path.write_bytes(buffer.getvalue())


def test_merge_result_refuses_an_xml_entity_bomb(tmp_path):
    results = two_rank_results(tmp_path, "--xlsx")
    (path,) = results.glob("compare_result_rank1_*.xlsx")
    entities = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    bomb = (f'<?xml version="1.0"?><!DOCTYPE worksheet [<!ENTITY l0 "lol">{entities}]>'
            '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
            '<row r="1"><c r="A1" t="inlineStr"><is><t>NPU Name</t></is></c></row>'
            '<row r="2"><c r="A2" t="inlineStr"><is><t>&l9;</t></is></c></row></sheetData></worksheet>')
    _xlsx_with_sheet(path, bomb.encode())  # 10**9 "lol"s once expanded
    started = time.monotonic()
    assert_clean_error(_merge(results, tmp_path), str(path), "xl/worksheets/sheet1.xml", "DOCTYPE", "refused")
    assert time.monotonic() - started < 30


def test_merge_result_prefers_the_newest_result_of_a_second(tmp_path):
    """A compare run twice in one second writes ``..._{stamp}_1.csv`` beside the first: merge reads the newest."""
    results = two_rank_results(tmp_path)
    (first,) = results.glob("compare_result_rank1_*.csv")
    rows = list(csv.reader(io.StringIO(first.read_text(), newline="")))
    at = rows[0].index("Max diff")
    for row in rows[1:]:
        row[at] = "12345.0" if row[at] not in ("N/A", "") else row[at]
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    (first.parent / f"{first.stem}_1.csv").write_text(buffer.getvalue())
    done = _merge(results, tmp_path)
    assert done.returncode == 0, done.stderr
    (merged,) = (tmp_path / "merged").glob("multi_ranks_compare_merge_*.xlsx")
    import openpyxl

    sheet = openpyxl.load_workbook(merged)["Max diff"]
    assert {row[2].value for row in sheet.iter_rows(min_row=2)} == {12345}


# -- a hostile dump header, and --lenient with nothing readable ------------------------------------------


def test_graph_on_a_dump_data_dir_that_is_an_object_is_one_line(tmp_path):
    target, bench = dump_pair(tmp_path)
    dump = json.loads((target / "dump.json").read_text())
    dump["dump_data_dir"] = {"path": "/data"}
    (target / "dump.json").write_text(json.dumps(dump))
    for args in ((target,), (target, bench)):
        assert_clean_error(run_probe("graph", *args, "-o", tmp_path / "out"), str(target / "dump.json"),
                           '"dump_data_dir"', "dict", "null")


def _warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning:")]


def test_lenient_compare_of_dumps_it_reads_nothing_from_is_an_error_not_an_answer(tmp_path):
    target, bench = dump_pair(tmp_path)
    (target / "dump.json").write_bytes(b"\xff\xfe" + (target / "dump.json").read_bytes())
    (bench / "dump.json").write_bytes(b'{"task": "statistics", "data": {"Functional.linear.0.forward": {"in')
    done = run_probe("compare", target, bench, "-o", tmp_path / "out", "--lenient")
    line = assert_clean_error(done, str(target / "dump.json"), "nothing could be read", "invalid UTF-8")
    assert "No divergent entry" not in done.stdout + done.stderr and "repair" in line
    assert len(_warnings(done)) == len(set(_warnings(done)))
    (target / "dump.json").write_bytes((bench / "dump.json").read_bytes())
    assert_clean_error(run_probe("compare", target, bench, "-o", tmp_path / "out", "--lenient"),
                       "nothing could be read", "Unterminated string")


def test_lenient_compare_prints_each_warning_once(tmp_path):
    target, bench = dump_pair(tmp_path)
    data = (target / "dump.json").read_bytes()
    at = data.index(b'"Functional.relu.0.forward"')
    (target / "dump.json").write_bytes(data[:at] + b"\xff" + data[at:])
    done = run_probe("compare", target, bench, "-o", tmp_path / "out", "--lenient")
    assert done.returncode == 0, done.stderr
    assert len(_warnings(done)) == 1 and "read the 2 entries before it" in _warnings(done)[0]
    assert not error_lines(done)

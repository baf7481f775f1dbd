"""probe compare and msprobe 26.2.0 side by side: each reads the other's compare results, the numbers agree.

* msprobe's ``merge_result`` reads probe's per-rank results (msprobe's file names and columns);
* ``probe merge-result`` reads msprobe's;
* on one tensor pair (exact zeros in the bench, a 0-d tensor, a one-element tensor, an ordinary one) both
  tools write the same metrics: a finite MaxRelativeErr where the bench is 0, ``unsupported`` Cosine
  for 0-d and one-element tensors.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import openpyxl
import pytest

from tests.compare.dumps import tiny_model_entries, write_dump
from tests.compare.helpers import run_probe
from tests.interop.msprobe_env import msprobe_cli

MERGE_CONFIG = "api:\n  - Functional.linear\ncompare_index:\n  - Max diff\n  - MeanRelativeErr\n"


def two_ranks(root: Path) -> tuple[Path, Path]:
    for side, scale in (("t", 1.01), ("b", 1.0)):
        for rank in (0, 1):
            write_dump(root / side / "step0" / f"rank{rank}", tiny_model_entries(scale if rank else 1.0))
    return root / "t" / "step0", root / "b" / "step0"


def number(value) -> float | None:
    """A cell as a number: msprobe writes some as text, relative errors as "1.5%" and zero as "0" (probe "0%")."""
    try:
        return float(str(value).removesuffix("%"))
    except (TypeError, ValueError):
        return None


def merged_sheets(folder: Path) -> dict[str, dict[str, list]]:
    (path,) = folder.glob("multi_ranks_compare_merge_*.xlsx")
    book = openpyxl.load_workbook(path)
    return {ws.title: {row[0].value: [c.value for c in row[1:]] for row in ws.iter_rows()} for ws in book}


def test_msprobe_merge_result_reads_probes_results_and_probe_reads_msprobes(msprobe, tmp_path):
    target, bench = two_ranks(tmp_path)
    (tmp_path / "merge.yaml").write_text(MERGE_CONFIG)
    done = run_probe("compare", target, bench, "-o", tmp_path / "probe_out", "--xlsx", "--quiet")
    assert done.returncode == 0, done.stderr
    done = msprobe_cli(msprobe, "merge_result", "-i", tmp_path / "probe_out", "-o", tmp_path / "ms_merged",
                       "-config", tmp_path / "merge.yaml")
    assert done.returncode == 0, done.stderr[-2000:]
    by_msprobe = merged_sheets(tmp_path / "ms_merged")

    done = msprobe_cli(msprobe, "compare", "-tp", target, "-gp", bench, "-o", tmp_path / "ms_out", "--xlsx")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(list((tmp_path / "ms_out").glob("compare_result_rank*_*.xlsx"))) == 2
    done = run_probe("merge-result", "-i", tmp_path / "ms_out", "-o", tmp_path / "probe_merged", "-config",
                     tmp_path / "merge.yaml")
    assert done.returncode == 0, done.stderr
    by_probe = merged_sheets(tmp_path / "probe_merged")

    assert list(by_msprobe) == list(by_probe) == ["Max diff", "MeanRelativeErr"]
    for sheet in by_msprobe:
        assert by_msprobe[sheet]["NPU Name"] == by_probe[sheet]["NPU Name"] == ["rank0", "rank1"]
        assert set(by_msprobe[sheet]) == set(by_probe[sheet])
        for name, values in by_msprobe[sheet].items():
            for theirs, mine in zip(values, by_probe[sheet][name], strict=True):
                if number(theirs) is not None:  # msprobe's own XLSX holds some numbers as text
                    assert number(mine) == pytest.approx(number(theirs), rel=1e-6, abs=1e-9), (sheet, name)
                else:
                    assert mine == theirs, (sheet, name)
    assert any(v != 0 for v in by_msprobe["Max diff"]["Functional.linear.1.forward.output.0"])


def tensor_pair(root: Path) -> tuple[Path, Path]:
    import torch

    torch.manual_seed(0)
    bench = torch.randn(64)
    bench[::4] = 0.0
    pairs = {"Torch.zeros_bench.0.forward": (bench + 1e-4 * torch.randn(64), bench),
             "Torch.zero_d.0.forward": (torch.tensor(2.001), torch.tensor(2.0)),
             "Torch.one_element.0.forward": (torch.tensor([3.01]), torch.tensor([3.0])),
             "Torch.plain.0.forward": (torch.randn(8, 8) * 1.001, None)}
    pairs["Torch.plain.0.forward"] = (pairs["Torch.plain.0.forward"][0], pairs["Torch.plain.0.forward"][0] / 1.001)
    for side, index in (("target", 0), ("bench", 1)):
        folder = root / side / "step0" / "rank0"
        (folder / "dump_tensor_data").mkdir(parents=True)
        data = {}
        for name, tensors in pairs.items():
            tensor = tensors[index]
            file = f"{name}.output.0.pt"
            torch.save(tensor, folder / "dump_tensor_data" / file)
            data[name] = {"input_args": [], "input_kwargs": {}, "output": [{
                "type": "torch.Tensor", "dtype": str(tensor.dtype), "shape": list(tensor.shape),
                "Max": tensor.max().item(), "Min": tensor.min().item(), "Mean": tensor.mean().item(),
                "Norm": tensor.norm().item(), "requires_grad": False, "data_name": file}]}
        (folder / "dump.json").write_text(json.dumps({"task": "tensor", "level": "L1", "framework": "pytorch",
                                                      "dump_data_dir": str(folder / "dump_tensor_data"),
                                                      "data": data}))
        (folder / "stack.json").write_text("{}")
        (folder / "construct.json").write_text("{}")
    return root / "target" / "step0", root / "bench" / "step0"


def rows_of(folder: Path) -> dict[str, dict[str, str]]:
    (path,) = folder.glob("compare_result_rank0_*.csv")
    with open(path, newline="", encoding="utf-8") as handle:
        return {row["NPU Name"]: row for row in csv.DictReader(handle)}


def test_metrics_agree_with_msprobe_on_bench_zeros_and_scalars(msprobe, tmp_path):
    target, bench = tensor_pair(tmp_path)
    done = msprobe_cli(msprobe, "compare", "-tp", target, "-gp", bench, "-o", tmp_path / "ms")
    assert done.returncode == 0, done.stderr[-2000:]
    done = run_probe("compare", target, bench, "-o", tmp_path / "probe", "--quiet")
    assert done.returncode == 0, done.stderr
    ours, theirs = rows_of(tmp_path / "probe"), rows_of(tmp_path / "ms")
    assert set(ours) == set(theirs)
    columns = ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
               "Five Thousandths Err Ratio")
    for name, row in theirs.items():
        for column in columns:
            mine, expected = ours[name][column], row[column]
            if expected == "unsupported":
                assert mine == "unsupported", (name, column)
            else:  # msprobe rounds Cosine near 1 to 6 digits and other values to 12 decimals
                assert float(mine) == pytest.approx(float(expected), rel=1e-6, abs=1e-6), (name, column)
    zeros = ours["Torch.zeros_bench.0.forward.output.0"]["MaxRelativeErr"]
    assert float(zeros) > 1000 and zeros != "inf"  # |target| / eps at the bench's zeros, as msprobe

"""The summaries a large job prints: a screen, not one line per rank (a 1,024-rank compare or graph)."""

from __future__ import annotations

from rich.console import Console

from probe_compare.output import print_summary
from probe_core.selection import SHOWN_ROWS, abridged, gaps
from probe_graph.summary import GraphSummary
from probe_graph.summary import print_summary as print_graph_summary

KEYS = ("pass", "warning", "error", "unmatched")


def test_abridged_keeps_the_head_and_the_answer():
    assert abridged(SHOWN_ROWS) == list(range(SHOWN_ROWS))
    head = list(range(SHOWN_ROWS // 2))
    assert abridged(1024, [700]) == [*head, 700]
    assert gaps([*head, 700], 1024) == [(700, 700 - len(head)), (1024, 323)]
    assert gaps(list(range(5)), 5) == []


def _compare_summary(ranks: int, answer: int) -> dict:
    rows = []
    for rank in range(ranks):
        first = {"name": "Functional.gelu.0.forward"} if rank >= answer else None
        rows.append({"label": f"rank{rank}_step0", "counts": {"pass": 9, "warning": 0, "error": int(first is not None),
                                                               "unmatched": 1},
                     "first_divergence": first, "unmatched": {"target": ["Torch.extra.0.forward"], "bench": []}})
    concurrent = [{"rank": rank, "name": "Functional.gelu.0.forward"} for rank in range(answer + 1, ranks)]
    return {"mode": "statistics", "ranks": rows, "output": "/out", "partial": [],
            "counts": {k: sum(r["counts"][k] for r in rows) for k in KEYS},
            "first_divergence": {"name": "Functional.gelu.0.forward", "reason": "adds error",
                                 "rank": f"rank{answer}_step0", "step": 0, "rank_id": answer,
                                 "concurrent": concurrent, "stack": []}}


def test_a_large_compare_prints_a_screen_with_totals_and_the_answer():
    console = Console(record=True, width=160)
    print_summary(_compare_summary(1024, answer=700), console)
    text = console.export_text()
    lines = text.splitlines()
    shown = [line for line in lines if "_step0 " in line and "│" in line]
    assert len(shown) == SHOWN_ROWS // 2 + 1  # the head and the rank holding the job's first divergence
    assert any("rank700_step0" in line for line in shown) and not any("rank699_step0" in line for line in shown)
    assert "... 688 more" in text and "... 323 more" in text
    total = next(line for line in lines if "all 1024" in line)
    assert "9216" in total and "324" in total  # pass and error summed over every rank, not the shown ones
    assert "at the same time on ranks 701-1023: Functional.gelu.0.forward" in text
    assert "rank0_step0 and 1023 more: only in target: Torch.extra.0.forward" in text
    assert len(lines) < 60


def test_a_small_compare_prints_every_rank():
    console = Console(record=True, width=160)
    print_summary(_compare_summary(3, answer=1), console)
    text = console.export_text()
    table = text.split("First divergence")[0]
    assert all(f"rank{r}_step0" in table for r in range(3)) and "more" not in table
    assert "all 3" not in text and "at the same time on rank 2: Functional.gelu.0.forward" in text


def test_a_large_graph_job_prints_a_screen(capsys):
    job = "step 0 rank 250: Module.fc.Linear.forward.0"  # every graph's summary carries the job's answer
    summaries = [GraphSummary(0, rank, 164, 164, 164, errors=1, first_divergent="Module.fc.Linear.forward.0",
                              job_first=job) for rank in range(300)]
    print_graph_summary(summaries, "/out/compare.vis.db", compare=True)
    text = capsys.readouterr().out
    named = [line for line in text.splitlines() if line.startswith("step 0 rank ")]
    assert len(named) == SHOWN_ROWS // 2 + 1 and named[-1].startswith("step 0 rank 250:")
    assert "287 of 300 graphs not shown" in text
    assert "... and 287 more graphs with a first divergent node" in text
    assert "first divergence of the job: step 0 rank 250" in text


def test_rank_and_step_options_take_lists_and_runs():
    import argparse

    from probe_core.selection import add_selection_arguments, selection

    parser = argparse.ArgumentParser(exit_on_error=False)
    add_selection_arguments(parser, "compare")
    args = parser.parse_args(["--rank", "0-3,8", "--rank", "10", "--step", "2"])
    assert selection(args.rank) == [0, 1, 2, 3, 8, 10] and selection(args.step) == [2]
    assert selection(parser.parse_args([]).rank) is None
    for bad in ("3-1", "a", "-1", "1-", "0-1000000000"):
        try:
            parser.parse_args(["--rank", bad])
        except argparse.ArgumentError as exc:
            assert "give" in str(exc)
        else:
            raise AssertionError(f"--rank {bad} was accepted")

"""Each rank's first NaN/Inf (probe_overflow_check.scan) and the job's first across steps and ranks."""

from __future__ import annotations

import pytest

from probe_core.dump import RankDump
from probe_overflow_check.analyze import analyze, job_first, node_info
from probe_overflow_check.scan import AFTER, BEFORE, DURING, INHERITED, NO_COMMUNICATION, PRODUCED, RECEIVED, scan_rank
from tests.overflow_check.dumps import INF, NAN, api, backward, tensor, write_rank


def first_of(folder, data, **kwargs):
    write_rank(folder, data, **kwargs)
    return scan_rank(RankDump(folder / "dump.json"), 0).first


def test_the_entry_that_makes_the_inf_is_named_not_those_it_flows_into(tmp_path):
    found = first_of(tmp_path, {
        "Functional.linear.0.forward": api([tensor()], [tensor()]),
        "Torch.exp.0.forward": api([tensor(700.0)], [tensor(INF, 0.0, INF, INF)]),
        "Tensor.sum.0.forward": api([tensor(INF, 0.0, INF, INF)], [tensor(INF, INF, INF, INF)]),
    })
    assert (found.entry.name, found.kind, found.phase) == ("Torch.exp.0.forward", PRODUCED, NO_COMMUNICATION)
    assert found.tensors == ("output.0: inf",)


def test_nan_already_in_the_first_inputs_is_inherited(tmp_path):
    """A NaN in the data: no recorded call made it; the first entry that shows it is named."""
    found = first_of(tmp_path, {
        "Functional.linear.0.forward": api([tensor(NAN, NAN, NAN, NAN), tensor()], [tensor(NAN, NAN, NAN, NAN)]),
        "Torch.exp.0.forward": api([tensor()], [tensor(INF, 0.0)]),  # later, made here: not the first
    })
    assert (found.entry.name, found.kind) == ("Functional.linear.0.forward", INHERITED)
    assert found.tensors == ("input.0: nan",)


def test_a_nan_weight_is_an_input(tmp_path):
    found = first_of(tmp_path, {
        "Functional.linear.0.forward": api([tensor()], [tensor()]),
        "Module.fc.Linear.forward.0": {"input_args": [tensor()], "input_kwargs": {},
                                       "output": [tensor(NAN, NAN)], "parameters": {"weight": tensor(NAN, NAN)}},
    })
    assert (found.entry.name, found.kind) == ("Module.fc.Linear.forward.0", INHERITED)
    assert found.tensors == ("parameters.weight: nan",)


def test_a_minus_inf_given_on_purpose_is_not_an_overflow(tmp_path):
    """masked_fill(mask, -inf) and the softmax after it: by design; a later real NaN is still found."""
    found = first_of(tmp_path, {
        "Tensor.masked_fill.0.forward": api([tensor(), {"type": "float", "value": -INF}],
                                            [tensor(1.0, -INF, -INF, INF)]),
        "Torch.softmax.0.forward": api([tensor(1.0, -INF, -INF, INF)], [tensor(1.0, 0.0)]),
        "Torch.log.0.forward": api([tensor(1.0, 0.0)], [tensor(0.0, -INF)]),
    })
    assert (found.entry.name, found.kind, found.tensors) == ("Torch.log.0.forward", PRODUCED, ("output.0: -inf",))


def test_uninitialised_memory_is_not_an_overflow(tmp_path):
    found = first_of(tmp_path, {
        "Torch.empty.0.forward": api([], [tensor(NAN, NAN)]),
        "Tensor.fill_.0.forward": api([tensor(NAN, NAN), {"type": "float", "value": 0.0}], [tensor(0.0, 0.0)]),
        "Tensor.add.0.forward": api([tensor(0.0, 0.0)], [tensor()]),
    })
    assert found is None
    module = first_of(tmp_path / "m", {"Module.empty.Linear.forward.0": api([tensor()], [tensor(NAN, NAN)])})
    assert module.entry.name == "Module.empty.Linear.forward.0"  # a module attribute named "empty" counts


def test_mean_or_norm_overflowing_alone_is_no_inf_in_the_data(tmp_path):
    found = first_of(tmp_path, {"Tensor.mul.0.forward": api([tensor(1e38, 1e38)], [tensor(3e38, 3e38, INF, INF)])})
    assert found is None


def test_msprobe_text_for_inf_is_read(tmp_path):
    found = first_of(tmp_path, {"Torch.exp.0.forward": api([tensor()], [tensor("inf", 0.0)])})
    assert found.entry.name == "Torch.exp.0.forward" and found.tensors == ("output.0: inf",)


def test_backward_entries_count_gradients_in_and_out(tmp_path):
    found = first_of(tmp_path, {
        "Torch.sqrt.0.forward": api([tensor(1.0, 0.0)], [tensor(1.0, 0.0)]),
        "Torch.sqrt.0.backward": backward([tensor()], [tensor(INF, -1.0)]),  # d sqrt(x)/dx at 0
    })
    assert (found.entry.name, found.kind) == ("Torch.sqrt.0.backward", PRODUCED)
    assert node_info(found)["data_info"].keys() == {"input", "output"}


def test_where_relative_to_communication(tmp_path):
    reduce = api([tensor()], [tensor()])
    before = first_of(tmp_path / "a", {"Torch.exp.0.forward": api([tensor()], [tensor(INF, 0.0)]),
                                       "Distributed.all_reduce.0.forward": reduce})
    assert (before.phase, before.where) == (BEFORE, "before Distributed.all_reduce.0.forward")
    after = first_of(tmp_path / "b", {"Distributed.all_reduce.0.forward": reduce,
                                      "Distributed.all_reduce.1.forward": reduce,
                                      "Torch.exp.0.forward": api([tensor()], [tensor(INF, 0.0)])})
    assert (after.phase, after.where) == (AFTER, "after Distributed.all_reduce.1.forward")
    during = first_of(tmp_path / "c", {"Distributed.all_reduce.0.forward": api([tensor()], [tensor(INF, INF)])})
    assert (during.phase, during.kind, during.where) == (DURING, RECEIVED, "during communication")


def test_a_recv_buffer_is_not_an_input(tmp_path):
    """The buffer recv overwrites may hold garbage; the NaN came in through the recv."""
    found = first_of(tmp_path, {"Distributed.recv.0.forward": api([tensor(NAN, NAN)], [tensor(NAN, NAN)])})
    assert (found.entry.name, found.kind) == ("Distributed.recv.0.forward", RECEIVED)


def test_msprobe_node_layout(tmp_path):
    found = first_of(tmp_path, {
        "Functional.linear.0.forward": api([tensor()], [tensor(INF, 0.0)], bias={"type": "NoneType", "value": None}),
        "Module.fc.Linear.forward.0": api([tensor()], [tensor(INF, 0.0)]),
    }, stacks={"Functional.linear.0.forward": ["File m.py, line 3, in forward, \n x = self.fc(x)"]},
        construct={"Functional.linear.0.forward": "Module.fc.Linear.forward.0",
                   "Module.fc.Linear.forward.0": "Module.net.Net.forward.0", "Module.net.Net.forward.0": None})
    node = node_info(found)
    assert node["op_name"] == "Functional.linear.0.forward"
    assert list(node["data_info"]) == ["input_args", "input_kwargs", "output"]
    assert node["data_info"]["input_kwargs"] == {"bias": {"type": "NoneType", "value": None}}
    assert node["construct_info"] == ["Module.net.Net.forward.0", "Module.fc.Linear.forward.0",
                                      "Functional.linear.0.forward"]
    assert node["stack_info"] == ["File m.py, line 3, in forward, \n x = self.fc(x)"]


def test_job_first_is_in_the_earliest_step_with_one(tmp_path):
    clean = {"Tensor.add.0.forward": api([tensor()], [tensor()])}
    write_rank(tmp_path / "step0" / "rank0", clean)
    write_rank(tmp_path / "step0" / "rank1", clean)
    write_rank(tmp_path / "step1" / "rank0", {"Torch.exp.0.forward": api([tensor()], [tensor(INF, 0.0)])})
    write_rank(tmp_path / "step1" / "rank1", {"Torch.log.0.forward": api([tensor()], [tensor(0.0, NAN)])})
    write_rank(tmp_path / "step2" / "rank1", {"Tensor.add.0.forward": api([tensor(NAN, NAN)], [tensor(NAN, NAN)])})
    results = analyze(tmp_path)
    assert [r.step for r in results] == [0, 1, 2] and results[0].first is None
    first = job_first(results)
    assert first.step == 1 and first.first.rank == 0 and first.first.entry.name == "Torch.exp.0.forward"
    assert [f.rank for f in first.concurrent] == [1]  # no communication: nothing orders the two ranks
    assert results[2].first.kind == INHERITED  # step 2 starts with what step 1 left in the weights


@pytest.mark.parametrize("received_first", [True, False])
def test_ranks_ordered_through_the_all_reduce(tmp_path, received_first):
    """Rank 0 receives the Inf that rank 1 made before the collective, whichever rank folder is read first."""
    r0 = {"Tensor.add.0.forward": api([tensor()], [tensor()]),
          "Distributed.all_reduce.0.forward": api([tensor()], [tensor(INF, INF)])}
    r1 = {"Torch.exp.0.forward": api([tensor()], [tensor(INF, 0.0)]),
          "Distributed.all_reduce.0.forward": api([tensor(INF, INF)], [tensor(INF, INF)])}
    write_rank(tmp_path / "rank0", r0 if received_first else r1)
    write_rank(tmp_path / "rank1", r1 if received_first else r0)
    result = analyze(tmp_path)[0]
    assert result.first.entry.name == "Torch.exp.0.forward"
    assert result.first.rank == (1 if received_first else 0) and result.concurrent == ()

"""probe_core.dump.order: anomalies of several ranks ordered through their communication entries."""

from __future__ import annotations

import itertools

from probe_core.dump.order import (
    RankAnomaly,
    communication_positions,
    concurrent_with,
    epoch_of,
    first_across_ranks,
    is_communication,
    order_across_ranks,
)

# both ranks: communication entries at positions 3 and 7 of their execution order
COMMS = {0: [3, 7], 1: [3, 7]}


def test_a_rank_own_anomaly_comes_before_one_another_rank_receives_through_the_collective():
    received = RankAnomaly(0, 3, "Distributed.all_reduce.0.forward", received=True)
    own = RankAnomaly(1, 2, "Torch.exp.0.forward")
    assert first_across_ranks([received, own], COMMS) == own


def test_own_anomaly_late_in_the_epoch_still_precedes_the_received_one():
    """Rank 1 computes its Inf just before the collective; rank 0 receives it at the same collective."""
    comms = {0: [1], 1: [50]}  # rank 0 made little work before the all_reduce, rank 1 a lot
    received = RankAnomaly(0, 1, "Distributed.all_reduce.0.forward", received=True)
    own = RankAnomaly(1, 49, "Torch.exp.0.forward")
    assert first_across_ranks([received, own], comms) == own


def test_the_smallest_epoch_wins_whatever_the_rank_or_position():
    late_on_rank0 = RankAnomaly(0, 8, "Tensor.add.0.forward")  # after both collectives: epoch 2
    early_on_rank1 = RankAnomaly(1, 4, "Tensor.mul.0.forward")  # between them: epoch 1
    assert epoch_of(late_on_rank0, COMMS) == 2 and epoch_of(early_on_rank1, COMMS) == 1
    assert first_across_ranks([late_on_rank0, early_on_rank1], COMMS) == early_on_rank1


def test_a_received_anomaly_comes_before_an_own_one_after_that_collective():
    received = RankAnomaly(1, 3, "Distributed.all_reduce.0.forward", received=True)  # epoch 0, received
    own_after = RankAnomaly(0, 4, "Tensor.mul.0.forward")  # epoch 1
    assert first_across_ranks([own_after, received], COMMS) == received


def test_ties_name_the_lowest_rank_and_list_the_others():
    anomalies = [RankAnomaly(rank, 3, "Distributed.all_reduce.0.forward", received=True) for rank in (2, 0, 1)]
    comms = {rank: [3] for rank in range(3)}
    first = first_across_ranks(anomalies, comms)
    assert first.rank == 0
    assert [a.rank for a in concurrent_with(first, anomalies, comms)] == [1, 2]


def test_concurrent_leaves_out_what_is_ordered_after_the_first():
    own0 = RankAnomaly(0, 1, "Torch.exp.0.forward")
    own2 = RankAnomaly(2, 0, "Torch.log.0.forward")  # same epoch, own: concurrent
    received1 = RankAnomaly(1, 3, "Distributed.all_reduce.0.forward", received=True)  # same epoch, received: after
    later2 = RankAnomaly(2, 5, "Torch.sqrt.0.forward")  # rank 2 again, later: only its earliest counts
    comms = {rank: [3] for rank in range(3)}
    first = first_across_ranks([received1, later2, own2, own0], comms)
    assert first == own0
    assert concurrent_with(first, [received1, later2, own2, own0], comms) == [own2]


def test_a_communication_entry_whose_inputs_already_hold_it_is_the_rank_own():
    """Not received: rank 1 hands the NaN to the collective (it came from outside the recorded calls)."""
    handed = RankAnomaly(1, 3, "Distributed.all_reduce.0.forward", received=False)
    received = RankAnomaly(0, 3, "Distributed.all_reduce.0.forward", received=True)
    assert first_across_ranks([received, handed], COMMS) == handed


def test_a_rank_without_communication_is_in_epoch_zero():
    lone = RankAnomaly(3, 100, "Torch.exp.0.forward")
    assert epoch_of(lone, COMMS) == 0
    assert first_across_ranks([RankAnomaly(0, 4, "Tensor.mul.0.forward"), lone], COMMS) == lone


def test_within_a_rank_execution_order_decides():
    a, b = RankAnomaly(0, 5, "b"), RankAnomaly(0, 4, "a")
    assert first_across_ranks([a, b], COMMS) == b


def test_the_order_does_not_depend_on_the_order_given():
    anomalies = [RankAnomaly(0, 3, "Distributed.all_reduce.0.forward", received=True),
                 RankAnomaly(1, 2, "Torch.exp.0.forward"), RankAnomaly(2, 9, "Tensor.add.0.forward"),
                 RankAnomaly(3, 2, "Torch.log.0.forward")]
    comms = {rank: [3, 7] for rank in range(4)}
    expected = order_across_ranks(anomalies, comms)
    assert [a.rank for a in expected] == [1, 3, 0, 2]
    for permutation in itertools.permutations(anomalies):
        assert order_across_ranks(list(permutation), comms) == expected


def test_nothing_to_order():
    assert first_across_ranks([], COMMS) is None


def test_payload_rides_along_and_is_not_compared():
    a = RankAnomaly(0, 1, "x", payload={"why": "nan"})
    assert a == RankAnomaly(0, 1, "x", payload="other") and first_across_ranks([a], {}).payload == {"why": "nan"}


def test_communication_entries_are_distributed_calls_forward():
    assert is_communication("Distributed.all_reduce.0.forward")
    assert is_communication("Distributed.isend.3.forward")
    assert not is_communication("Distributed.all_reduce.0.backward")
    assert not is_communication("Functional.linear.0.forward")
    assert not is_communication("Module.Distributed.Linear.forward.0")


def test_communication_positions_from_a_rank_dump(tmp_path):
    from probe_core.dump import RankDump
    from tests.overflow_check.dumps import api, tensor, write_rank

    names = ["Functional.linear.0.forward", "Distributed.all_reduce.0.forward", "Tensor.add.0.forward",
             "Distributed.broadcast.0.forward", "Distributed.all_reduce.0.backward"]
    write_rank(tmp_path, {name: api([tensor()], [tensor()]) for name in names})
    assert communication_positions(ref.name for ref in RankDump(tmp_path / "dump.json").index()) == [1, 3]

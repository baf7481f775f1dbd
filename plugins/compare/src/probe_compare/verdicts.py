"""One answer for a whole job: each step of each rank judged, steps chained, ranks ordered.

:func:`judge_job` takes the :class:`~probe_compare.judge.EntryFacts` of
every compared (step, rank) and returns the verdicts ``probe compare``
writes and ``probe graph`` colours:

* **steps**, per rank in step order: each step is judged with the largest
  loss discrepancy of the clean steps before it as its baseline (two noisy
  runs drift apart as they go: AdamW moves parameters whose gradients are
  noise by a full step, and the loss follows). When the first step
  that goes wrong does so because its *parameters* differ, the cause is the
  update of the step before: the answer moves there, to that step's
  parameter gradients of the module (or, when there are none, to what
  ran after its last backward: clipping, a gradient collective). Once a
  step went wrong, the parameters of the later ones differ as its
  consequence: they name nothing more;
* **ranks**, per step: each rank's answer is ordered through the
  communication entries (:mod:`probe_core.dump.order`): a divergence that
  arrives through an all_reduce/send/recv on one rank is a consequence of
  another rank's own divergence in the same epoch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from probe_compare.judge import (FLOOR, NONFINITE, EntryFacts, Finding, NoiseReference, StepJudgement,
                                      judge_step, judge_step_by_rules)
from probe_core.api import RankAnomaly, concurrent_with, first_across_ranks, is_communication


@dataclass
class StepFacts:
    """The facts of one compared (step, rank), in execution order."""

    step: int
    rank: int
    facts: list[EntryFacts]
    judgement: StepJudgement | None = None


@dataclass
class JobAnswer:
    """The job's first divergence: where, and which other ranks diverged at the same time."""

    step: int
    rank: int
    finding: Finding
    concurrent: list[tuple[int, str]] = field(default_factory=list)  # (rank, entry) of the same epoch


def judge_job(steps: Sequence[StepFacts], rules: str = "noise",
              references: Mapping[int, NoiseReference] | None = None) -> JobAnswer | None:
    """Judge every (step, rank) (setting ``.judgement``); return the job's first divergence. ``references``:
    per rank, the noise a pair of benign runs shows (``--noise-reference``)."""
    by_rank: dict[int, list[StepFacts]] = {}
    for item in sorted(steps, key=lambda s: (s.rank, s.step)):
        by_rank.setdefault(item.rank, []).append(item)
    for rank, chain in by_rank.items():
        _judge_chain(chain, rules, (references or {}).get(rank))
    return first_of_job(steps)


def _judge_chain(chain: Sequence[StepFacts], rules: str, reference: NoiseReference | None) -> None:
    baseline: float | None = None
    diverged = False
    for position, item in enumerate(chain):
        if rules != "noise":
            item.judgement = judge_step_by_rules(item.facts)
            continue
        judgement = judge_step(item.facts, item.step, baseline, reference)
        item.judgement = judgement
        if diverged:  # parameters that differ after an earlier step went wrong are its consequence
            _drop_parameters(judgement)
        diverged = diverged or judgement.first is not None
        previous = chain[position - 1] if position else None
        if judgement.first is not None and judgement.first.kind == "parameters" and previous is not None \
                and previous.judgement is not None and previous.judgement.first is None \
                and previous.step == item.step - 1:
            origin = update_origin(previous.facts, judgement.first)
            previous.judgement.first = origin
            previous.judgement.errors[origin.index] = origin
        if judgement.first is None and judgement.loss_err is not None:  # noise grows as a run goes on
            baseline = max(baseline or 0.0, judgement.loss_err)


def _drop_parameters(judgement: StepJudgement) -> None:
    judgement.errors = {i: f for i, f in judgement.errors.items() if f.kind != "parameters"}
    judgement.first = judgement.errors[min(judgement.errors)] if judgement.errors else None


def update_origin(facts: Sequence[EntryFacts], parameters: Finding) -> Finding:
    """Where the update of a step shows in its dump: the parameter gradients of the module whose parameters
    the next step reads differently, else what ran after the last backward entry, else the last entry."""
    module = parameters.module or ""
    why = f"the update of this step diverged: the next step reads different parameters of {module}"
    grads = [f for f in facts if f.kind == "parameters_grad" and f.name.startswith(module + ".parameters_grad")]
    if grads:
        agree = all(f.out_err <= FLOOR * f.roundoff for f in grads)
        note = " (its gradients here agree: look at the optimizer, clipping, accumulation)" if agree else ""
        last = max(grads, key=_call_count)  # the last made, in whichever order the facts come (a graph's: tree order)
        return Finding(last.index, last.name, why + note, "update")
    backward = [i for i, f in enumerate(facts) if f.kind == "backward"]
    after = facts[backward[-1] + 1:] if backward else []
    for f in after:
        if f.kind != "parameters_grad":
            side = f" (only in the {f.side} dump)" if f.side else ""
            return Finding(f.index, f.name, f"{why}; the first call after the last backward{side}", "update")
    last = facts[-1]
    return Finding(last.index, last.name, why, "update")


def _call_count(facts: EntryFacts) -> int:
    count = facts.name.rsplit(".", 1)[-1]
    return int(count) if count.isdigit() else -1


def first_of_job(steps: Sequence[StepFacts]) -> JobAnswer | None:
    """The job's first divergence among judged steps: the earliest step, its ranks ordered through their
    communication calls."""
    answered = [s for s in steps if s.judgement is not None and s.judgement.first is not None]
    if not answered:
        return None
    step = min(s.step for s in answered)
    same_step = [s for s in answered if s.step == step]
    anomalies, communications = [], {}
    for item in same_step:
        found = item.judgement.first  # type: ignore[union-attr]
        facts = next((f for f in item.facts if f.index == found.index), None)
        received = facts is not None and (found.received or (  # it came in there
            found.kind == NONFINITE and is_communication(found.name) and not facts.nonfinite_in))
        anomalies.append(RankAnomaly(item.rank, found.index, found.name, received, payload=found))
        communications[item.rank] = [f.index for f in item.facts if f.side != "bench" and is_communication(f.name)]
    first = first_across_ranks(anomalies, communications)
    assert first is not None
    others = concurrent_with(first, anomalies, communications)
    return JobAnswer(step, first.rank, first.payload, [(o.rank, o.name) for o in others])

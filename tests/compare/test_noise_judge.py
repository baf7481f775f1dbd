"""The noise-aware judge on hand-built facts: which entry adds error, steps chained, ranks ordered.

Each test builds the :class:`EntryFacts` a compare would produce for a few entries of a step (the worst
input, parameter and output discrepancy of each, its roundoff) and checks what
:func:`judge_step` / :func:`judge_job` name. ``stats_discrepancy`` (the statistics mode's measure) is
checked against numpy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from probe_compare.judge import ADDS_ERROR, EntryFacts, NoiseReference, judge_step
from probe_compare.rules import ERROR, PASS
from probe_compare.verdicts import StepFacts, judge_job
from probe_core.dump import TensorMeta
from probe_modes.statistics import stats_discrepancy

U = 2.0 ** -24  # float32's unit roundoff


def entry(index: int, name: str, inp: float = 0.0, out: float = 0.0, param: float = 0.0, parent: str | None = None,
          result: str = PASS, side: str | None = None, **extra) -> EntryFacts:
    """One entry's facts; its kind follows its name as a compare names it."""
    kind = ("parameters_grad" if ".parameters_grad" in name else "backward" if ".backward" in name
            else "forward" if ".forward" in name else "other")
    return EntryFacts(index, name, parent, kind, result, in_err=inp, param_err=param, out_err=out,
                      roundoff=0.0 if side else U, outputs=[(0, out)] if side is None else [],
                      worst_output="output.0: differs" if out else "", worst_input="input.0: differs" if inp else "",
                      side=side, **extra)


def keyed_leaf(name: str, role: str, key: tuple) -> TensorMeta:
    """A target tensor leaf whose judge key (shape, dtype, Max, Min, Mean, Norm) is ``key``."""
    shape, dtype, *stats = key
    return TensorMeta(name, role, "torch.Tensor", dtype, shape, *stats, is_tensor=True)


def training_step(fc_param: float = 0.0, fc_out: float = U, loss_out: float = U, grad_out: float = U) -> list[EntryFacts]:
    """A step of ``loss(fc(x))``: forward, backward, the parameter gradients of fc."""
    return [entry(0, "Module.fc.Linear.forward.0", param=fc_param, out=fc_out),
            entry(1, "Functional.mse_loss.0.forward", inp=fc_out, out=loss_out),
            entry(2, "Functional.mse_loss.0.backward", out=U),
            entry(3, "Module.fc.Linear.backward.0", inp=U, out=U),
            entry(4, "Module.fc.Linear.parameters_grad", out=grad_out)]


# -- one step --------------------------------------------------------------------------------------


def test_an_entry_far_above_its_inputs_and_roundoff_is_the_first():
    facts = [entry(0, "Torch.matmul.0.forward", out=U),
             entry(1, "Functional.gelu.0.forward", inp=U, out=1e-3),   # ~8000x what it carries
             entry(2, "Functional.layer_norm.0.forward", inp=1e-3, out=1e-3),
             entry(3, "Torch.softmax.0.forward", inp=1e-3, out=5e-2)]  # 50x its input, but later
    judged = judge_step(facts, 0)
    assert judged.first.name == "Functional.gelu.0.forward" and judged.first.kind == "adds error"
    assert "adds error" in judged.first.reason and judged.first.rows == (0,)
    assert sorted(judged.errors) == [1, 3]  # the layer_norm only carries the gelu's error on


def test_noise_below_the_threshold_is_not_flagged():
    carried = U + U  # the input's error plus the roundoff
    quiet = [entry(0, "Torch.matmul.0.forward", out=U),
             entry(1, "Functional.gelu.0.forward", inp=U, out=30 * carried)]
    judged = judge_step(quiet, 0)
    assert judged.first is None and judged.errors == {}
    loud = [quiet[0], entry(1, "Functional.gelu.0.forward", inp=U, out=(ADDS_ERROR + 2) * carried)]
    assert judge_step(loud, 0).first.name == "Functional.gelu.0.forward"


def test_a_backward_carries_the_error_its_forward_saved():
    """grad_weight = grad_out^T @ x: a backward whose forward input differs is no origin."""
    facts = [entry(0, "Functional.linear.0.forward", inp=1e-2, out=1e-2),
             entry(1, "Functional.linear.0.backward", inp=0.0, out=1e-2)]
    judged = judge_step(facts, 0)
    assert 1 not in judged.errors


def test_only_in_target_call_before_differing_inputs_is_named():
    facts = [entry(0, "Torch.matmul.0.forward", out=U),
             entry(1, "Tensor.__mul__.0.forward", side="target"),  # a hook only the target has
             entry(2, "Functional.relu.0.forward", inp=1e-2, out=1e-2),
             entry(3, "Functional.mse_loss.0.forward", inp=1e-2, out=1e-2)]
    judged = judge_step(facts, 0)
    assert (judged.first.name, judged.first.kind) == ("Tensor.__mul__.0.forward", "only in target")
    assert "Functional.relu.0.forward already has differing inputs" in judged.first.reason


def test_calls_only_the_bench_made_before_differing_inputs_are_said():
    """Clipping switched off in the target: the bench's norm and scale calls are missing, and the optimizer
    reads other gradients. The divergence is the optimizer call's, and its reason names the skipped calls."""
    facts = [entry(0, "Functional.linear.0.forward", out=0.0),
             entry(1, "Functional.linear.0.backward", out=0.0),
             entry(2, "Tensor.lerp_.0.forward", inp=0.3, out=0.3, parent="optimizer"),
             # the compare lists bench-only entries last, keyed -1 - their bench index (bench: the 3rd and 4th)
             entry(-3, "Torch.linalg_vector_norm.0.forward", side="bench"),
             entry(-4, "Tensor.__rtruediv__.0.forward", side="bench")]
    judged = judge_step(facts, 0)
    assert (judged.first.name, judged.first.kind) == ("Tensor.lerp_.0.forward", "update")
    assert "2 calls only the bench made: Torch.linalg_vector_norm.0.forward, Tensor.__rtruediv__.0.forward: " \
           "the target skipped code the bench runs" in judged.first.reason
    assert "data, or a call not dumped" not in judged.first.reason
    later = facts[:3] + [entry(-4, "Torch.linalg_vector_norm.0.forward", side="bench")]  # after the lerp_
    assert "only the bench made" not in judge_step(later, 0).first.reason


def test_a_rule_error_where_one_side_made_more_calls_of_the_api_says_the_pair_may_be_two_calls():
    """Weight decay 0: AdamW skips a ``mul_`` per parameter, so the target's later ``mul_`` calls pair with other
    bench calls by their count; the rule's error there (requires_grad) is said to be that."""
    facts = [entry(0, "Tensor.mul_.4.forward", result=ERROR, message="Requires_grad inconsistent.",
                   parent="optimizer"),
             entry(-8, "Tensor.mul_.11.forward", side="bench"),
             entry(-9, "Tensor.mul_.12.forward", side="bench")]
    reason = judge_step(facts, 0).first.reason
    assert reason.startswith("the update of step 0 diverged at this optimizer call: Requires_grad inconsistent; "
                             "the bench made 2 more calls of Tensor.mul_ than the target in this step")
    alone = judge_step(facts[:1], 0).first.reason  # no unpaired calls of the API: the rule's message alone
    assert alone.endswith("Requires_grad inconsistent.")


def test_an_optimizer_call_amplifying_gradient_noise_is_no_origin():
    """A float64 bench: AdamW's addcdiv_ turns float32 noise in gradients near zero into ~550x more; a bug in
    the update (a scalar the rules flag, or far beyond DECISIVE) is still named there."""
    noise = [entry(0, "Functional.linear.0.backward", out=U),
             entry(1, "Tensor.addcdiv_.0.forward", inp=1.5e-7, out=550 * (1.5e-7 + U), parent="optimizer")]
    assert judge_step(noise, 0).first is None
    loud = [noise[0], entry(1, "Tensor.addcdiv_.0.forward", inp=1.5e-7, out=2000 * (1.5e-7 + U), parent="optimizer")]
    assert judge_step(loud, 0).first.kind == "update"
    scalar = [noise[0], entry(1, "Tensor.addcdiv_.0.forward", inp=1.5e-7, out=550 * (1.5e-7 + U), parent="optimizer",
                              result=ERROR, message="Scalar values differ (0.002 vs 0.001).")]
    assert "Scalar values differ" in judge_step(scalar, 0).first.reason


def test_an_in_place_producer_is_named():
    """The consumer reads what an in-place call wrote (same statistics) where the bench reads another value."""
    written = ((4, 4), "torch.float32", 2.0, -1.0, 0.5, 3.0)
    facts = [entry(0, "Torch.matmul.0.forward", out=U),
             entry(1, "Tensor.add_.0.forward", inp=0.0, out=0.0,
                   pairs=[(keyed_leaf("Tensor.add_.0.forward.output.0", "output", written), None)]),
             entry(2, "Functional.relu.0.forward", inp=1e-2, out=1e-2, fresh_in=[(1e-2, 0)],
                   pairs=[(keyed_leaf("Functional.relu.0.forward.input.0", "input", written), None)]),
             entry(3, "Functional.mse_loss.0.forward", inp=1e-2, out=1e-2)]
    judged = judge_step(facts, 0)
    assert (judged.first.name, judged.first.kind) == ("Tensor.add_.0.forward", "in-place")


def test_an_unchanged_input_from_a_getitem_names_no_in_place_call():
    """``criterion(model(x), y[step])``: the labels come unchanged from ``__getitem__`` (a dunder, not an in-place
    call), the logits differ because of calls not dumped; the answer is the loss's inputs, not the getitem."""
    from probe_compare.judge import _in_place

    assert _in_place("Tensor.add_.0.forward") and _in_place("Tensor.__iadd__.0.forward")
    assert not _in_place("Tensor.__getitem__.0.forward") and not _in_place("Torch.add.0.forward")
    labels = ((6,), "torch.int64", 3, 1)
    facts = [entry(0, "Tensor.__getitem__.0.forward", pairs=[(keyed_leaf("Tensor.__getitem__.0.forward.output.0", "output",
                                                                   labels), None)]),
             entry(1, "Functional.cross_entropy.0.forward", inp=1e-2, out=1e-2, fresh_in=[(1e-2, 0)],
                   pairs=[(keyed_leaf("Functional.cross_entropy.0.forward.input.0", "input", labels), None)])]
    judged = judge_step(facts, 1)
    assert (judged.first.name, judged.first.kind) == ("Functional.cross_entropy.0.forward", "inputs")


def test_a_module_carries_the_error_its_calls_added():
    """The call inside adds the error; the modules around it only carry it (their own inputs agree)."""
    facts = [entry(0, "Functional.gelu.0.forward", out=1e-3, parent="Module.mlp.act.GELU.forward.0"),
             entry(1, "Module.mlp.act.GELU.forward.0", out=1e-3, parent="Module.mlp.MLP.forward.0"),
             entry(2, "Module.mlp.MLP.forward.0", out=1e-3)]
    assert sorted(judge_step(facts, 0).errors) == [0]
    # at L0 the innermost module is where the error appears
    assert sorted(judge_step(facts[1:], 0).errors) == [1]


def test_a_precision_below_the_bench_and_the_rest_of_the_step_is_named():
    """A bfloat16 matmul in a float32 model (bench float32 or float64): its error is bfloat16 rounding, far
    above what the float32 entries before it carry; the loss moves: a precision divergence."""
    def step(lowered: str, bench: str) -> list[EntryFacts]:
        facts = [entry(0, "Functional.linear.0.forward", out=U, parent="Module.fc.Linear.forward.0"),
                 entry(1, "Torch.matmul.0.forward", inp=2e-3, out=2e-3, parent="Module.attn.Attention.forward.0",
                       target_dtype=lowered, lowered=f"{lowered} vs {bench}" if lowered != bench else "",
                       lowered_u=2.0 ** -8 if lowered != bench else 0.0, inputs=[(0, 2e-3), (1, 1e-9)]),
                 entry(2, "Functional.mse_loss.0.forward", inp=2e-3, out=1e-4)]
        for f in facts:
            f.target_dtype = f.target_dtype or "float32"
        facts[1].roundoff, facts[1].outputs = 2.0 ** -8, [(2, 2e-3)]  # rows: input.0, input.1, output.0
        return facts

    judged = judge_step(step("bfloat16", "float32"), 0)
    assert (judged.first.name, judged.first.kind) == ("Torch.matmul.0.forward", "precision")
    assert "bfloat16 vs float32" in judged.first.reason and "runs in float32" in judged.first.reason
    assert judged.first.rows == (0, 2)  # the input and output that carry the bfloat16 rounding
    # the same dtypes on both sides (both under autocast): bfloat16 rounding is the bench's too
    assert judge_step(step("bfloat16", "bfloat16"), 0).first is None
    # a target whose usual precision is bfloat16 (the whole model in bfloat16 against float32): nothing drops
    everywhere = step("bfloat16", "float32")
    for f in everywhere:
        f.target_dtype, f.lowered, f.lowered_u = "bfloat16", "bfloat16 vs float32", 2.0 ** -8
    assert judge_step(everywhere, 0).first is None


def test_differing_inputs_from_outside_the_dump():
    facts = [entry(0, "Functional.relu.0.forward", inp=1e-2, out=1e-2),
             entry(1, "Functional.mse_loss.0.forward", inp=1e-2, out=1e-2)]
    judged = judge_step(facts, 0)
    assert (judged.first.name, judged.first.kind) == ("Functional.relu.0.forward", "inputs")


def test_differing_inputs_of_the_loss_itself_are_consequential():
    """The data changed outside the dump and the loss is the first dumped call (a compiled model at L1)."""
    facts = [entry(0, "Tensor.__getitem__.0.forward", out=0.0),
             entry(1, "Functional.cross_entropy.0.forward", inp=1e-2, out=1e-3),
             entry(2, "Functional.cross_entropy.0.backward", out=1e-3)]
    judged = judge_step(facts, 1, baseline=0.0)
    assert judged.consequential and (judged.first.name, judged.first.kind) == ("Functional.cross_entropy.0.forward",
                                                                              "inputs")


def test_gradients_are_no_origin_but_show_a_change_nothing_dumped_made():
    """A compiled model at L0: only the parameter gradients are dumped; they differ at step 1."""
    clean = [entry(0, "Module.0.Linear.parameters_grad.0", out=U), entry(1, "Module.2.Linear.parameters_grad.0", out=U)]
    changed = [entry(0, "Module.0.Linear.parameters_grad.0", out=1e-2),
               entry(1, "Module.2.Linear.parameters_grad.0", out=1e-2)]
    steps = [StepFacts(0, 0, clean), StepFacts(1, 0, changed)]
    answer = judge_job(steps)
    assert (answer.step, answer.finding.name, answer.finding.kind) == (1, "Module.0.Linear.parameters_grad.0",
                                                                       "inputs")
    # after backward entries that carry the error, a gradient that differs is only a consequence
    carried = [entry(0, "Functional.linear.0.forward", out=1e-2), entry(1, "Functional.linear.0.backward", out=1e-2),
               entry(2, "Module.0.Linear.parameters_grad.0", out=1e-2)]
    assert judge_step(carried, 0).first.name == "Functional.linear.0.forward"


def test_rule_errors_stay_errors():
    shape = "Shape inconsistent ([3] vs [2, 2])."
    facts = [entry(0, "Torch.matmul.0.forward", out=U),
             entry(1, "Torch.reshape.0.forward", result=ERROR, message=shape),  # values agree: a rule's error
             entry(2, "Functional.gelu.0.forward", inp=U, out=1e-3)]
    judged = judge_step(facts, 0)
    assert (judged.first.name, judged.first.kind, judged.first.reason) == ("Torch.reshape.0.forward", "rules", shape)
    assert sorted(judged.errors) == [1, 2]
    # ... also after a divergence from outside that changes nothing (the noise judge drops what it carries)
    quiet = [entry(0, "Module.fc.Linear.forward.0", param=1e-3, out=1e-3),
             entry(1, "Torch.reshape.0.forward", result=ERROR, message=shape),
             entry(2, "Functional.mse_loss.0.forward", inp=1e-3, out=U)]
    assert judge_step(quiet, 1, baseline=U).errors.keys() == {1}


# -- a noise reference ------------------------------------------------------------------------------


def test_a_noise_reference_measures_each_entrys_noise():
    """bf16 noise: a backward that amplifies 19x is within the fixed factor; the benign pair shows that entry
    at a twentieth of that, so with the reference it stands out, and a noisy entry the pair shows as noisy
    does not."""
    u = 2.0 ** -8

    def step(gelu_out: float, norm_out: float) -> list[EntryFacts]:
        facts = [entry(0, "Functional.layer_norm.0.forward", inp=u, out=norm_out, parent="Module.ln.forward.0"),
                 entry(1, "Functional.gelu.0.backward", inp=5e-3, out=gelu_out, parent="Module.act.backward.0")]
        for f in facts:
            f.roundoff = u
        return facts

    benign = step(gelu_out=1e-2, norm_out=0.2)   # layer_norm amplifies 25x in the benign pair too
    reference = NoiseReference.of([(0, benign)])
    assert reference.out == {"Functional.layer_norm.0.forward": 0.2, "Functional.gelu.0.backward": 1e-2}
    buggy = step(gelu_out=0.171, norm_out=0.22)
    assert judge_step(buggy, 0).first is None                        # 19x: within the fixed factor
    judged = judge_step(buggy, 0, reference=reference)
    assert (judged.first.name, sorted(judged.errors)) == ("Functional.gelu.0.backward", [1])
    assert judge_step(benign, 0, reference=reference).first is None


def test_a_rule_error_the_reference_has_too_is_accepted():
    message = "Scalar values differ (tanh vs none)."
    facts = [entry(0, "Functional.gelu.0.forward", result=ERROR, message=message)]
    assert judge_step(facts, 0).first.kind == "rules"
    reference = NoiseReference.of([(0, facts)])
    judged = judge_step(facts, 0, reference=reference)
    assert judged.first is None and judged.accepted == {0}
    other = [entry(0, "Functional.gelu.0.forward", result=ERROR, message="Shape inconsistent ([3] vs [2]).")]
    assert judge_step(other, 0, reference=reference).first.kind == "rules"  # another difference stands


# -- steps chained -------------------------------------------------------------------------------------


def test_parameters_that_differ_at_step_1_point_at_the_update_of_step_0():
    steps = [StepFacts(0, 0, training_step()),
             StepFacts(1, 0, training_step(fc_param=1e-3, fc_out=1e-3, loss_out=1e-3))]
    answer = judge_job(steps)
    assert (answer.step, answer.rank) == (0, 0)
    assert (answer.finding.name, answer.finding.kind) == ("Module.fc.Linear.parameters_grad", "update")
    assert "next step reads different parameters of Module.fc.Linear" in answer.finding.reason
    assert "gradients here agree" in answer.finding.reason  # they do: the optimizer is to blame
    assert steps[0].judgement.errors.keys() == {4}
    assert steps[1].judgement.first.kind == "parameters"


def test_the_loss_baseline_grows_with_the_noise_of_the_clean_steps():
    """Two noisy runs drift apart as they go: the parameters differ a little more at every step, and the loss
    with them. A step is judged against the largest loss discrepancy of the clean steps before it."""
    steps = [StepFacts(0, 0, training_step(fc_out=20 * U, loss_out=20 * U)),
             StepFacts(1, 0, training_step(fc_param=100 * U, fc_out=100 * U, loss_out=100 * U)),  # < 8x step 0's
             StepFacts(2, 0, training_step(fc_param=200 * U, fc_out=200 * U, loss_out=200 * U))]  # > 8x step 0's
    assert judge_job(steps) is None
    assert [s.judgement.consequential for s in steps] == [False, False, False]
    louder = [*steps[:2], StepFacts(2, 0, training_step(fc_param=1e3 * U, fc_out=1e3 * U, loss_out=1e3 * U))]
    answer = judge_job(louder)  # 10x the noisiest clean step: the update of step 1 diverged
    assert (answer.step, answer.finding.kind) == (1, "update")


def test_the_update_names_the_last_parameter_gradient_in_any_order_of_the_facts():
    """Two micro-batches write parameters_grad.0 and .1; a graph lists its nodes in tree order, not in the order
    they were made: the update is the last one made either way."""
    step0 = training_step()
    step0.append(entry(5, "Module.fc.Linear.parameters_grad.1", out=U))
    step0[4] = entry(4, "Module.fc.Linear.parameters_grad.0", out=U)
    for facts in (step0, [*step0[:4], step0[5], step0[4]]):
        steps = [StepFacts(0, 0, facts), StepFacts(1, 0, training_step(fc_param=1e-3, fc_out=1e-3, loss_out=1e-3))]
        assert judge_job(steps).finding.name == "Module.fc.Linear.parameters_grad.1"


def test_a_call_the_parameters_divergence_never_reached_is_the_origin_of_the_loss_change():
    """AdamW moves a bias whose gradient is float32 noise by a full step (float64 bench); its call's output barely
    moves. Later in the step a LayerNorm is called with another eps: the loss moves through it, not the bias."""
    def step1(ln_in: float) -> list[EntryFacts]:
        return [entry(0, "Torch.addmm.0.forward", param=2e-5, out=3 * U),  # reads the bias: the divergence dies here
                entry(1, "Functional.gelu.0.forward", inp=3 * U, out=3 * U),
                entry(2, "Functional.layer_norm.0.forward", inp=ln_in, out=0.7, result=ERROR,
                      message="input.2: Scalar values differ (0.01 vs 1e-05)"),
                entry(3, "Functional.cross_entropy.0.forward", inp=0.7, out=3e-4)]
    answer = judge_job([StepFacts(0, 0, training_step()), StepFacts(1, 0, step1(ln_in=3 * U))])
    assert (answer.step, answer.finding.name) == (1, "Functional.layer_norm.0.forward")
    # where the parameters' divergence reaches the call, it may be what moved it: the update is named
    answer = judge_job([StepFacts(0, 0, training_step()), StepFacts(1, 0, step1(ln_in=2e-5))])
    assert (answer.step, answer.finding.kind) == (0, "update")


def test_parameters_differ_after_a_step_went_wrong_as_its_consequence():
    """Step 0's forward adds error; step 1 reads the diverged parameters: only step 0 is an origin."""
    steps = [StepFacts(0, 0, training_step(fc_out=1e-2, loss_out=1e-2)),
             StepFacts(1, 0, training_step(fc_param=1e-3, fc_out=1e-3, loss_out=1e-3))]
    answer = judge_job(steps)
    assert (answer.step, answer.finding.name, answer.finding.kind) == (0, "Module.fc.Linear.forward.0", "adds error")
    assert steps[1].judgement.first is None and steps[1].judgement.errors == {}


def test_an_outside_divergence_marks_only_the_rows_that_differ():
    facts = [entry(0, "Functional.embedding.0.forward", param=1e-2, out=1e-2, inputs=[(0, 0.0), (1, 1e-2), (2, 0.0)]),
             entry(1, "Functional.mse_loss.0.forward", inp=1e-2, out=1e-2)]
    judged = judge_step(facts, 1, baseline=U)
    assert (judged.first.kind, judged.first.rows) == ("parameters", (1,))


def test_parameters_that_differ_without_changing_the_loss_name_nothing():
    """AdamW's noise in a few parameters: the step's entries that amplify it are consequences."""
    amplified = training_step(fc_param=1e-3, fc_out=1e-3, loss_out=2 * U)
    amplified.insert(1, entry(1, "Torch.softmax.0.forward", inp=1e-3, out=1.0))  # adds error, but only noise
    for position, facts in enumerate(amplified):
        facts.index = position
    steps = [StepFacts(0, 0, training_step()), StepFacts(1, 0, amplified)]
    assert judge_job(steps) is None
    assert steps[1].judgement.errors == {} and not steps[1].judgement.consequential
    assert steps[0].judgement.first is None


def test_msprobe_rules_name_the_first_error_entry():
    facts = [entry(0, "Functional.gelu.0.forward", out=1e-3), entry(1, "Torch.add.0.forward", result=ERROR)]
    answer = judge_job([StepFacts(0, 0, facts)], rules="msprobe")
    assert (answer.finding.name, answer.finding.kind) == ("Torch.add.0.forward", "rules")


# -- ranks ordered ----------------------------------------------------------------------------------


def test_a_rank_that_diverges_before_the_all_reduce_is_the_cause():
    """Rank 1's matmul adds error; rank 0 first sees it come out of the all_reduce it shares with rank 1."""
    rank0 = [entry(0, "Torch.matmul.0.forward", out=U),
             entry(1, "Distributed.all_reduce.0.forward", inp=U, out=1e-2),  # received: clean in, not out
             entry(2, "Functional.mse_loss.0.forward", inp=1e-2, out=1e-2)]
    rank1 = [entry(0, "Torch.add.0.forward", out=U),
             entry(1, "Torch.add.1.forward", inp=U, out=U),
             entry(2, "Torch.matmul.0.forward", inp=U, out=1e-2),
             entry(3, "Distributed.all_reduce.0.forward", inp=1e-2, out=1e-2),
             entry(4, "Functional.mse_loss.0.forward", inp=1e-2, out=1e-2)]
    steps = [StepFacts(0, 0, rank0), StepFacts(0, 1, rank1)]
    answer = judge_job(steps)
    assert (answer.rank, answer.finding.name) == (1, "Torch.matmul.0.forward")
    assert answer.concurrent == []
    assert steps[0].judgement.first.name == "Distributed.all_reduce.0.forward"  # each rank keeps its own answer


def test_own_divergences_in_the_same_epoch_are_concurrent():
    rank0 = [entry(0, "Torch.matmul.0.forward", out=U), entry(1, "Functional.gelu.0.forward", inp=U, out=1e-2)]
    rank1 = [entry(0, "Functional.gelu.0.forward", out=1e-2), entry(1, "Torch.matmul.0.forward", inp=1e-2, out=1e-2)]
    answer = judge_job([StepFacts(0, 1, rank1), StepFacts(0, 0, rank0)])
    assert (answer.rank, answer.finding.name) == (0, "Functional.gelu.0.forward")
    assert answer.concurrent == [(1, "Functional.gelu.0.forward")]


def test_a_later_epoch_loses_to_an_earlier_one_whatever_the_rank():
    rank0 = [entry(0, "Distributed.all_reduce.0.forward", out=U), entry(1, "Functional.gelu.0.forward", inp=U,
                                                                          out=1e-2)]
    rank1 = [entry(0, "Functional.gelu.0.forward", out=1e-2), entry(1, "Distributed.all_reduce.0.forward",
                                                                        inp=1e-2, out=1e-2)]
    answer = judge_job([StepFacts(0, 0, rank0), StepFacts(0, 1, rank1)])
    assert (answer.rank, answer.finding.name) == (1, "Functional.gelu.0.forward")


def test_the_earliest_step_wins_across_ranks():
    clean = [entry(0, "Torch.matmul.0.forward", out=U)]
    late = [entry(0, "Torch.matmul.0.forward", out=1e-2)]
    answer = judge_job([StepFacts(0, 0, clean), StepFacts(1, 0, late), StepFacts(0, 1, clean), StepFacts(1, 1, late)])
    assert (answer.step, answer.rank) == (1, 0) and answer.concurrent == [(1, "Torch.matmul.0.forward")]


# -- the statistics mode's discrepancy --------------------------------------------------------------


def leaf(values: np.ndarray, dtype: str = "torch.float32") -> TensorMeta:
    v = values.astype(np.float64)
    return TensorMeta("X.output.0", "output", "torch.Tensor", dtype, tuple(values.shape), float(v.max()),
                      float(v.min()), float(v.mean()), float(np.linalg.norm(v)), False, None, None, None, True)


def test_stats_discrepancy_measures_relative_error_on_the_natural_scales():
    x = np.random.default_rng(0).standard_normal((64, 32))
    assert stats_discrepancy(leaf(x), leaf(x)) == 0.0
    for e in (1e-6, 1e-3, 1e-1):  # every element off by a relative e: about e, never more
        measured = stats_discrepancy(leaf(x * (1 + e)), leaf(x))
        assert e / 2 < measured <= e * (1 + 1e-9)
    # float32 rounding of float64 values: about one roundoff (the judge's noise)
    assert 0 < stats_discrepancy(leaf(x.astype(np.float32)), leaf(x, "torch.float64")) <= 2 * U
    # a shifted mean on a tensor with a near-zero mean: measured against the root mean square, not the mean
    assert stats_discrepancy(leaf(x + 1e-4), leaf(x)) == pytest.approx(1e-4 / math.sqrt(np.mean(x * x)), rel=1e-3)


def test_stats_discrepancy_of_nan_and_inf():
    x = np.random.default_rng(1).standard_normal(16)
    bad = x.copy()
    bad[3] = np.nan
    assert stats_discrepancy(leaf(bad), leaf(x)) == math.inf
    assert stats_discrepancy(leaf(bad), leaf(bad)) == 0.0  # the same NaN on both sides: nothing added
    inf = x.copy()
    inf[0] = np.inf
    assert stats_discrepancy(leaf(inf), leaf(x)) == math.inf
    unknown = TensorMeta("X.output.0", "output", "torch.Tensor", "torch.float32", (4,), None, None, None, None,
                         False, None, None, None, True)
    assert stats_discrepancy(unknown, leaf(x)) is None  # nothing to measure: the judge skips the leaf


def test_stats_discrepancy_of_integer_tensors_uses_max_and_min():
    def ids(high):  # token ids: msprobe and probe write Max/Min only for integer tensors
        return TensorMeta("X.input.0", "input", "torch.Tensor", "torch.int64", (4, 16), high, 0, None, None,
                          False, None, None, None, True)

    assert stats_discrepancy(ids(63), ids(63)) == 0.0
    assert stats_discrepancy(ids(60), ids(63)) == pytest.approx(3 / 63)


def test_entry_kind_is_the_last_direction_among_the_name_parts():
    """An entry's kind is the last of its name's parts that is a direction (``parameters_grad`` first): the
    quick look at the last two parts gives what the full split gives, on every name of up to five parts."""
    import itertools

    from probe_compare.judge import _kind

    def by_split(name: str) -> str:
        if ".parameters_grad" in name:
            return "parameters_grad"
        return next((part for part in reversed(name.split(".")) if part in ("forward", "backward")), "other")

    parts = ["forward", "backward", "0", "Linear", "", "parameters_grad", "x.forward"]
    for size in range(1, 6):
        for combo in itertools.product(parts, repeat=size):
            name = ".".join(combo)
            assert _kind(name) == by_split(name), name
    assert _kind("Module.fc.Linear.backward.3") == "backward" and _kind("Torch.add.2.forward") == "forward"


def test_a_dtype_derived_constant_is_the_same_at_each_sides_precision():
    """A causal mask filled with finfo(dtype).min: -3.4e38 in a float32 target, -1.8e308 in a float64 bench.
    Its Min (and the Mean and Norm the constant overflows) say nothing; the unmasked values decide."""
    scores = np.random.default_rng(2).standard_normal((8, 8))
    mask = np.triu(np.ones((8, 8), dtype=bool), 1)

    def masked(values, dtype, np_dtype):
        filled = np.where(mask, np.finfo(np_dtype).min, values.astype(np_dtype)).astype(np_dtype)
        with np.errstate(over="ignore"):
            mean, norm = float(filled.mean(dtype=np_dtype)), float(np.sqrt((filled * filled).sum(dtype=np_dtype)))
        return TensorMeta("X.output.0", "output", "torch.Tensor", dtype, (8, 8), float(filled.max()),
                          float(filled.min()), mean, norm, False, None, None, None, True)

    target, bench = masked(scores, "torch.float32", np.float32), masked(scores, "torch.float64", np.float64)
    assert target.min == -3.4028234663852886e38 and bench.min == -1.7976931348623157e308
    assert math.isinf(target.mean) and math.isinf(bench.mean) and math.isinf(target.norm)
    assert 0 < stats_discrepancy(target, bench) <= 2 * U  # the Max: one float32 rounding
    assert stats_discrepancy(masked(scores * 1.01, "torch.float32", np.float32), bench) > 1e-3  # a real change
    # one side overflowed where the other did not: a break, as before
    assert stats_discrepancy(masked(scores, "torch.float32", np.float32), leaf(scores, "torch.float64")) == math.inf


def test_the_columnar_discrepancy_is_the_row_discrepancy_on_saturated_statistics():
    from probe_modes.statistics import StatColumns, discrepancy_columns

    big = 3.4028234663852886e38
    rows = [((1.0, -big, -math.inf, math.inf), (1.0 + 1e-7, -big, -math.inf, math.inf)),   # a float32 mask
            ((2.0, -big, -big / 2, big), (2.5, -big, -big / 3, big)),                     # saturated, max off
            ((1.0, -1.0, 0.1, 3.0), (1.0, -1.0, 0.1, 3.0)),                                # equal
            ((1.0, -1.0, math.nan, 3.0), (1.0, -1.0, math.nan, 3.0)),                      # NaN on both sides
            ((math.inf, -1.0, 0.1, math.inf), (3.0, -1.0, 0.1, 5.0))]                      # one-sided Inf
    pairs = [(TensorMeta("X.output.0", "output", "torch.Tensor", "torch.float32", (4, 4), *a, False, None, None, None,
                         True),
              TensorMeta("X.output.0", "output", "torch.Tensor", "torch.float32", (4, 4), *b, False, None, None, None,
                         True)) for a, b in rows]
    by_row = [stats_discrepancy(npu, bench) for npu, bench in pairs]
    assert by_row[2] == by_row[3] == 0.0 and by_row[4] == math.inf and by_row[1] == pytest.approx(0.5 / 2.5)
    assert discrepancy_columns(*StatColumns.of(pairs)) == pytest.approx(by_row)


def test_inputs_far_beyond_noise_from_outside_matter_whatever_the_loss():
    """A buffer computed at initialisation (rotary frequencies) differs: the first call that reads it has inputs
    1% apart while nothing dumped before made any error. A random-init loss barely moves: still the answer."""
    facts = [entry(0, "Tensor.__mul__.0.forward", inp=1e-2, out=1e-2),
             entry(1, "Functional.cross_entropy.0.forward", inp=1e-2, out=2 * U),
             entry(2, "Functional.cross_entropy.0.backward", out=U)]
    judged = judge_step(facts, 0)
    assert judged.consequential and (judged.first.name, judged.first.kind) == ("Tensor.__mul__.0.forward", "inputs")
    # parameters that differ that much are AdamW's amplified noise until the loss says otherwise
    amplified = [entry(0, "Module.fc.Linear.forward.0", param=1e-2, out=1e-2),
                 entry(1, "Functional.cross_entropy.0.forward", inp=1e-2, out=2 * U)]
    assert judge_step(amplified, 1, baseline=U).first is None

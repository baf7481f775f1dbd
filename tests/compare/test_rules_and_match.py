"""The legend's rules (``rules="msprobe"``, judge_entry's default), the noise judge's view of one entry,
and entry matching, on hand-made rows and names."""

from __future__ import annotations

import math
import random
import struct

from probe_compare.mapping import NameMap, builtin_map, load_mapping
from probe_compare.match import _Keyer, match_entries
from probe_compare.judge import entry_facts, judge_step
from probe_compare.rules import ERROR, PASS, WARNING, RowResult, _row_rules, api_op, judge_entry
from probe_core.dump import EntryRef, TensorMeta
from probe_core.dump.names import parse_entry_name
from probe_modes.md5 import Md5Mode
from probe_modes.statistics import DIFF_COLUMNS, RELATIVE_COLUMNS, StatisticsMode, statistics_metrics
from probe_modes.tensor import TensorMode
from probe_mindspore.names import mindspore_to_pytorch, pytorch_to_mindspore

STATISTICS, MD5, TENSOR = StatisticsMode(), Md5Mode(), TensorMode()


def t(name, norm=1.0, mx=1.0, mn=-1.0, mean=0.0, dtype="torch.float32", shape=(2, 2), grad=False, md5="aa"):
    role = "input" if ".input." in name else "parameters" if ".parameters." in name else "output"
    raw = {"type": "torch.Tensor", "md5": md5}
    return TensorMeta(name, role, "torch.Tensor", dtype, shape, mx, mn, mean, norm, grad, raw, None, None, True)


def stat_row(a: TensorMeta, b: TensorMeta) -> RowResult:
    return RowResult(a, b, statistics_metrics(a, b))


def first_divergence(entry_name: str, rows: list[RowResult], mode) -> str | None:
    """The noise judge on a one-entry step: why ``entry_name`` is the step's first divergence, or None."""
    result = judge_entry(entry_name, rows, mode, rules="noise")
    first = judge_step([entry_facts(entry_name, 0, None, result, rows, mode, bench_name=entry_name)], 0).first
    return None if first is None else first.reason


def says(reason: str | None, *parts: str) -> bool:
    """``reason`` names each of ``parts``, in this order (the judge's wording around them may change)."""
    at = 0
    for part in parts:
        at = (reason or "").find(part, at)
        if at < 0:
            return False
    return True


def test_statistics_error_when_inputs_agree_and_output_norm_jumps():
    rows = [stat_row(t("X.0.forward.input.0"), t("X.0.forward.input.0")),
            stat_row(t("X.0.forward.output.0", norm=2.0), t("X.0.forward.output.0", norm=1.0))]
    assert judge_entry("Torch.matmul.0.forward", rows, STATISTICS) == ERROR
    assert rows[0].result == PASS and rows[1].result == ERROR
    assert "norm relative error 1 > 0.5" in rows[1].err_message
    assert says(first_divergence("X.0.forward", rows, STATISTICS), "output.0", "Norm 2.0 vs 1.0", "adds error")


def test_statistics_warning_when_output_error_is_ten_times_the_inputs():
    rows = [stat_row(t("X.input.0", norm=1.001), t("X.input.0", norm=1.0)),
            stat_row(t("X.output.0", norm=1.2), t("X.output.0", norm=1.0))]
    assert judge_entry("Torch.matmul.0.forward", rows, STATISTICS) == WARNING
    assert "over 10x" in rows[1].err_message
    # the output's error (0.2) is far above the input's (0.001) and float32's roundoff: the entry adds error
    assert says(first_divergence("X", rows, STATISTICS), "output.0", "Norm 1.2 vs 1.0", "adds error", "200 times")
    rows = [stat_row(t("X.input.0", norm=1.1), t("X.input.0", norm=1.0)),
            stat_row(t("X.output.0", norm=1.2), t("X.output.0", norm=1.0))]
    # the input carries the error in: the entry adds none; the step's change came from outside the dump
    assert says(first_divergence("X", rows, STATISTICS), "inputs already differ", "input.0", "Norm 1.1 vs 1.0")


def test_row_rules_dtype_shape_requires_grad_scalar_nan():
    rows = [RowResult(t("A.output.0", dtype="torch.int32"), t("A.output.0")),
            RowResult(t("A.output.1", shape=(3,)), t("A.output.1", shape=(2, 2))),
            RowResult(t("A.output.2", grad=True), t("A.output.2")),
            RowResult(t("A.output.3", mx=math.nan), t("A.output.3")),
            RowResult(t("A.output.4", mx=math.inf), t("A.output.4", mx=math.inf))]
    scalar_a = TensorMeta("A.input.0", "input", "int", "int", (), 1, 1, 1, 1, None, None, None, 1, False)
    scalar_b = TensorMeta("A.input.0", "input", "int", "int", (), 2, 2, 2, 2, None, None, None, 2, False)
    rows.append(RowResult(scalar_a, scalar_b))
    judge_entry("Torch.add.0.forward", rows, STATISTICS)
    assert [r.result for r in rows] == [ERROR, ERROR, ERROR, ERROR, PASS, ERROR]
    assert "Dtype inconsistent" in rows[0].err_message
    assert "Shape inconsistent" in rows[1].err_message
    assert "Requires_grad inconsistent" in rows[2].err_message
    assert "nan/inf" in rows[3].err_message
    assert "Scalar values differ" in rows[5].err_message


def test_float_dtypes_compare_with_each_other():
    """A float64 bench of a float32 (or bf16/fp16) run: the dtype difference is a note, not an error."""
    for target_dtype in ("torch.float16", "torch.bfloat16", "torch.float32"):
        row = RowResult(t("A.output.0", dtype=target_dtype), t("A.output.0", dtype="torch.float64"))
        assert judge_entry("Torch.add.0.forward", [row], STATISTICS) == PASS
        assert row.messages == [f"Dtype {target_dtype} vs torch.float64: compared at the coarser precision."]
    row = RowResult(t("A.output.0", dtype="torch.int64"), t("A.output.0", dtype="torch.float64"))
    assert judge_entry("Torch.add.0.forward", [row], STATISTICS) == ERROR


def test_md5_rules_and_mindspore_dtype_spelling():
    rows = [RowResult(t("A.input.0", dtype="Float32"), t("A.input.0", dtype="torch.float32")),
            RowResult(t("A.output.0", md5="aa"), t("A.output.0", md5="bb")),
            RowResult(t("A.parameters.weight"), None)]
    judge_entry("Module.a.Linear.forward.0", rows, MD5)
    assert [r.result for r in rows] == [PASS, ERROR, WARNING]
    assert "CRC-32 differs" in rows[1].err_message and "Parameters only on the target side" in rows[2].err_message
    assert says(first_divergence("A", rows[:2], MD5), "output.0", "CRC-32 aa vs bb", "adds error",
                "infinitely more than")


def test_tensor_rules_thousandth_and_cosine():
    inp = RowResult(t("A.input.0"), t("A.input.0"), {"One Thousandth Err Ratio": 1.0, "Cosine": 1.0})
    out = RowResult(t("A.output.0"), t("A.output.0"), {"One Thousandth Err Ratio": 0.2, "Cosine": 0.8})
    assert judge_entry("Torch.matmul.0.forward", [inp, out], TENSOR) == ERROR
    assert "One Thousandth" in out.err_message and "Cosine drops" in out.err_message


def test_exemptions_redundant_and_placeholder_apis():
    rows = [RowResult(t("A.output.0", md5="aa"), t("A.output.0", md5="bb"))]
    assert judge_entry("Tensor.to.0.forward", rows, MD5) == PASS
    rows = [stat_row(t("A.input.0"), t("A.input.0")),
            stat_row(t("A.output.0", norm=3.0), t("A.output.0", norm=1.0))]
    assert judge_entry("Distributed._all_gather_base.0.forward", rows, STATISTICS) == PASS


def test_noise_rules_leave_values_to_the_judge_but_keep_structural_rules():
    rows = [stat_row(t("X.0.forward.input.0"), t("X.0.forward.input.0")),
            stat_row(t("X.0.forward.output.0", norm=2.0), t("X.0.forward.output.0", norm=1.0))]
    assert judge_entry("Torch.matmul.0.forward", rows, STATISTICS, rules="noise") == PASS
    rows = [RowResult(t("A.output.0", shape=(3,)), t("A.output.0", shape=(2, 2)))]
    assert judge_entry("Torch.add.0.forward", rows, STATISTICS, rules="noise") == ERROR
    assert "Shape inconsistent" in rows[0].err_message


def refs(names):
    return [EntryRef(name, i, 0, 0) for i, name in enumerate(names)]


def pairs(matches):
    return [(m.target.name if m.target else None, m.bench.name if m.bench else None) for m in matches]


def test_a_sum_that_cancels_is_judged_against_the_magnitude_of_its_terms():
    """A conv's bias gradient before a BatchNorm is 0 in exact arithmetic: float32 leaves ~1e-9 of its terms'
    1e-3, float64 ~1e-17. Its relative difference is huge; against the terms it is summed from, it is roundoff."""
    grad_in = (t("Functional.conv2d.0.backward.input.0", norm=0.0115, mx=1.4e-3, mn=-1.0e-3, mean=1e-5),
               t("Functional.conv2d.0.backward.input.0", norm=0.0115, mx=1.4e-3, mn=-1.0e-3, mean=1e-5,
                 dtype="torch.float64"))
    bias = (t("Functional.conv2d.0.backward.output.2", norm=4.4e-9, mx=2.6e-9, mn=-2.5e-9, mean=1e-10, shape=(8,)),
            t("Functional.conv2d.0.backward.output.2", norm=1.9e-17, mx=1.3e-17, mn=-7.4e-18, mean=1e-18,
              shape=(8,), dtype="torch.float64"))
    assert first_divergence("Functional.conv2d.0.backward", [stat_row(*grad_in), stat_row(*bias)], STATISTICS) is None
    # the same difference in a result as large as its terms is an error
    large = (t("Functional.conv2d.0.backward.output.2", norm=4.4e-3, mx=2.6e-3, mn=-2.5e-3, mean=1e-4, shape=(8,)),
             t("Functional.conv2d.0.backward.output.2", norm=4.4e-3, mx=2.6e-3 + 2.6e-9 * 1e3, mn=-2.5e-3,
               mean=1e-4, shape=(8,), dtype="torch.float64"))
    assert says(first_divergence("Functional.conv2d.0.backward", [stat_row(*grad_in), stat_row(*large)], STATISTICS),
                "adds error")


def test_exact_match_renumbers_backward_after_recomputation():
    target = refs(["Torch.mul.0.forward", "Torch.mul.1.forward", "Torch.mul.1.backward"])
    bench = refs(["Torch.mul.0.forward", "Torch.mul.0.backward"])
    assert pairs(match_entries(target, bench)) == [
        ("Torch.mul.0.forward", "Torch.mul.0.forward"), ("Torch.mul.1.forward", None),
        ("Torch.mul.1.backward", "Torch.mul.0.backward")]


def test_fuzzy_ignores_call_counts_within_the_parent():
    target = refs(["Torch.add.5.forward", "Module.a.L.forward.0", "Torch.add.6.forward"])
    bench = refs(["Torch.add.0.forward", "Module.a.L.forward.0", "Torch.add.1.forward", "Torch.add.2.forward"])
    parents_t = {"Torch.add.5.forward": "Module.a.L.forward.0", "Torch.add.6.forward": "Module.a.L.forward.0"}
    parents_b = {"Torch.add.0.forward": None, "Torch.add.1.forward": "Module.a.L.forward.0",
                 "Torch.add.2.forward": "Module.a.L.forward.0"}
    assert pairs(match_entries(target, bench, target_parents=parents_t, bench_parents=parents_b, fuzzy=True)) == [
        ("Torch.add.5.forward", "Torch.add.1.forward"), ("Module.a.L.forward.0", "Module.a.L.forward.0"),
        ("Torch.add.6.forward", "Torch.add.2.forward"), (None, "Torch.add.0.forward")]
    assert pairs(match_entries(target, bench))[0] == ("Torch.add.5.forward", None)


def test_builtin_mindspore_to_pytorch_table():
    table = builtin_map("mindspore", "pytorch")  # probe-mindspore's, registered through probe_name_maps
    assert table == mindspore_to_pytorch() and len(table.api) > 100
    target = refs(["Mint.matmul.0.forward", "Cell.blocks.0.qkv.Dense.forward.0", "Functional.dense.0.forward"])
    bench = refs(["Torch.matmul.0.forward", "Module.blocks.0.qkv.Linear.forward.0", "Functional.linear.0.forward"])
    assert pairs(match_entries(target, bench, name_map=table)) == list(zip(
        [r.name for r in target], [r.name for r in bench]))
    back = builtin_map("pytorch", "mindspore")
    assert back == pytorch_to_mindspore() and back.api["Functional.linear"] == "Functional.dense"
    assert pairs(match_entries(bench, target, name_map=back)) == list(zip(
        [r.name for r in bench], [r.name for r in target]))


def test_layer_mapping_yaml(tmp_path):
    yaml_file = tmp_path / "map.yaml"
    yaml_file.write_text("Net:\n  vision_model: language_model.vision_encoder\n"
                         "MLP:\n  linear_fc1: dense_h_to_4h\napi:\n  Torch.bmm: Torch.matmul\n")
    name_map = load_mapping(yaml_file)
    target = refs(["Module.vision_model.mlp.MLP.forward.0", "Module.vision_model.mlp.linear_fc1.Linear.forward.0",
                   "Torch.bmm.0.forward"])
    bench = refs(["Module.language_model.vision_encoder.mlp.MLP.forward.0",
                  "Module.language_model.vision_encoder.mlp.dense_h_to_4h.Linear.forward.0", "Torch.matmul.0.forward"])
    assert [b for _, b in pairs(match_entries(target, bench, name_map=name_map))] == [r.name for r in bench]
    assert not NameMap().active


def test_a_differing_scalar_argument_makes_the_op_the_divergence():
    """Scalar arguments are not tensor inputs: the op given another constant adds the error."""
    scalar = lambda v: TensorMeta("M.input.1", "input", "float", "float", (), v, v, v, v, None, None, None, v, False)  # noqa: E731
    rows = [stat_row(t("M.input.0"), t("M.input.0")), RowResult(scalar(1.01), scalar(1.0)),
            stat_row(t("M.output.0", norm=1.01), t("M.output.0", norm=1.0))]
    reason = first_divergence("M", rows, STATISTICS)
    assert says(reason, "output.0", "Norm 1.01 vs 1.0", "adds error")
    assert rows[1].result == ERROR and "Scalar values differ (1.01 vs 1.0)" in rows[1].err_message


def test_api_match_keys_are_the_parsed_names():
    """The matcher and the rules read an API name's parts without parse_entry_name (their fast path): the same
    key, the same operation."""
    keyer = _Keyer((), {}, None, False, False)
    names = ["Functional.linear.0.forward", "Torch.x.12.backward", "x.1.forward", ".1.forward", "a..1.forward",
             "a.\u0661.forward", "Tensor.__add__.3.forward", "1.2.forward", "Distributed.all_reduce.0.forward",
             "a.b", "a.1.debug", "Module.layer.Linear.forward.0", "Module.a.b.parameters_grad.0", "a.x.forward",
             "a.1.forwards", "forward", "0.forward"]
    for name in names:
        parsed = parse_entry_name(name)
        assert keyer.base(name) == (parsed.kind, parsed.base, parsed.direction, parsed.count), name
        parts = parsed.base.split(".")  # the rules' operation name, read the same way
        assert api_op(name) == ((parts[1] if len(parts) > 1 else parts[0]) if parsed.kind == "api" else ""), name


def test_shown_rows_are_shown_metrics_row_by_row():
    """The graph shows a chunk's metrics formatted a column at a time (StatisticsMode.shown_rows): the same
    texts as shown_metrics gives each leaf, for any value in any column."""
    mode = StatisticsMode()
    names = DIFF_COLUMNS + RELATIVE_COLUMNS
    rnd = random.Random(5)
    odd = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-9, 3, None, "N/A", 1e300)
    for _ in range(100):
        rows = [tuple(rnd.choice(odd) if rnd.random() < 0.2 else rnd.uniform(-2, 2) * 10.0 ** rnd.randint(-12, 5)
                      for _ in names) for _ in range(rnd.randint(1, 12))]
        assert mode.shown_rows(names, rows) == [mode.shown_metrics(dict(zip(names, row))) for row in rows]


def test_shown_rows_formats_all_finite_columns_as_shown_metrics():
    """Columns of finite floats only take shown_rows' bulk path (one ``%`` for the relative errors): the same
    texts as shown_metrics for any double (random bit patterns: subnormals, ones that overflow times 100)."""
    mode = StatisticsMode()
    names = DIFF_COLUMNS + RELATIVE_COLUMNS
    rnd = random.Random(7)
    doubles = [struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0] for _ in range(20000)]
    doubles = [x for x in doubles if math.isfinite(x)] + [0.0, -0.0, 5e-324, 1.7976931348623157e308, 9.9999995e-7]
    rows = [tuple(doubles[(k + i * 7) % len(doubles)] for i in range(len(names))) for k in range(len(doubles))]
    assert mode.shown_rows(names, rows) == [mode.shown_metrics(dict(zip(names, row))) for row in rows]


def test_a_worst_row_within_the_modes_tolerance_says_how_far_apart_it_is():
    """The judge's worst input names its discrepancy when the mode's own test (``differs``) finds the sides
    within its tolerance: never 'agrees' for sides that differ."""
    name = "Functional.gelu.0.forward"
    rows = [stat_row(t(f"{name}.input.0", mx=1.0), t(f"{name}.input.0", mx=1.000003)),
            stat_row(t(f"{name}.output.0"), t(f"{name}.output.0"))]
    assert STATISTICS.differs(rows[0]) is None  # within the statistics mode's divergence tolerance
    facts = entry_facts(name, 0, None, PASS, rows, STATISTICS, bench_name=name)
    assert facts.worst_input.startswith("input.0: ") and "apart for its scale" in facts.worst_input
    assert "agrees" not in facts.worst_input


def test_dtype_derived_constants_and_dtype_arguments_are_each_sides_own():
    """A float64 bench against a float32 target: torch.finfo(dtype).min as a scalar argument, and a dtype
    argument naming each side's precision, are no error; any other difference of such arguments is."""
    def arg(value, kind="float"):
        return TensorMeta("M.input.1", "input", kind, kind, (), value, value, value, value, None, None, None, value,
                          False)

    same = [RowResult(arg(-3.4028234663852886e38), arg(-1.7976931348623157e308)),   # finfo.min
            RowResult(arg(1.1920928955078125e-07), arg(2.220446049250313e-16)),     # finfo.eps
            RowResult(arg("torch.float32", "torch.dtype"), arg("torch.float64", "torch.dtype"))]
    differ = [RowResult(arg(-3.4028234663852886e38), arg(1.7976931348623157e308)),  # min vs max
              RowResult(arg(1e-5), arg(1e-6)),
              RowResult(arg("torch.float32", "torch.dtype"), arg("torch.int64", "torch.dtype"))]
    for row in same + differ:
        _row_rules(row)
    assert [row.result for row in same] == [PASS] * 3, [row.messages for row in same]
    assert "each side's own precision" in same[2].err_message
    assert [row.result for row in differ] == [ERROR] * 3


def test_a_call_made_once_more_shifts_nothing_elsewhere_in_the_call_tree():
    """The target makes one Tensor.add more in layer 0: by name, every later add (layer 1's) meets the wrong
    call; by place in the call tree only layer 0's second add is left unmatched, and each backward meets the
    backward of the call its forward met, whatever parent the recorder gave it."""
    target = refs(["Tensor.add.0.forward", "Tensor.add.1.forward", "Module.l0.Block.forward.0",
                   "Tensor.add.2.forward", "Module.l1.Block.forward.0",
                   "Tensor.add.2.backward", "Tensor.add.0.backward", "Module.l0.Block.backward.0"])
    bench = refs(["Tensor.add.0.forward", "Module.l0.Block.forward.0", "Tensor.add.1.forward",
                  "Module.l1.Block.forward.0", "Tensor.add.1.backward", "Tensor.add.0.backward",
                  "Module.l0.Block.backward.0"])
    target_parents = {"Tensor.add.0.forward": "Module.l0.Block.forward.0",
                      "Tensor.add.1.forward": "Module.l0.Block.forward.0",
                      "Tensor.add.2.forward": "Module.l1.Block.forward.0",
                      "Tensor.add.0.backward": "Module.l0.Block.backward.0"}
    bench_parents = {"Tensor.add.0.forward": "Module.l0.Block.forward.0",
                     "Tensor.add.1.forward": "Module.l1.Block.forward.0"}  # no parent for the backward here
    by_tree = dict(pairs(match_entries(target, bench, target_parents=target_parents, bench_parents=bench_parents,
                                       fuzzy=True)))
    assert by_tree["Tensor.add.2.forward"] == "Tensor.add.1.forward"        # layer 1 meets layer 1
    assert by_tree["Tensor.add.2.backward"] == "Tensor.add.1.backward"
    assert by_tree["Tensor.add.0.backward"] == "Tensor.add.0.backward"
    assert by_tree["Tensor.add.1.forward"] is None                          # the extra call: target only
    assert by_tree["Module.l1.Block.forward.0"] == "Module.l1.Block.forward.0"
    by_name = dict(pairs(match_entries(target, bench, target_parents=target_parents, bench_parents=bench_parents)))
    assert by_name["Tensor.add.1.forward"] == "Tensor.add.1.forward"        # msprobe's: layer 0 meets layer 1


def _model_names(rng: random.Random, layers: int) -> tuple[list[str], dict[str, str]]:
    """A step's entry names as a recorder writes them (a module's forward after its calls, then backwards,
    parameter gradients), and construct.json's parents."""
    names, parents, counts = [], {}, {}

    def call(api: str, parent: str | None, direction: str = "forward") -> str:
        counts[(api, direction)] = counts.get((api, direction), -1) + 1
        name = f"{api}.{counts[(api, direction)]}.{direction}"
        names.append(name)
        if parent is not None:
            parents[name] = parent
        return name

    forwards = []
    for layer in range(layers):
        module = f"Module.l{layer}.Block.forward.0"
        for _ in range(rng.randint(1, 3)):
            forwards.append(call(rng.choice(["Tensor.add", "Functional.linear", "Torch.matmul"]), module))
        names.append(module)
    for layer in reversed(range(layers)):
        module = f"Module.l{layer}.Block.backward.0"
        for forward in [f for f in forwards if parents.get(f) == f"Module.l{layer}.Block.forward.0"][::-1]:
            api = forward.rsplit(".", 2)[0]
            call(api, module if rng.random() < 0.7 else None, "backward")
        names.append(module)
        names.append(f"Module.l{layer}.Block.parameters_grad")
    return names, parents


def test_pairing_by_place_is_the_keys_pairing_whatever_the_names():
    """The matcher pairs by place while the target's names come as the bench's (no key made); where they part
    (a call more or less, a renamed call, a name twice, on one side or both, other parents) it goes on by keys. Over seeded cases,
    by name and by the call tree, its pairs are those of the keys alone."""
    from probe_compare.match import Matcher

    def matched(target, bench, tp, bp, fuzzy, keys_only):
        matcher = Matcher(bench, bench_parents=bp, target_parents=tp, fuzzy=fuzzy)
        if keys_only:
            matcher._by_keys_from_here()
        found = [(name, None if (ref := matcher.match(name)) is None else ref.name) for name in target]
        return found, [ref.name for ref in matcher.unmatched_bench()]

    rng = random.Random(36)
    edits = ["same", "insert", "delete", "rename", "twice", "twice on both sides", "parents", "tail"]
    for case in range(300):
        bench_names, bench_parents = _model_names(rng, rng.randint(1, 4))
        target_names, target_parents = list(bench_names), dict(bench_parents)
        edit = edits[case % len(edits)]
        at = rng.randrange(len(target_names))
        if edit == "insert":
            target_names.insert(at, "Tensor.add.9.forward")
        elif edit == "delete":
            del target_names[at]
        elif edit == "rename":
            target_names[at] = target_names[at].replace("Tensor.add", "Tensor.sub")
        elif edit == "twice":
            target_names.insert(at, target_names[at])
        elif edit == "twice on both sides":  # a dump.json that holds a key twice
            target_names.insert(at, target_names[at])
            bench_names = list(target_names)
        elif edit == "parents" and target_parents:
            target_parents.pop(rng.choice(sorted(target_parents)))
        elif edit == "tail":
            target_names = target_names[:at]
        target, bench = refs(target_names), refs(bench_names)
        for fuzzy in (True, False):
            fast = matched(target_names, bench, target_parents, bench_parents, fuzzy, False)
            slow = matched(target_names, bench, target_parents, bench_parents, fuzzy, True)
            assert fast == slow, (case, edit, fuzzy)

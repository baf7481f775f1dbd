"""probe graph builds msprobe's tree on a dump msprobe made (a tiny CNN whose in-place ReLUs break the backward
parents in construct.json): the parents repaired as msprobe repairs them, by default; ``--rules msprobe`` also
leaves out the BatchNorm parameter gradients msprobe does not show, so the two trees are equal node for node,
children in order."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from probe_graph.tree import repair_inplace
from tests.graph.helpers import only_db, run_probe

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "msprobe_inplace_cnn"
DUMP = FIXTURE / "step0" / "proc22978"


def _tree(db) -> dict[str, list]:
    with sqlite3.connect(db) as connection:
        return {name: [parent, json.loads(children) if children else []]
                for name, parent, children in connection.execute("SELECT node_name, up_node, sub_nodes FROM tb_nodes")}


def test_construct_has_broken_parents_that_the_repair_fixes():
    construct = json.loads((DUMP / "construct.json").read_text())
    repaired = repair_inplace(construct)
    changed = {name for name in construct if construct[name] != repaired[name]}
    assert len(changed) == 9
    assert construct["Module.layer1.1.conv1.Conv2d.backward.0"] == "Module.layer1.1.relu.ReLU.backward.0"
    assert repaired["Module.layer1.1.conv1.Conv2d.backward.0"] == "Module.layer1.1.Block.backward.0"
    assert all(repaired[name] == construct[name] for name in construct if ".forward" in name)


def test_default_tree_is_msprobes_plus_the_batchnorm_parameter_gradients(tmp_path):
    theirs = json.loads((FIXTURE / "msprobe_tree.json").read_text())
    run_probe(DUMP, "-o", tmp_path)
    ours = _tree(only_db(tmp_path))
    extra = sorted(set(ours) - set(theirs))
    assert extra == [f"Module.{m}.BatchNorm2d.parameters_grad.0" for m in
                     ("bn1", "layer1.0.bn1", "layer1.0.bn2", "layer1.1.bn1", "layer1.1.bn2")]
    assert all(ours[name][0] == "DefaultModel" for name in extra)  # the weight gradients stay visible
    assert {name: parent for name, (parent, _) in ours.items() if name in theirs} == \
        {name: parent for name, (parent, _) in theirs.items()}


def test_msprobe_rules_give_msprobes_tree_node_for_node(tmp_path):
    run_probe(DUMP, "-o", tmp_path, "--rules", "msprobe")
    assert _tree(only_db(tmp_path)) == json.loads((FIXTURE / "msprobe_tree.json").read_text())

"""``@record`` (a dataclass made on first use) and what a command's start leaves out: a record behaves as the
dataclass it becomes, whatever touches it first; ``probe --version`` loads no plugin; a command's parser
answers as the parser with every command did."""

from __future__ import annotations

import dataclasses
import pickle
import re
import subprocess
import sys
import threading

import pytest

from probe_core.records import record


def _classes():
    """Fresh record classes: a base with a default and a factory, a frozen subclass, a mutable one."""

    @record
    class Base:
        name: str
        priority: int = 100
        tags: list = dataclasses.field(default_factory=list)

    @record
    class Child(Base):
        extra: str = ""

    @record(frozen=False)
    class Mutable:
        count: int = 0

    return Base, Child, Mutable


def _pending(cls) -> bool:
    return "__record_options__" in vars(cls)


def test_a_record_is_its_dataclass_from_its_first_instance():
    Base, Child, Mutable = _classes()
    assert _pending(Base) and _pending(Child)
    child = Child("a", extra="x")
    assert not _pending(Base) and not _pending(Child)  # the base is made first
    assert child == Child("a", 100, [], "x") and hash(Child("a", tags=())) == hash(Child("a", tags=()))
    assert repr(child) == "_classes.<locals>.Child(name='a', priority=100, tags=[], extra='x')"
    with pytest.raises(dataclasses.FrozenInstanceError):
        child.name = "b"
    assert dataclasses.replace(child, priority=1).priority == 1
    assert Child("b").tags is not Child("c").tags
    with pytest.raises(TypeError, match="name"):
        Base()
    mutable = Mutable()
    mutable.count += 1
    assert mutable == Mutable(1)


def test_fields_and_subclasses_before_any_instance():
    Base, Child, _ = _classes()
    assert dataclasses.is_dataclass(Base) and not _pending(Base)
    assert [f.name for f in dataclasses.fields(Child)] == ["name", "priority", "tags", "extra"]

    @dataclasses.dataclass(frozen=True)
    class Plain(Base):  # a dataclass of a pending record reads the record's fields
        more: int = 0

    _, Base2, _ = _classes()
    assert Plain("p").more == 0 and [f.name for f in dataclasses.fields(Plain)][-1] == "more"

    class NoDataclass(Base2):
        pass

    assert NoDataclass("n").name == "n"


def test_one_class_when_threads_race_to_make_it():
    Base, _, _ = _classes()
    made = []
    threads = [threading.Thread(target=lambda: made.append(Base("t"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 8 and all(item == Base("t") for item in made)


def test_unpickled_in_a_fresh_process():
    """The first use of a spec class there is unpickling one (what a worker process does)."""
    from probe_core.specs import Deferred

    code = ("import pickle, sys; from probe_core import specs; value = pickle.loads(sys.stdin.buffer.read()); "
            "print(repr(value), value == specs.Deferred('a.b:c'), hash(value) == hash(specs.Deferred('a.b:c')))")
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(Deferred("a.b:c")), capture_output=True,
                          check=True)
    assert done.stdout.decode().split() == ["Deferred(target='a.b:c')", "True", "True"]


def test_slots_are_refused():
    with pytest.raises(TypeError, match="slots"):
        record(slots=True)


def test_version_loads_no_plugin():
    code = ("import sys; from probe_core.cli import main; code = main(['--version']); "
            "print(code, sorted(m for m in ('pluggy', 'probe_core.plugins', 'probe_modes') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "0 []"


def test_a_command_parser_answers_as_the_whole_parser(run_probe, tmp_path):
    """Where argparse reads another word than the typed command (an option's value, -h first), every command
    is still there to name."""
    (tmp_path / "config.json").write_text("{}")
    done = run_probe("-c", "config.json", "compare", "a", "b", cwd=tmp_path)
    assert done.returncode == 2 and "invalid choice: 'config.json'" in done.stderr
    assert "'plugins'" in done.stderr and "'run'" in done.stderr
    done = run_probe("--debug", "-h", "compare")
    assert done.returncode == 0 and re.search(r"^ +plugins +list", done.stdout, re.M)
    done = run_probe("--debug", "compare", "-h")
    assert done.returncode == 0 and "--golden_path" in done.stdout

"""StackRegistry: one id per distinct chain of (function, line), whichever instruction of a line made the call."""

from __future__ import annotations

import sys

from probe_core.collect.stacks import StackRegistry


def _here(registry: StackRegistry) -> int:
    return registry.capture(2)


def test_calls_on_one_line_share_a_stack_and_other_lines_do_not():
    registry = StackRegistry()
    line = sys._getframe().f_lineno + 1
    first, second = _here(registry), _here(registry)  # two calls, two instructions, one line
    other = _here(registry)
    again = [_here(registry) for _ in range(3)]  # the same instruction each time
    assert first == second and other != first and again == [again[0]] * 3 and again[0] not in (first, other)
    top = registry.lines(first)[0]
    assert top.startswith(f"File {__file__}, line {line}, in test_calls_on_one_line_share_a_stack")
    assert top.endswith("first, second = _here(registry), _here(registry)  # two calls, two instructions, one line")


def test_a_function_defined_anew_is_its_own_stack():
    """Code objects made at run time (exec, lambdas) live on in the registry: a later one never takes a dead
    one's id and with it its stack."""
    registry = StackRegistry()
    ids, names = set(), set()
    for n in range(50):
        scope: dict = {"registry": registry}
        exec(compile(f"def f{n}():\n    return registry.capture(1)\n", f"<generated {n}>", "exec"), scope)
        ids.add(scope[f"f{n}"]())
        names.add(registry.lines(max(ids))[0].split(",")[0])
    assert len(ids) == 50 and len(names) == 50

"""Pass infrastructure (reference_lowering.passes._infra/_manager): each test pins a behaviour where
torch 2.13's torch.fx.passes.infra is wrong (docs/torch-facts.md, section 3), so each would
fail against torch's implementation, plus the drop-in behaviour that must stay the same."""

from __future__ import annotations

import copy
import logging

import pytest
import torch
from torch import fx
from torch.fx.passes.infra import pass_base as torch_pass_base

from reference_lowering import LoweringError
from reference_lowering.passes import (
    PassBase,
    PassManager,
    PassResult,
    pass_result_wrapper,
)
from reference_lowering.passes import (
    this_before_that_pass_constraint as before,
)
from reference_lowering.passes._infra import graph_fingerprint

from tests.graphs import build

aten = torch.ops.aten
MANAGER_LOGGER = "reference_lowering.passes._manager"


def _gm() -> fx.GraphModule:
    """x -> neg -> mul(., 2) -> output."""
    return build(1, lambda g, c, x: c(aten.mul.Tensor, c(aten.neg.default, x), 2))


def _recorder(log: list, name: str, modified: bool = False):
    """A PassResult-returning pass that appends its name to ``log`` when run."""

    def p(gm):
        log.append(name)
        return PassResult(gm, modified)

    p.__name__ = name
    return p


def _calls(gm: fx.GraphModule) -> list:
    return [n for n in gm.graph.nodes if n.op == "call_function"]


# --- PassResult / PassBase -------------------------------------------------------------------------


def test_pass_result_is_torchs_and_pass_base_subclasses_torchs():
    assert PassResult is torch_pass_base.PassResult
    assert issubclass(PassBase, torch_pass_base.PassBase)


def test_ensures_sees_the_module_call_returned():
    seen = []

    class Replace(PassBase):
        def call(self, gm):
            return PassResult(_gm(), True)

        def ensures(self, gm):
            seen.append(gm)

    original = _gm()
    res = Replace()(original)
    assert seen == [res.graph_module]
    assert seen[0] is not original  # torch hands ensures the input module


def test_pass_base_call_returning_non_result_is_type_error_naming_class():
    class Forgetful(PassBase):
        def call(self, gm):
            gm.graph.eliminate_dead_code()  # forgot to return

    with pytest.raises(TypeError, match=r"Forgetful\.call returned NoneType"):
        Forgetful()(_gm())


# --- pass_result_wrapper: honest `modified` --------------------------------------------------------


def test_wrapped_noop_pass_with_steps_runs_once():
    runs = []

    def noop(gm):
        runs.append(1)

    res = PassManager([pass_result_wrapper(noop)], steps=5)(_gm())
    assert len(runs) == 1  # torch's wrapper says modified=True: 5 runs
    assert res.modified is False


def test_wrapped_pass_that_changes_the_graph_reports_modified():
    def neg_to_abs(gm):
        _calls(gm)[0].target = aten.abs.default

    res = pass_result_wrapper(neg_to_abs)(_gm())
    assert res.modified is True
    assert res.graph_module(torch.tensor([-3.0])).item() == 6.0


def test_wrapped_pass_returning_new_identical_module_reports_unmodified():
    def rebuild(gm):
        graph = copy.deepcopy(gm.graph)
        for node in graph.nodes:  # names are not structure
            node.name = node.name + "_copy"
        return fx.GraphModule(gm, graph)

    gm = _gm()
    res = pass_result_wrapper(rebuild)(gm)
    assert res.graph_module is not gm
    assert res.modified is False


def test_wrapped_pass_returning_a_graph_becomes_a_module():
    def returns_new_graph(gm):
        graph = copy.deepcopy(gm.graph)
        _calls_in = [n for n in graph.nodes if n.op == "call_function"]
        _calls_in[0].target = aten.abs.default
        return graph

    gm = _gm()
    res = pass_result_wrapper(returns_new_graph)(gm)
    assert isinstance(res.graph_module, fx.GraphModule) and res.graph_module is not gm
    assert res.modified is True
    same = pass_result_wrapper(lambda m: m.graph)(gm)
    assert same.graph_module is gm and same.modified is False


@pytest.mark.parametrize(
    "old, new",
    [(2, 2.0), (2, True), (1, True), (0.0, -0.0), (2, (2,))],
    ids=["int-float", "int-bool", "one-true", "zero-negzero", "int-tuple"],
)
def test_literal_change_of_type_or_sign_is_a_modification(old, new):
    gm = _gm()
    _calls(gm)[1].args = (_calls(gm)[0], old)

    def change(m):
        mul = _calls(m)[1]
        mul.args = (mul.args[0], new)

    assert pass_result_wrapper(change)(gm).modified is True


def test_rewriting_the_same_literal_is_not_a_modification():
    def same(m):
        mul = _calls(m)[1]
        mul.args = (mul.args[0], 2)

    assert pass_result_wrapper(same)(_gm()).modified is False


def test_in_place_update_of_a_constant_is_a_modification():
    root = torch.nn.Module()
    root.register_buffer("c", torch.ones(2))
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(aten.add.Tensor, (x, g.get_attr("c"))))
    gm = fx.GraphModule(root, g)

    def fold_into_constant(m):
        m.c.mul_(3)

    assert pass_result_wrapper(fold_into_constant)(gm).modified is True
    assert graph_fingerprint(gm) == graph_fingerprint(gm)


def test_wrapper_rejects_other_returns_and_keeps_name():
    def returns_int(gm):
        return 3

    wrapped = pass_result_wrapper(returns_int)
    assert wrapped.__name__ == "returns_int"
    with pytest.raises(TypeError, match=r"'returns_int' returned int"):
        wrapped(_gm())


# --- constraints and schedule ----------------------------------------------------------------------


def test_duplicate_pass_with_constraint_is_sorted_not_a_false_cycle():
    log = []
    a, b = _recorder(log, "A"), _recorder(log, "B")
    pm = PassManager([a, b, a], [before(a, b)])
    pm(_gm())
    assert log == ["A", "A", "B"]  # torch: "Circular dependency detected"


def test_sort_is_stable_and_reordering_is_logged(caplog):
    log = []
    a, b, c, d = (_recorder(log, n) for n in "ABCD")
    with caplog.at_level(logging.INFO, logger=MANAGER_LOGGER):
        PassManager([d, a, b, c], [before(a, b), before(b, c)])(_gm())
    assert log == ["D", "A", "B", "C"]
    assert not [r for r in caplog.records if "reordered" in r.message]  # already valid: untouched
    log.clear()
    with caplog.at_level(logging.INFO, logger=MANAGER_LOGGER):
        PassManager([d, c, b, a], [before(a, b), before(b, c)])(_gm())
    assert log == ["D", "A", "B", "C"]
    assert any("['D', 'C', 'B', 'A'] -> ['D', 'A', 'B', 'C']" in r.message for r in caplog.records)


@pytest.mark.parametrize("steps", [1, 5])
def test_cycle_error_names_only_the_passes_on_the_cycle(steps):
    log = []
    x, a, b, c, d = (_recorder(log, n) for n in "XABCD")
    pm = PassManager([x, a, b, c, d], [before(a, b), before(b, c), before(c, a), before(a, d)], steps=steps)
    with pytest.raises(LoweringError) as info:
        pm(_gm())
    message = str(info.value)
    assert "A must run before B, B must run before C, C must run before A" in message
    assert "list positions 1, 2, 3" in message
    assert "X" not in message.split(";")[0] and "D" not in message.split(";")[0]
    assert log == []


def test_validate_constraints_message_has_right_direction_and_absolute_indices():
    log = []
    a, b, c = (_recorder(log, n) for n in "ABC")
    pm = PassManager([b, c, a], [before(a, b)])
    with pytest.raises(LoweringError) as info:
        pm.validate_constraints()
    assert "this_before_that(A, B) expects A before B, but B is at index 0 and A at index 2" in str(info.value)


def test_direct_mutation_of_passes_is_resolved_on_next_call():
    log = []
    a, b = _recorder(log, "A"), _recorder(log, "B")
    pm = PassManager([a, b], [before(a, b)])
    pm(_gm())
    pm.passes.insert(0, b)  # not add_pass: torch would run B, A, B
    log.clear()
    pm(_gm())
    assert log == ["A", "B", "B"]
    pm.constraints.append(before(b, a))
    with pytest.raises(LoweringError, match="circular pass constraints"):
        pm(_gm())


def test_constraints_are_validated_on_every_call():
    log = []
    a, b = _recorder(log, "A"), _recorder(log, "B")
    forbid = {"on": False}

    def a_after_b_when_on(p, q):  # a stateful constraint: only validation on each call sees the flip
        return not (forbid["on"] and p is a and q is b)

    pm = PassManager([a, b], [a_after_b_when_on])
    pm(_gm())
    forbid["on"] = True
    with pytest.raises(LoweringError, match="a_after_b_when_on expects B before A"):
        pm(_gm())


def test_callers_lists_are_not_mutated():
    log = []
    a, b = _recorder(log, "A"), _recorder(log, "B")
    passes, constraints = [b, a], [before(a, b)]
    pm = PassManager(passes, constraints)
    pm.add_pass(a)
    pm.add_constraint(lambda p, q: True)
    pm(_gm())  # solving reorders pm.passes; the caller's list keeps its order
    assert passes == [b, a] and len(constraints) == 1
    assert [p.__name__ for p in pm.passes] == ["A", "A", "B"]


@pytest.mark.parametrize("steps", [0, -1, 1.5, True, "2"])
def test_steps_must_be_positive_int(steps):
    with pytest.raises(ValueError, match=r"steps=.*should be an int >= 1"):
        PassManager([], steps=steps)


def test_steps_none_means_one_and_fixpoint_stops_early():
    assert PassManager([], steps=None).steps == 1
    runs = []

    def changes_twice(gm):
        runs.append(1)
        return PassResult(gm, len(runs) <= 2)

    res = PassManager([changes_twice], steps=10)(_gm())
    assert len(runs) == 3 and res.modified is True


# --- checks, lint, errors --------------------------------------------------------------------------


def _failing_check(module):
    raise AssertionError("invariant broken")


def test_suppressed_check_failure_is_logged_naming_the_pass_and_run_continues(caplog):
    log = []
    a, b = _recorder(log, "A"), _recorder(log, "B")
    pm = PassManager([a, b], run_checks_after_each_pass=True, suppress_check_failures=True)
    pm.add_checks(_failing_check)
    with caplog.at_level(logging.WARNING, logger=MANAGER_LOGGER):
        res = pm(_gm())
    assert log == ["A", "B"] and isinstance(res, PassResult)
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert any("after pass 'A'" in w and "invariant broken" in w for w in warnings)
    assert any("after pass 'B'" in w for w in warnings)


def test_unsuppressed_check_failure_names_the_pass():
    log = []
    a = _recorder(log, "A")
    calls = []

    def fails_after_first_run(module):
        if len(calls) > 1:
            raise AssertionError("bad")

    pm = PassManager([a], run_checks_after_each_pass=True)
    pm.add_checks(lambda m: calls.append(1))
    pm.add_checks(fails_after_first_run)
    with pytest.raises(LoweringError, match=r"failed after pass 'A' \(index 0"):
        pm(_gm())
    assert calls == [1, 1]  # checks accumulate (torch keeps only the last) and run before and after


def test_lint_after_each_pass_catches_use_before_def():
    def move_first_call_after_output(gm):
        node = _calls(gm)[0]
        output = next(n for n in gm.graph.nodes if n.op == "output")
        output.append(node)
        return PassResult(gm, True)

    PassManager([move_first_call_after_output])(_gm())  # no checks asked: runs, as torch does
    pm = PassManager([move_first_call_after_output], run_checks_after_each_pass=True)
    with pytest.raises(LoweringError, match=r"graph\.lint\(\) failed after pass 'move_first_call_after_output'"):
        pm(_gm())


def test_pass_error_is_chained_and_names_the_passes_before():
    log = []
    a, b = _recorder(log, "A"), _recorder(log, "B")

    def boom(gm):
        raise KeyError("missing")

    with pytest.raises(LoweringError) as info:
        PassManager([a, b, boom])(_gm())
    assert str(info.value).startswith("pass 'boom' (index 2 of the schedule, step 1) failed after passes ['A', 'B']")
    assert isinstance(info.value.__cause__, KeyError)


def test_unwrapped_pass_result_tells_user_to_wrap():
    def plain(gm):
        return gm

    with pytest.raises(LoweringError, match=r"pass_result_wrapper\(plain\)") as info:
        PassManager([plain])(_gm())
    assert isinstance(info.value.__cause__, TypeError)


def test_add_checks_requires_one_parameter():
    with pytest.raises(TypeError, match="only take in one variable"):
        PassManager().add_checks(lambda m, extra: None)


def test_pass_base_instance_named_by_class_in_errors():
    class Explodes(PassBase):
        def call(self, gm):
            raise RuntimeError("no")

    with pytest.raises(LoweringError, match=r"pass 'Explodes'"):
        PassManager([Explodes()])(_gm())


def test_torch_pass_manager_accepts_our_wrapped_pass():
    from torch.fx.passes.infra.pass_manager import PassManager as TorchPassManager

    res = TorchPassManager([pass_result_wrapper(lambda gm: None)], steps=3)(_gm())
    assert isinstance(res, PassResult) and res.modified is False

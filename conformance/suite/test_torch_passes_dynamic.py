"""Torch's own passes on graphs over symbolic sizes (``verify(dynamic=True)``, issue 17).

- ``DYNAMIC_ROWS``: the rows of ``test_torch_passes.PASSES`` that fire on drawn symbolic graphs
  (functional "aten" graphs, as ``make_fx(tracing_mode="symbolic")`` gives them), verified with
  the ``dynamic`` property besides the others; the pass's static findings and the dynamic ones
  below are accepted (``verify(known=)``), anything else fails, and so does a pass that changed no
  graph. ``scripts/dynamic_torch_passes.py`` prints the whole table (docs/design.md).
- ``DYNAMIC_FINDINGS``: what only symbolic graphs show, minimised to a program that
  ``make_fx(tracing_mode="symbolic")`` traces; ``test_dynamic_finding_shows`` proves the checker
  catches it and ``test_dynamic_finding_fixed`` is a strict xfail naming the torch version.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch
from hypothesis import settings
from torch.fx.experimental.proxy_tensor import make_fx

from strategies import graph_symbolic_shapes

from ._tiers import spread
from .test_torch_passes import _test, check_row, finding_params, known_for, verify_row

pytestmark = pytest.mark.conformance

# The rows that change drawn symbolic graphs (30 graphs, seed 0: each changed 2-25 of them).
DYNAMIC_ROWS = ("post_grad.remove_noop_ops", "post_grad.reorder_for_locality", "post_grad.post_grad_passes",
                "joint_graph.joint_graph_passes", "export.ReplaceViewOpsWithViewCopyOpsPass", "fx.CSEPass",
                "fx.legalize_graph")


@dataclass(frozen=True)
class DynamicFinding:
    """A way a torch pass is wrong on symbolic graphs: ``program`` over ``inputs()``, traced
    symbolically, shows a ``property`` violation matching ``message`` after each of ``passes`` (a
    pass and the pipelines that run it)."""

    passes: tuple
    property: str
    message: str  # a regular expression
    program: Callable
    inputs: Callable
    behaviour: str
    # where the message alone is any bug's, a test of the violation: the structure the finding is about
    shape: Callable | None = None

    def matches(self, violation, example=None) -> bool:
        """As ``Finding.matches``: ``example`` is what the violation was met on, for a ``shape`` that
        takes it."""
        return (violation.property == self.property and re.search(self.message, violation.message) is not None
                and (self.shape is None or _test(self.shape, violation, example)))

    def graph(self):
        return _traced(self.program, self.inputs())


def _guard_values(message: str):
    """The two sides of the ``Ne``/``Eq`` guard a dynamic violation names, at its example's sizes."""
    guard = re.search(r"guard (?:Ne|Eq)\((.*)\) recorded by the pass", message)
    example = re.search(r"\(the example: ([^)]*)\)", message)
    if guard is None or example is None:
        return None
    sizes = {name: int(value) for name, value in re.findall(r"(s\d+)=(-?\d+)", example.group(1))}
    depth, text = 0, guard.group(1)
    for i, c in enumerate(text):  # the comma between the two sides, outside any parentheses
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            try:
                return tuple(eval(side, {"__builtins__": {}, "Max": max, "Min": min}, dict(sizes))  # noqa: S307
                             for side in (text[:i], text[i + 1:]))
            except Exception:  # noqa: BLE001 - a function the evaluation does not know: not this finding's guard
                return None
    return None


def _view_pair_sizes(graph: str, inputs: str) -> set:
    """``(base size, size)`` pairs that Inductor's pointless-view-pair pattern compares with ``==`` in
    ``graph`` run on ``inputs`` (zeros of the described shapes and strides): for each
    ``view(view(base, size1), size2)`` whose ``size2`` has ``base``'s rank, ``base``'s sizes against
    ``size2``'s at the same positions."""
    tensors = []
    for dtype, shape, stride in re.findall(r"input\[\d+\]: (\w+)\[([\d, ]*)\](?: stride=\(([\d, ]*)\))?", inputs):
        size = [int(d) for d in shape.split(",") if d.strip()]
        strides = [int(d) for d in stride.split(",") if d.strip()] if stride else torch.empty(size).stride()
        tensors.append(torch.empty_strided(size, strides, dtype=getattr(torch, dtype)).zero_())
    bases, pairs = {}, set()

    def view(t, size):
        out = torch.ops.aten.view.default(t, size)
        if id(t) in bases and len(size) == bases[id(t)].dim():
            pairs.update(zip(bases[id(t)].shape, size))
        bases[id(out)] = t  # kept alive, so no other tensor takes its id
        return out

    # the names gm.code reads besides torch (a factory's device, a special value)
    scope = {"torch": torch, "device": torch.device, "inf": math.inf, "nan": math.nan, "_view": view}
    try:
        exec(graph.replace("torch.ops.aten.view.default(", "_view("), scope)  # noqa: S102 - the graph's own code
        with torch.no_grad():
            scope["forward"](None, *tensors)
    except Exception:  # noqa: BLE001 - a graph this replay cannot run: not this finding's structure
        return set()
    return {(int(a), int(b)) for a, b in pairs}


def _compares_a_view_pairs_sizes(violation) -> bool:
    """The guard's two sides, at the example's sizes, are a base size and a size of a view pair of the
    graph before, at one position: the comparison ``pointless_view_pair`` makes."""
    sides = _guard_values(violation.message)
    if sides is None:
        return False
    pairs = _view_pair_sizes(violation.graph_before or "", violation.inputs or "")
    return sides in pairs or sides[::-1] in pairs


def _a_size_used_before_it_is_defined(violation) -> bool:
    """The argument the fold's ``full`` uses before it is defined is a symbolic size of the graph: a
    ``sym_size``/``sym_numel``/``sym_stride`` node, or arithmetic on sizes (``mul_1 = sym_size_int * 2``)."""
    used = re.search(r"Argument '(\w+)' of Node 'full_default\w*'", violation.message)
    if used is None:
        return False
    size = rf"^\s*{used.group(1)} = (torch\.ops\.aten\.sym_(size|numel|stride)\.\w+\(|\w+ (\*|\+|-|//|%) \w+\b)"
    return any(re.search(size, g or "", re.M) for g in (violation.graph_before, violation.graph_after))


DYNAMIC_FINDINGS = {
    "reinplace-crashes-on-sym-size": DynamicFinding(
        ("fx.reinplace",), "execution", r"AttributeError: 'int' object has no attribute 'numel'",
        lambda x: (x.reshape(x.size(0) * x.size(1)) * 2,), lambda: (torch.randn(3, 4),),
        "reinplace takes every OpOverload whose first argument is a Tensor for a candidate, aten.sym_size.int "
        "included, and calls .numel() on its result (an int): it raises on every graph with a sym_size node"),
    "uniform-fold-uses-a-size-before-it-is-defined": DynamicFinding(
        ("joint_graph.constant_fold_uniform_value", "joint_graph.joint_graph_passes"), "validity",
        r"Argument '\w+' of Node 'full_default\w*' was used before it has been defined",
        lambda x: (x * 0, x.size(1)), lambda: (torch.randn(1, 2),),
        "x * 0 becomes full([1, s0], 0.0) inserted where the mul was, but its size argument is a sym_size "
        "node defined later in the graph: the result does not lint (joint_graph_passes runs the fold: met "
        "there by make conformance, seed 3158014394); a size computed later (mul_1 = s0 * 2, for "
        "cat([x, x]) * 0) is taken the same way",
        shape=_a_size_used_before_it_is_defined),
    "joint-graph-guards-on-a-view-of-a-view": DynamicFinding(
        ("joint_graph.joint_graph_passes",), "dynamic", r"guard (Ne|Eq)\(.*\) recorded by the pass",
        lambda x: (x.reshape(x.size(0) * x.size(1)).reshape(x.numel() // 2, 2),), lambda: (torch.randn(3, 6),),
        "on view(view(x[s0, s1], [s0*s1]), [s0*s1//2, 2]) the pass compares the sizes with == while looking for "
        "a pointless view pair (definitely_equal's guard_or_false records a guard on backed sizes), so it records "
        "the guard Ne(s0, s0*s1//2) (false at s0=s1=2) and changes nothing: the compiled graph is specialised "
        "away from sizes the original holds at (met as Ne(2*s0, s0*s1) on view(view(cat([x, x]), [-1]), "
        "[s0*s1, 2]) by make conformance, seed 124723663)",
        shape=_compares_a_view_pairs_sizes),
    "post-grad-guards-on-a-slice-scatters-end": DynamicFinding(
        ("post_grad.post_grad_passes",), "dynamic", r"guard .* recorded by the pass",
        lambda x, y: (torch.ops.aten.slice_scatter.default(x, y[:x.size(0)], 0, 0, y.size(0)),),
        lambda: (torch.randn(5), torch.randn(7)),
        "slice_scatter(x[s0], src, 0, 0, s1) (an end past the dim, s0 <= s1) leaves post_grad_passes with the "
        "guard s1 > s0 recorded and the graph unchanged: the compiled graph is specialised away from s0 == s1, "
        "where the original holds (remove_noop_ops alone records nothing; found by hand: drawn symbolic "
        "graphs hold no slice_scatter)",
        shape=lambda v: re.search(r"aten\.slice_scatter\.default\(\w+, \w+, -?\d+, \w+, [a-z_]\w*\)",
                                  v.graph_before or "") is not None),
    "uniform-fold-drops-a-slices-clamp": DynamicFinding(
        ("joint_graph.constant_fold_uniform_value", "joint_graph.joint_graph_passes"), "dynamic",
        r"at s\d+=0\b.*running the result raised RuntimeError: Trying to create tensor with negative dimension -1",
        lambda x: (torch.ops.aten.mul.Tensor(torch.ops.aten.slice.Tensor(x, 2, 0, x.size(2) - 1), 0), x.size(2)),
        lambda: (torch.randn(3, 1, 3),),
        "slice(x[s0, 1, s0], 2, 0, s0 - 1) * 0 becomes full([s0, 1, s0 - 1], 0.0): the slice's symbolic size "
        "without the clamp the slice applies, so at s0 = 0 (a size the original holds at: the slice is empty) "
        "the result asks for a tensor of size -1 and raises (found by make conformance through "
        "joint_graph_passes, seed 823726206)"),
}


def _known(name: str):
    static = known_for(name)
    dynamic = [f for f in DYNAMIC_FINDINGS.values() if name in f.passes]
    return lambda v, example=None: (static is not None and static(v, example)) or any(
        f.matches(v, example) for f in dynamic)


def _budget():
    profile = settings.default  # a third of the profile's graphs (8 under ci): each runs at four more sizes
    return max(8, profile.max_examples // 3), (0 if profile.derandomize else None)


RETRIES = 3  # further seeds a vacuous row is tried at


def verify_firing(name: str, max_examples: int, seed: int | None, verify=None):
    """``name`` verified on drawn symbolic graphs; where it changed none, four times the graphs again at
    the next seed, up to ``RETRIES`` times. Returns the results, the last one deciding.

    A pass that fires on one graph in eight changes none of 16 one seed in nine (joint_graph_passes did,
    at a random seed of make conformance). And a seed's graphs are not independent draws: Hypothesis
    mutates earlier examples, so one seed's op mix can lack what a pass matches (remove_noop_ops changed
    0 of 64 graphs at seed 333073829, where seeds 1 and 2 give 26 and 23 of 64, and 333073830 gives 6;
    and 0 of 16, then 0 of 64, at seeds 744552727 and 744552728 in make conformance, where seeds 1-4
    give 1-6 of 16): the same seed again would draw the same lack, and one retry was not always enough.
    """
    verify = verify or verify_row
    options = dict(dynamic=True, ir="aten", graphs="functional", seed_graphs=None, focus="none", known=_known(name))
    results = [verify(name, max_examples, seed, **options)]
    while results[-1].ok and results[-1].changed == 0 and len(results) <= RETRIES:
        results.append(verify(name, 4 * max_examples, results[-1].seed + 1, **options))
    return results


# make test verifies three of the seven rows, evenly spread (``_tiers``: remove_noop_ops, post_grad_passes
# and ReplaceViewOpsWithViewCopyOpsPass; a row took 1.5-2.5 s of a 16 s file on the 2-core AMD EPYC);
# make sweep and make conformance all seven: each row is the same property, of another pass.
@pytest.mark.parametrize("name", spread(DYNAMIC_ROWS, 3))
def test_torch_pass_keeps_symbolic_graphs_symbolic(name):
    """``name`` on drawn symbolic graphs: no violation but known findings, the dynamic property
    included, and it fires."""
    results = verify_firing(name, *_budget())
    result, seeds = results[-1], ", ".join(str(r.seed) for r in results)
    assert result.ok, f"{name} (seed {result.seed}): a violation no finding names:\n" + "\n\n".join(
        f"{v.property}: {v.message}\n{v.graph_before}\n{v.graph_after}" for v in result.violations)
    assert result.changed > 0, f"{name}: {result.vacuous_text} (seeds {seeds})"
    assert result.dynamic["sizes_run"] >= result.examples


def test_a_vacuous_first_seed_is_retried_at_another_seed():
    """The retry draws other graphs: four times the budget at the next seed, not the same seed again,
    and the seed after where that was vacuous too; a pass that fired is not run again."""

    def verify_counting(changes):
        calls = []

        def fake(name, max_examples, seed, **options):
            calls.append((max_examples, seed))
            return SimpleNamespace(ok=True, changed=changes[len(calls) - 1], seed=41 if seed is None else seed)
        return fake, calls

    fake, calls = verify_counting([0, 5])
    assert [r.changed for r in verify_firing("fx.CSEPass", 8, None, verify=fake)] == [0, 5]
    assert calls == [(8, None), (32, 42)]
    fake, calls = verify_counting([0, 0, 3])  # a second vacuous seed: the next one
    assert [r.changed for r in verify_firing("fx.CSEPass", 8, 7, verify=fake)] == [0, 0, 3]
    assert calls == [(8, 7), (32, 8), (32, 9)]
    fake, calls = verify_counting([0] * 10)  # RETRIES at most: the last result says it never fired
    assert len(verify_firing("fx.CSEPass", 8, 7, verify=fake)) == 1 + RETRIES
    fake, calls = verify_counting([3])
    assert [r.changed for r in verify_firing("fx.CSEPass", 8, 7, verify=fake)] == [3]
    assert calls == [(8, 7)]


def _check(name: str, pass_name: str, program=None, inputs=None):
    finding = DYNAMIC_FINDINGS[name]
    gm, inputs, shapes = finding.graph() if program is None else _traced(program, inputs)
    return finding, check_row(pass_name, gm, inputs, symbolic=shapes)


def _traced(program, inputs):
    gm = make_fx(program, tracing_mode="symbolic")(*inputs)
    return gm, inputs, graph_symbolic_shapes(gm)


@pytest.mark.parametrize("name, pass_name", list(finding_params(DYNAMIC_FINDINGS, strict_xfail=False)))
def test_dynamic_finding_shows(name, pass_name):
    """The finding's program, traced symbolically, still shows the violation its row names."""
    finding, verdict = _check(name, pass_name)
    assert any(finding.matches(v) for v in verdict.violations), \
        f"{pass_name}: expected {finding.property} /{finding.message}/, got {verdict}"


@pytest.mark.parametrize("name, pass_name", list(finding_params(DYNAMIC_FINDINGS, strict_xfail=True)))
def test_dynamic_finding_fixed(name, pass_name):
    """Fails while torch has the bug (a strict xfail): the day it passes, remove the finding's row."""
    _, verdict = _check(name, pass_name)
    assert verdict.ok, "\n".join(f"{v.property}: {v.message}" for v in verdict.violations)


def _view_pair_of_a_cat(x):
    # and a factory, whose code names the device: the graph is replayed as gm.code reads
    return ((torch.cat([x, x]) * 2).reshape(-1).reshape(x.size(0) * x.size(1), 2), torch.full((x.size(0),), 2.0))


def test_a_guard_on_a_view_pair_is_matched_by_the_sizes_it_compares():
    """make conformance (seed 124723663) met the view-pair guard as Ne(2*s0, s0*s1): the finding
    matches any guard whose sides, at the example's sizes, are the sizes the pattern compares; the
    same guard on other sides, or on a graph without the pair, is not the finding."""
    name = "joint-graph-guards-on-a-view-of-a-view"
    finding, verdict = _check(name, "joint_graph.joint_graph_passes", _view_pair_of_a_cat, (torch.randn(3, 6),))
    guards = [v for v in verdict.violations if v.property == "dynamic"]
    assert guards and "Ne(2*s0, s0*s1)" in guards[0].message, verdict.violations
    v = guards[0]
    assert finding.matches(v)
    message = v.message
    v.message = message.replace("Ne(2*s0, s0*s1)", "Ne(s0, s0*s1)")  # 3 against 18: no position compares them
    assert not finding.matches(v)
    v.message, v.graph_before = message, v.graph_before.replace("aten.view.default(view,", "aten.reshape.default(view,")
    assert not finding.matches(v)


def _cat_times_zero(x):
    return (torch.cat([x, x]) * 0, x.size(0) * 2)


def test_a_fold_that_uses_a_computed_size_before_it_is_defined_is_the_same_finding():
    """The fold takes a size node defined later whatever computes it: cat([x, x]) * 0 gets
    full([mul_1]) where mul_1 = s0 * 2 is computed after it; a name that is no size node is not it."""
    name = "uniform-fold-uses-a-size-before-it-is-defined"
    finding, verdict = _check(name, "joint_graph.constant_fold_uniform_value", _cat_times_zero, (torch.randn(3),))
    lint = [v for v in verdict.violations if v.property == "validity"]
    assert lint and "Argument 'mul_1'" in lint[0].message, verdict.violations
    assert finding.matches(lint[0])
    lint[0].graph_before = lint[0].graph_before.replace("mul_1 = sym_size_int * 2", "mul_1 = torch.ops.aten.neg(x)")
    lint[0].graph_after = lint[0].graph_after.replace("mul_1 = sym_size_int * 2", "mul_1 = torch.ops.aten.neg(x)")
    assert not finding.matches(lint[0])


@pytest.mark.parametrize("name", sorted({p for f in DYNAMIC_FINDINGS.values() for p in f.passes}))
def test_a_rows_known_predicate_takes_the_example(name):
    """The search calls ``known(violation, example)``: every dynamic row's predicate takes both (one that
    did not raised TypeError on the first violation a row met, in make test)."""
    from conformance._result import Violation

    gm, inputs, _ = next(iter(DYNAMIC_FINDINGS.values())).graph()
    assert _known(name)(Violation("dynamic", "no finding says this"), SimpleNamespace(gm=gm, example_inputs=inputs)) \
        is False

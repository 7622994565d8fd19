"""check(): each property catches its planted bug on a hand-made graph, and passes a correct pass.

Small graphs built by hand make every failure explainable; the generated-graph tests live in
test_planted.py. Every test that expects a violation also names the property, so a checker that
flags everything (or the wrong thing) fails here.
"""

from __future__ import annotations

import copy
import operator
import time

import pytest
import torch
import torch.fx as fx

from conformance import UsageError, check
from conformance.copies import clone_inputs
from tests.graphs import build

aten = torch.ops.aten


def _graph(build, n_inputs=2):
    g = fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    g.output(tuple(build(g, *xs)))
    return fx.GraphModule(torch.nn.Module(), g)


def _binary(target):
    return _graph(lambda g, x, y: [g.call_function(target, (x, y))])


def _props(verdict) -> set:
    return {v.property for v in verdict.violations}


X = torch.tensor([[1.0, float("nan"), 3.0], [-0.0, float("inf"), 2.5]])
Y = torch.tensor([[2.0, 1.0, float("nan")], [0.0, 4.0, -1.0]])


def _retarget(old, new):
    def p(gm):
        for n in gm.graph.nodes:
            if n.target == old:
                n.target = new
        return gm
    return p


def test_identity_is_ok_and_reports_checked_properties():
    v = check(lambda gm: gm, _binary(aten.sub.Tensor), (X, Y))
    assert v.ok and v.checked == ("validity", "values", "mutations", "aliasing")
    assert "sub" in v.graph_after


def test_a_hand_made_graph_gets_meta_val_on_its_several_result_calls_too():
    # Torch-TensorRT's passes read node.meta["val"][i] of a call with several results, as tracers leave
    # it; check() gave such nodes none, so the pass raised KeyError: 'val' (an execution violation)
    g = fx.Graph()
    x = g.placeholder("x")
    most = g.call_function(aten.max.dim, (x, 1))
    g.output((g.call_function(operator.getitem, (most, 0)),))

    def reads_meta(gm):
        (node,) = [n for n in gm.graph.nodes if n.target is aten.max.dim]
        assert node.meta["val"][0].shape == (2,) and node.meta["val"][1].dtype == torch.int64
        return gm

    assert check(reads_meta, fx.GraphModule(torch.nn.Module(), g), (torch.randn(2, 3),)).ok


def _bypass(target):
    """A pass that deletes every ``target`` node, wiring its first operand to its users."""
    def p(gm):
        for n in list(gm.graph.nodes):
            if n.target == target:
                n.replace_all_uses_with(n.args[0])
                gm.graph.erase_node(n)
        return gm
    return p


def test_values_operand_swap():
    def swap(gm):
        for n in gm.graph.nodes:
            if n.target == aten.sub.Tensor:
                n.args = (n.args[1], n.args[0])
        return gm
    v = check(swap, _binary(aten.sub.Tensor), (X, Y))
    assert _props(v) == {"values"}
    assert "output[0]" in v.violations[0].message and "worst abs error" in v.violations[0].message


def test_values_nan_semantics():
    def fmax(graph: fx.Graph):
        for n in list(graph.nodes):
            if n.target == aten.maximum.default:
                with graph.inserting_before(n):
                    gt = graph.call_function(aten.gt.Tensor, n.args)
                    w = graph.call_function(aten.where.self, (gt, *n.args))
                n.replace_all_uses_with(w)
                graph.erase_node(n)
    v = check(fmax, _binary(aten.maximum.default), (X, Y))
    assert _props(v) == {"values"} and "NaN and +-inf at the same positions" in v.violations[0].message


def test_values_dtype_and_shape():
    gm = _graph(lambda g, x, y: [g.call_function(aten.add.Tensor, (x, y))])
    def cast(graph: fx.Graph):
        out = next(n for n in graph.nodes if n.op == "output")
        add = out.args[0][0]
        with graph.inserting_after(add):
            c = graph.call_function(aten._to_copy.default, (add,), {"dtype": torch.float16})
        out.args = ((c,),)
    assert "dtype=torch.float16" in check(cast, gm, (X, Y)).violations[0].message
    def flatten(graph: fx.Graph):
        out = next(n for n in graph.nodes if n.op == "output")
        add = out.args[0][0]
        with graph.inserting_after(add):
            c = graph.call_function(aten.view.default, (add, [-1]))
        out.args = ((c,),)
    assert "shape=(6,)" in check(flatten, gm, (X, Y)).violations[0].message


def test_strides_of_an_output_that_aliases_an_input():
    """x.t() returns a view of the input: its strides are observable, so a same-valued view with
    other strides (alias, on a symmetric input) is a mismatch; a fresh output's strides are free."""
    sym = torch.tensor([[1.0, 2.0], [2.0, 3.0]])
    view = _graph(lambda g, x: [g.call_function(aten.t.default, (x,))], 1)
    v = check(_retarget(aten.t.default, aten.alias.default), view, (sym,))
    assert _props(v) == {"values", "validity"}  # validity: meta['val'] still has t's strides
    assert any(x.message == "output[0] stride=(2, 1), but should be (1, 2)" for x in v.violations)
    fresh = _graph(lambda g, x: [g.call_function(aten.clone.default, (g.call_function(aten.t.default, (x,)),))], 1)
    def contiguous_clone(gm):
        for n in gm.graph.nodes:
            if n.target == aten.clone.default:
                n.kwargs = {"memory_format": torch.contiguous_format}
        return gm
    # (validity would flag the stale meta['val'] strides; values must not care about them)
    assert check(contiguous_clone, fresh, (sym,), properties=["values", "mutations", "aliasing"]).ok


def test_rounding_noise_passes_but_a_dropped_cast_does_not():
    # (x + y) + z  ->  x + (y + z): different rounding, same math.
    gm = _graph(lambda g, x, y, z: [g.call_function(aten.add.Tensor, (g.call_function(aten.add.Tensor, (x, y)), z))], 3)
    def reassociate(graph: fx.Graph):
        out = next(n for n in graph.nodes if n.op == "output")
        outer = out.args[0][0]
        inner = outer.args[0]
        x, y = inner.args
        with graph.inserting_before(outer):
            yz = graph.call_function(aten.add.Tensor, (y, outer.args[1]))
            new = graph.call_function(aten.add.Tensor, (x, yz))
        outer.replace_all_uses_with(new)
        graph.erase_node(outer)
        graph.erase_node(inner)
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        xs = tuple(torch.randn(64, dtype=dtype) * 100 for _ in range(3))
        v = check(reassociate, gm, xs)
        assert v.ok, f"{dtype}: {v}"
    # f32 -> f16 -> f32 round trip inside the graph: dropping it changes every inexact value.
    gm = _graph(lambda g, x: [g.call_function(aten._to_copy.default, (
        g.call_function(aten._to_copy.default, (x,), {"dtype": torch.float16}),), {"dtype": torch.float32})], 1)
    def drop_casts(graph: fx.Graph):
        out = next(n for n in graph.nodes if n.op == "output")
        out.args = ((next(n for n in graph.nodes if n.op == "placeholder"),),)
        graph.eliminate_dead_code()
    v = check(drop_casts, gm, (torch.randn(32),), properties=["values"])
    assert _props(v) == {"values"} and "fp64 reference" in v.violations[0].message


def test_integers_are_exact():
    gm = _graph(lambda g, x, y: [g.call_function(aten.add.Tensor, (x, y))])
    ints = (torch.arange(6).reshape(2, 3), torch.ones(2, 3, dtype=torch.int64))
    v = check(_retarget(aten.add.Tensor, aten.sub.Tensor), gm, ints)
    assert _props(v) == {"values"} and "exactly equal" in v.violations[0].message


def _atan_one_ulp_up(gm):
    """atan rounded one ulp up (within float32's tolerance), as a lowering's atan may be."""
    for n in list(gm.graph.nodes):
        if n.target == aten.atan.default:
            with gm.graph.inserting_after(n):
                inf = gm.graph.call_function(aten.full_like.default, (n, float("inf")))
            with gm.graph.inserting_after(inf):
                up = gm.graph.call_function(aten.nextafter.default, (n, inf))
            n.replace_all_uses_with(up, delete_user_cb=lambda user: user not in (up, inf))
    gm.recompile()
    return gm


def test_a_comparison_at_a_tie_may_take_the_fp64_references_side():
    """make conformance drew atan(3) <= x1 with x1 eager's float32 atan(3) (a tie aimed at the
    comparison): eager says True, the fp64 reference False (atan(3) = 1.24904577... > 1.24904573).
    A pass that rounds atan one ulp up gives False: the reference's answer, accepted. A pass that flips
    the comparison is still caught where nothing ties."""
    gm = _graph(lambda g, x, y: [g.call_function(aten.le.Tensor, (g.call_function(aten.atan.default, (x,)), y))])
    x = torch.tensor([3, 1])
    y = torch.cat([torch.atan(torch.tensor([3.0])), torch.tensor([0.5])])
    assert check(_atan_one_ulp_up, gm, (x, y), properties=["values"]).ok  # its new nodes carry no meta['val']
    flipped = check(_retarget(aten.le.Tensor, aten.gt.Tensor), gm, (x, y))
    assert _props(flipped) == {"values"} and "exactly equal" in flipped.violations[0].message


def test_signed_zero_only_when_asked():
    gm = _graph(lambda g, x: [g.call_function(aten.mul.Tensor, (x, -1.0))], 1)
    zero = (torch.zeros(3),)
    assert check(_retarget(aten.mul.Tensor, aten.mul.Tensor), gm, zero).ok
    def neg_to_sub(graph: fx.Graph):  # 0 - x gives +0.0 where -x gives -0.0
        for n in graph.nodes:
            if n.target == aten.mul.Tensor:
                n.target, n.args = aten.rsub.Scalar, (n.args[0], 0.0)
    assert check(neg_to_sub, gm, zero).ok
    assert _props(check(neg_to_sub, gm, zero, signed_zeros=True)) == {"values"}


def test_mutations_input_overwritten_and_grad_mode():
    v = check(_retarget(aten.sub.Tensor, aten.sub_.Tensor), _binary(aten.sub.Tensor), (X, Y))
    assert {"mutations", "aliasing"} <= _props(v)
    assert any("input[0] after the run" in x.message and "leaves it unchanged" in x.message for x in v.violations)

    gm = _graph(lambda g, x: [g.call_function(torch._C._set_grad_enabled, (False,)),
                              g.call_function(aten.neg.default, (x,)),
                              g.call_function(torch._C._set_grad_enabled, (True,))][1:2], 1)
    def drop_restore(graph: fx.Graph):
        nodes = [n for n in graph.nodes if n.target is torch._C._set_grad_enabled]
        graph.erase_node(nodes[-1])
    v = check(drop_restore, gm, (torch.randn(3),))
    assert _props(v) == {"mutations"} and "grad mode" in v.violations[0].message
    assert torch.is_grad_enabled()


def test_mutations_metadata():
    gm = _graph(lambda g, x: [g.call_function(aten.sin.default, (g.call_function(aten.t_.default, (x,)),))], 1)
    v = check(_bypass(aten.t_.default), gm, (torch.randn(2, 2),))
    assert any(x.property == "mutations" and "stride" in x.message for x in v.violations)


def _writes_constant(write):
    """x0 * 2, after ``write`` (add_ or add) of x0 into the buffer ``c``; the write's result is unused."""
    return build(1, lambda g, call, x: [call(write, g.get_attr("c"), x), call(aten.mul.Tensor, x, 2)][1:],
                 constants={"c": torch.zeros(3)})


def _drop_target(target):
    def p(gm):
        for n in list(gm.graph.nodes):
            if n.target == target:
                gm.graph.erase_node(n)
        gm.graph.eliminate_dead_code()
        return gm
    return p


def test_mutations_of_constants_dropped_or_introduced():
    """A graph's writes to its own buffers are state the caller sees: dropping one (a DCE that takes
    add_ for dead) or introducing one (add turned into add_) is a mutations violation."""
    gm, x = _writes_constant(aten.add_.Tensor), torch.ones(3)
    v = check(_drop_target(aten.add_.Tensor), gm, (x,))
    assert _props(v) == {"mutations"}
    assert "constant c after the run" in v.violations[0].message and "the original writes it" in v.violations[0].message
    assert check(lambda gm: gm, gm, (x,)).ok
    assert check("reference_lowering.passes:eliminate_dead_code", gm, (x,)).ok  # keeps the write
    assert torch.equal(gm.c, torch.zeros(3))  # the caller's buffer was never written

    pure = _writes_constant(aten.add.Tensor)
    v = check(_retarget(aten.add.Tensor, aten.add_.Tensor), pure, (x,))
    assert _props(v) == {"mutations"} and "leaves it unchanged" in v.violations[0].message
    assert check(_drop_target(aten.add.Tensor), pure, (x,)).ok  # a dead pure read may go


def test_a_removed_constant_is_a_violation_only_when_the_original_writes_it():
    def drop_write_and_buffer(gm):
        _drop_target(aten.add_.Tensor)(gm)
        gm.graph.eliminate_dead_code()
        del gm.c
        return gm
    v = check(drop_write_and_buffer, _writes_constant(aten.add_.Tensor), (torch.ones(3),))
    assert _props(v) == {"mutations"} and "c after the run=missing" in v.violations[0].message

    def drop_read_and_buffer(gm):
        _drop_target(aten.add.Tensor)(gm)
        gm.graph.eliminate_dead_code()
        del gm.c
        return gm
    assert check(drop_read_and_buffer, _writes_constant(aten.add.Tensor), (torch.ones(3),)).ok


def test_aliasing_added_and_removed():
    gm = _graph(lambda g, x: [g.call_function(aten.clone.default, (x,))], 1)
    v = check(_bypass(aten.clone.default), gm, (torch.randn(3),))
    assert _props(v) == {"aliasing"} and "aliases input[0]" in v.violations[0].message
    view = _graph(lambda g, x: [g.call_function(aten.view.default, (x, [-1]))], 1)
    v = check(_retarget(aten.view.default, aten.reshape.default), view, (torch.randn(2, 3),))
    assert v.ok  # reshape of a contiguous tensor is a view too
    def copy_instead(gm):
        for n in list(gm.graph.nodes):
            if n.target == aten.view.default:
                with gm.graph.inserting_after(n):
                    c = gm.graph.call_function(aten.clone.default, (n,))
                n.replace_all_uses_with(c, delete_user_cb=lambda u: u is not c)
        return gm
    v = check(copy_instead, view, (torch.randn(2, 3),))
    assert _props(v) == {"aliasing"} and "should alias input[0] too" in v.violations[0].message
    assert check(copy_instead, view, (torch.randn(2, 3),), ensure=["functional"]).ok


def _merge_duplicate_outputs(gm):
    """CSE of duplicate results as PyTorch once shipped it: a later call with the same target and
    arguments as an earlier one is replaced by it, outputs included."""
    seen = {}
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        key = (n.target, n.args, tuple(sorted(n.kwargs.items())))
        if key in seen:
            n.replace_all_uses_with(seen[key])
            gm.graph.erase_node(n)
        else:
            seen[key] = n
    gm.recompile()
    return gm


def test_two_outputs_that_come_to_share_storage_violate_aliasing_unless_the_original_shared_it():
    """Issue 56: merging two equal results that are both outputs makes them one storage (a caller
    writing into one sees the other change); PyTorch fixed that in its CSE as a bug. Where the
    original already returned one value twice, the merge changes nothing a caller sees."""
    two = _graph(lambda g, x, y: [g.call_function(aten.add.Tensor, (x, y)), g.call_function(aten.add.Tensor, (x, y))])
    v = check(_merge_duplicate_outputs, two, (X, Y))
    assert _props(v) == {"aliasing"}, v
    assert "output[0] aliases output[1], but should not (the original's output[0] aliases nothing)" \
        in v.violations[0].message, v
    once = _graph(lambda g, x, y: [g.call_function(aten.add.Tensor, (x, y))] * 2)
    assert check(_merge_duplicate_outputs, once, (X, Y)).ok
    inner = _graph(lambda g, x, y: [g.call_function(aten.neg.default, (g.call_function(aten.add.Tensor, (x, y)),)),
                                    g.call_function(aten.add.Tensor, (x, y))])
    assert check(_merge_duplicate_outputs, inner, (X, Y)).ok  # one output and an intermediate: nothing shared


def test_validity_lint_signature_meta_and_run_failures():
    gm = _binary(aten.mul.Tensor)
    def use_before_def(gm):
        nodes = list(gm.graph.nodes)
        mul, out = nodes[2], nodes[3]
        nodes[0].prepend(mul)
        return gm
    v = check(use_before_def, gm, (X, Y))
    assert _props(v) == {"validity"} and "graph.lint()" in v.violations[0].message
    def extra_input(gm):
        gm.graph.placeholder("extra")
        return gm
    assert "placeholders=3" in check(extra_input, gm, (X, Y)).violations[0].message
    v = check(_half_meta_of(aten.mul.Tensor), gm, (X, Y))
    assert _props(v) == {"validity"} and "meta['val']=float16[2, 3]" in v.violations[0].message
    assert "node 2 %mul_tensor" in v.violations[0].message
    def bad_view(gm):
        for n in gm.graph.nodes:
            if n.target == aten.mul.Tensor:
                with gm.graph.inserting_after(n):
                    bad = gm.graph.call_function(aten.view.default, (n, [7]))
                n.replace_all_uses_with(bad, delete_user_cb=lambda u: u is not bad)
        return gm
    v = check(bad_view, gm, (X, Y))
    assert _props(v) == {"validity"} and "running the transformed graph raised" in v.violations[0].message
    assert "aten.view.default" in v.violations[0].message


def test_execution_failures():
    gm = _binary(aten.add.Tensor)
    def raises(gm):
        raise KeyError("no rule for aten.add")
    v = check(raises, gm, (X, Y))
    assert _props(v) == {"execution"} and "KeyError" in v.violations[0].message and "test_verify.py" in v.violations[0].message
    assert v.violations[0].kind == "raised"
    returned = check(lambda gm: "done", gm, (X, Y)).violations[0]
    assert "returned str" in returned.message and returned.kind == "returned"  # an int is a count
    exited = check(lambda gm: exit(4), gm, (X, Y)).violations[0]
    assert "sys.exit" in exited.message and exited.kind == "raised"

    def sleeps(gm):
        try:
            time.sleep(30)
        except Exception:  # a pass that swallows everything still cannot swallow the timeout
            pass
        return gm
    v = check(sleeps, gm, (X, Y), timeout=0.3)  # a sleep that ran out would leave no violation at all
    assert _props(v) == {"execution"} and "time=0.3 s" in v.violations[0].message
    assert v.violations[0].kind == "hung"


def test_contracts_functional_and_no_input_as_output():
    gm = _graph(lambda g, x, y: [g.call_function(aten.add.Tensor, (x, y)), x])
    v = check(lambda gm: gm, gm, (X, Y), ensure=["no-input-as-output"])
    assert _props(v) == {"contracts:no-input-as-output"} and "output[1]=%x0" in v.violations[0].message
    v = check(_retarget(aten.add.Tensor, aten.add_.Tensor), gm, (X, Y), ensure=["functional"],
              properties=["values"])
    # output[1] is x0 itself, which add_ has now overwritten: values are wrong too.
    assert _props(v) == {"values", "contracts:functional"}
    assert any("mutating op=aten.add_.Tensor" in x.message for x in v.violations)
    with pytest.raises(UsageError, match="known: functional, no-input-as-output"):
        check(lambda gm: gm, gm, (X, Y), ensure=["nope"])


def _half_meta_of(target):
    """A pass that leaves the graph alone but makes the meta['val'] of ``target``'s nodes float16."""
    def stale(gm):
        for n in gm.graph.nodes:
            if n.target == target:
                n.meta["val"] = n.meta["val"].to(torch.float16)
        return gm
    return stale


def test_a_wrong_meta_val_the_original_already_had_is_not_the_pass_s():
    """A tracer's fake tensors can disagree with eager about strides (AOTAutograd's clone of an
    expanded view: docs/torch-facts.md section 11): a pass that keeps that meta['val'] is not
    flagged; one that makes another node's wrong still is."""
    from strategies import attach_meta

    gm = attach_meta(_graph(lambda g, x, y: [g.call_function(aten.mul.Tensor, (g.call_function(aten.neg.default, (x,)), y))]),
                     (X, Y))
    _half_meta_of(aten.neg.default)(gm)  # wrong before any pass
    assert check(lambda gm: gm, gm, (X, Y)).ok
    v = check(_half_meta_of(aten.mul.Tensor), gm, (X, Y))
    assert [m.message.split(" [")[1][:19] for m in v.violations] == ["node 3 %mul_tensor:"]


def _views_to_copies(gm):
    """What export's ReplaceViewOpsWithViewCopyOpsPass does: permute -> permute_copy."""
    for n in gm.graph.nodes:
        if n.target is aten.permute.default:
            n.target = aten.permute_copy.default
            n.meta["val"] = n.meta["val"].contiguous()  # a copy is compact
    gm.recompile()
    return gm


def test_contract_no_views():
    gm = _graph(lambda g, x, y: [g.call_function(aten.permute.default, (x, [1, 0])), g.call_function(aten.alias.default, (y,))])
    kept = check(lambda gm: gm, gm, (X, Y), ensure=["no-views"])
    assert [v.property for v in kept.violations] == ["contracts:no-views"] * 2
    assert "view op=aten.permute.default" in kept.violations[0].message
    # the copies end output[0]'s aliasing of x0, which the contract allows; alias(y) is still a view
    copied = check(_views_to_copies, gm, (X, Y), ensure=["no-views"])
    assert [v.message.split(",")[0] for v in copied.violations] == ["view op=aten.alias.default"]
    # without the contract, the lost aliasing (and output[0]'s strides) are violations
    assert {"aliasing", "values"} <= _props(check(_views_to_copies, gm, (X, Y)))


def _add_dead_neg(gm):
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        gm.graph.call_function(aten.neg.default, (next(iter(gm.graph.nodes)),))
    return gm


def test_idempotence_and_determinism():
    v = check(_add_dead_neg, _binary(aten.add.Tensor), (X, Y), properties=["idempotence"])
    assert _props(v) == {"idempotence"} and "second application differs" in v.violations[0].message
    assert check(lambda gm: gm, _binary(aten.add.Tensor), (X, Y), properties=["idempotence", "determinism"]).ok
    flip = iter([False, True] * 10)
    v = check(lambda gm: _add_dead_neg(gm) if next(flip) else gm, _binary(aten.add.Tensor), (X, Y),
              properties=["determinism"])
    assert _props(v) == {"determinism"}


def test_a_registered_contract_is_checked_by_name():
    """The extension point later layers use: a contract registered by name judges results via ensure=."""
    from conformance.contracts import CONTRACTS, register_contract

    @register_contract("no-neg", "the result computes no aten.neg")
    def _no_neg(ctx):
        return [f"node {n.name}=aten.neg, but should be gone" for n in ctx.after.graph.nodes
                if n.target == aten.neg.default]

    try:
        gm = _graph(lambda g, x: [g.call_function(aten.neg.default, (x,))], 1)
        v = check(lambda gm: gm, gm, (torch.randn(3),), ensure=["no-neg"])
        assert _props(v) == {"contracts:no-neg"} and "aten.neg, but should be gone" in v.violations[0].message
        assert check(_retarget(aten.neg.default, aten.neg.default), gm, (torch.randn(3),), properties=["values"]).ok
        with pytest.raises(UsageError, match="no-such-contract"):
            check(lambda gm: gm, gm, (torch.randn(3),), ensure=["no-such-contract"])
    finally:
        del CONTRACTS["no-neg"]


def test_caller_graph_and_inputs_are_never_modified():
    gm = _binary(aten.add.Tensor)
    gm.register_buffer("c", torch.ones(3))
    code, nodes = gm.code, [n.format_node() for n in gm.graph.nodes]
    inputs = clone_inputs((X, Y))
    def vandal(gm, sample_inputs):
        for t in sample_inputs:
            t.fill_(7)
        gm.c.fill_(7)
        for n in list(gm.graph.nodes):
            if n.target == aten.add.Tensor:
                n.target = aten.mul.Tensor
        return gm
    assert not check(vandal, gm, inputs).ok
    assert gm.code == code and [n.format_node() for n in gm.graph.nodes] == nodes
    assert torch.equal(gm.c, torch.ones(3))
    assert torch.equal(torch.nan_to_num(inputs[0]), torch.nan_to_num(X)) and inputs[1].stride() == Y.stride()


def test_a_graph_writing_its_own_constant_is_judged_from_the_same_state():
    """The original's run writes the constant; the caller's module keeps its value, and the pass
    gets the constant as the caller has it (a pass reading it at pass time, like constant
    folding, is judged against a run from that same state)."""
    g = fx.Graph()
    x = g.placeholder("x")
    c = g.get_attr("c")
    g.call_function(aten.add_.Tensor, (c, 1))
    g.output((g.call_function(aten.add.Tensor, (x, c)),))
    root = torch.nn.Module()
    root.register_buffer("c", torch.zeros(3))
    gm = fx.GraphModule(root, g)
    seen = []

    def reads_constant(gm):
        seen.append(gm.c.clone())
        return gm

    assert check(reads_constant, gm, (torch.ones(3),)).ok
    assert torch.equal(gm.c, torch.zeros(3)) and torch.equal(seen[0], torch.zeros(3))


def test_bad_graph_given_to_check():
    gm = _binary(aten.mm.default)
    with pytest.raises(UsageError, match="raised RuntimeError on its own inputs"):
        check(lambda gm: gm, gm, (X, Y))
    with pytest.raises(UsageError, match="should be a torch.fx.GraphModule"):
        check(lambda gm: gm, gm.graph, (X, Y))


def _nudge_output(factor):
    """A pass multiplying the first output by ``factor`` (a planted rounding-size change)."""
    def transform(gm):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        with gm.graph.inserting_before(out):
            first = out.args[0][0]
            scaled = gm.graph.call_function(torch.ops.aten.mul.Tensor, (first, factor))
        out.args = ((scaled, *out.args[0][1:]),)
        gm.recompile()
        return gm
    return transform


def test_an_f64_output_of_an_f32_intermediate_gets_f32_tolerances():
    """exp(x) in f32, then promoted to f64: a few f32 ulps of difference is rounding, not a bug;
    the same difference on an all-f64 computation is a bug."""
    from tests.graphs import build

    aten = torch.ops.aten
    mixed = build(2, lambda g, c, x, y: [c(aten.add.Tensor, c(aten.exp.default, x), y)])
    pure = build(2, lambda g, c, x, y: [c(aten.add.Tensor, c(aten.exp.default, x), y)])
    # exp(0) = 1 exactly: the original has no error of its own to hide the nudge behind
    x32, x64, y64 = torch.tensor([0.0]), torch.tensor([0.0], dtype=torch.float64), torch.tensor([0.0], dtype=torch.float64)
    nudge = _nudge_output(1 + 3e-7)  # ~2.5 f32 ulps, ~1350 f64 ulps
    assert check(nudge, mixed, (x32, y64), properties=["values"]).ok
    verdict = check(nudge, pure, (x64, y64), properties=["values"])
    assert not verdict.ok and "float64" in verdict.violations[0].message
    assert not check(_nudge_output(1 + 1e-4), mixed, (x32, y64), properties=["values"]).ok  # changed math still fails


def test_least_precise_counts_what_the_reference_computes_more_exactly():
    from conformance.oracle import least_precise
    from conformance.reruns import reference_run
    from tests.graphs import build
    from strategies import attach_meta

    aten = torch.ops.aten
    def body(g, c, h, d):
        cast = lambda x, dtype: g.call_function(aten._to_copy.default, (x,), {"dtype": dtype})  # noqa: E731
        return [c(aten.add.Tensor, c(aten.exp.default, h), d), c(aten.neg.default, d),
                cast(cast(d, torch.float16), torch.float64)]

    gm = build(2, body)
    inputs = (torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.float64))
    gm = attach_meta(gm, inputs)
    dtypes = reference_run(gm, inputs)[3]
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    assert least_precise(out[0], dtypes) == torch.float16  # exp ran in f16 in eager, f64 in the reference
    assert least_precise(out[1], dtypes) is None
    assert least_precise(out[2], dtypes) is None  # an explicit cast rounds in the reference too


def test_the_reference_computes_floats_made_from_integers_in_float64():
    """``sin(expm1(10))`` of an int64: eager's float32 gives 0.23891716, the truth is 0.23799354. The
    reference once promoted the int to float32 too and matched eager to the last digit, so a lowering
    as close to the truth (0.23702015) was flagged (make conformance, seed 3571268121)."""
    import math

    from conformance.reruns import reference_run
    from tests.graphs import build

    aten = torch.ops.aten
    gm = build(1, lambda g, c, x: [c(aten.sin.default, c(aten.expm1.default, x))])
    (out,) = reference_run(gm, (torch.tensor(10),))[0]
    assert out.dtype == torch.float64 and out.item() == pytest.approx(math.sin(math.expm1(10)), abs=1e-9)
    assert torch.get_default_dtype() == torch.float32  # the host's default, as it was


def test_an_output_viewing_a_constant_is_judged_against_the_constants_the_original_ran_with():
    """The original runs on a snapshot of its constants; its outputs' aliasing is read against
    that snapshot. (It was read against the caller's constants, so an output viewing a constant
    seemed to alias nothing, and the identity pass was flagged for aliasing one: found once the
    generator drew expand_as of a constant, issue 15.)"""
    g = fx.Graph()
    x = g.placeholder("x0")
    g.output((g.call_function(torch.ops.aten.expand_as.default, (g.get_attr("c0"), x)),))
    root = torch.nn.Module()
    root.register_buffer("c0", torch.ones(1))
    assert check(lambda m: m, fx.GraphModule(root, g), (torch.zeros(3),)).ok


def test_an_empty_output_aliases_nothing():
    """No element of an empty view can be written or read through another tensor, so a pass that makes
    it a copy changes nothing a caller sees (make conformance flagged torch's functionalize for it);
    a non-empty view made a copy still loses its aliasing."""
    def slices_to_copies(gm):
        for n in gm.graph.nodes:
            if n.target is aten.slice.Tensor:
                n.target = aten.slice_copy.Tensor
        gm.recompile()
        return gm

    empty = _graph(lambda g, x, y: [g.call_function(aten.slice.Tensor, (x, 0, 2, 0)), x])
    assert check(slices_to_copies, empty, (X, Y), properties=["aliasing"]).ok
    some = _graph(lambda g, x, y: [g.call_function(aten.slice.Tensor, (x, 0, 0, 1)), x])
    assert _props(check(slices_to_copies, some, (X, Y), properties=["aliasing"])) == {"aliasing"}


# --- where eager and fake tensors disagree on a node the pass made, the pass is not at fault ---------


def _batch_norm_graph():
    """``_native_batch_norm_legit_no_training`` of a permuted input: eager returns a contiguous
    result, fake propagation keeps the input's strides (a torch finding, FAKE_FINDINGS)."""
    g = fx.Graph()
    x, w, b = g.placeholder("x"), g.placeholder("w"), g.placeholder("b")
    bn = g.call_function(torch.ops.aten._native_batch_norm_legit_no_training.default, (x, None, w, b, w, 0.1, 1e-5))
    out = g.call_function(__import__("operator").getitem, (bn, 0))
    g.output((out,))
    gm = fx.GraphModule(torch.nn.Module(), g)
    inputs = (torch.randn(2, 3, 1).permute(2, 1, 0), torch.randn(3), torch.rand(3) + 1)
    return gm, inputs


def _repropagate(gm):
    """What many passes do at their end: meta['val'] afresh by fake-tensor propagation."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    gm = fx.GraphModule(gm, gm.graph)
    inputs = [mode.from_tensor(n.meta["example"]) for n in gm.graph.nodes if n.op == "placeholder"]
    FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*inputs)
    return gm


def test_a_meta_val_that_fake_propagation_derives_is_not_the_passs_fault_where_eager_differs():
    from strategies import attach_meta

    gm, inputs = _batch_norm_graph()
    for n, t in zip((n for n in gm.graph.nodes if n.op == "placeholder"), inputs):
        n.meta["example"] = t
    verdict = check(_repropagate, attach_meta(gm, clone_inputs(inputs)), inputs, device="cpu")
    assert verdict.ok, [v.message for v in verdict.violations]


def test_a_meta_val_neither_eager_nor_fake_propagation_derives_is_the_passs_fault():
    from strategies import attach_meta

    gm, inputs = _batch_norm_graph()

    def wrong_strides(gm):
        node = next(n for n in gm.graph.nodes if n.target is __import__("operator").getitem)
        val = node.meta["val"]
        node.meta["val"] = val.new_empty_strided(val.shape, (1, 2, 6))  # neither (6, 2, 1) nor (1, 1, 3)
        return gm

    verdict = check(wrong_strides, attach_meta(gm, clone_inputs(inputs)), inputs, device="cpu")
    assert [v.property for v in verdict.violations] == ["validity"], [v.message for v in verdict.violations]


def _div_as_mul(gm):
    """``x / 3`` -> ``x * (1 / 3)``: rounds differently in some elements, within tolerance."""
    for n in gm.graph.nodes:
        if n.target == aten.div.Tensor:
            n.target, n.args = aten.mul.Tensor, (n.args[0], 1 / 3)
    gm.recompile()
    return gm


def test_a_verdict_says_when_its_values_were_judged_without_the_fp64_reference(monkeypatch):
    from conformance import reruns

    gm = _graph(lambda g, x, y: [g.call_function(aten.div.Tensor, (g.call_function(aten.add.Tensor, (x, y)), 3.0))])
    x, y = torch.linspace(-3, 3, 64), torch.linspace(1, 2, 64)
    assert not torch.equal(_div_as_mul(copy.deepcopy(gm))(x, y)[0], gm(x, y)[0])  # so the reference is asked for
    v = check(_div_as_mul, gm, (x, y), device="cpu")
    assert v.ok and v.no_reference == ""
    restorage = reruns.restorage

    def no_float64(inputs, float_dtype=None):
        if float_dtype == torch.float64:
            raise RuntimeError("planted: no float64 here")
        return restorage(inputs, float_dtype=float_dtype)

    monkeypatch.setattr(reruns, "restorage", no_float64)
    v = check(_div_as_mul, gm, (x, y), device="cpu")
    assert v.ok and v.no_reference == "the fp64 reference did not run: RuntimeError: planted: no float64 here"


def test_an_alias_a_repair_pass_ends_gets_the_contract_that_states_it():
    """Torch-TensorRT's repair passes clone an input returned as an output: flagged as aliasing, with
    the contract that states the repair, under which the same pass is ok."""
    g = fx.Graph()
    x = g.placeholder("x")
    g.output((x,))
    gm = fx.GraphModule(torch.nn.Module(), g)

    def repair(gm):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        with gm.graph.inserting_before(out):
            out.args = ((gm.graph.call_function(aten.clone.default, (out.args[0][0],)),),)
        gm.recompile()
        return gm

    flagged = check(repair, gm, (torch.randn(3),))
    assert [v.property for v in flagged.violations] == ["aliasing"]
    assert "--ensure no-input-as-output" in flagged.violations[0].message
    assert check(repair, gm, (torch.randn(3),), ensure=["no-input-as-output"]).ok

"""Seed graphs (strategies/_draw/seeds.py, ``--seed-graphs``): a user's example programs, traced with
make_fx, embedded with fresh values in drawn context, so a pass over ops the catalog lacks
(``logaddexp``) is exercised; bad seeds get one clear error. What a seed makes a pass do is
measured on CPU draws: the searches say device="cpu"."""

from __future__ import annotations

import collections
import textwrap

import pytest
import torch
import torch.fx as fx
from hypothesis import HealthCheck, Phase, given, seed, settings
from torch.fx.experimental.proxy_tensor import make_fx

from conformance import UsageError, verify
from conformance.cli import main
from conformance.search.focus import resolve_seed_graphs
from strategies import Focus, InvalidArgument, SeedGraph, graphs

aten = torch.ops.aten


def _linear(x, w, b):
    return torch.mm(x, w) + b


def _linear_seed():
    return SeedGraph(make_fx(_linear)(torch.randn(3, 4), torch.randn(4, 2), torch.randn(2)),
                     (torch.randn(3, 4), torch.randn(4, 2), torch.randn(2)))


def fuse_addmm(gm: fx.GraphModule) -> fx.GraphModule:
    """``add(mm(a, b), c) -> addmm(c, a, b)``. Flaw: addmm's ``c`` must broadcast to the 2-d product,
    and ``add`` broadcasts both ways: a 3-d ``c`` makes a 3-d sum, which addmm refuses."""
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target == aten.add.Tensor and not node.kwargs:
            mm, c = node.args
            if getattr(mm, "target", None) == aten.mm.default and isinstance(c, fx.Node):
                with gm.graph.inserting_before(node):
                    new = gm.graph.call_function(aten.addmm.default, (c, *mm.args))
                node.replace_all_uses_with(new)
                gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return gm


def test_seed_graphs_are_embedded_in_drawn_context_with_fresh_values():
    seen = collections.Counter()
    inputs = set()

    @settings(max_examples=60, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seed(0)
    @given(graphs(focus=Focus(seeds=[_linear_seed()])))
    def run(case):
        targets = [n.target for n in case.gm.graph.nodes if n.op == "call_function"]
        if aten.mm.default in targets:
            seen["mm"] += 1
            seen["with other ops"] += any(t not in (aten.mm.default, aten.add.Tensor) for t in targets)
            inputs.update(float(t.flatten()[0]) for t in case.example_inputs if t.dtype == torch.float32 and t.numel())

    run()
    assert seen["mm"] >= 10, seen  # 12 of 60 (mm is in the catalog since issue 15, and drawn rarely unfocused)
    assert seen["with other ops"] >= 5, seen
    assert len(inputs) >= 5  # values are drawn fresh, not the example's


def expand_logaddexp(gm: fx.GraphModule) -> fx.GraphModule:
    """``logaddexp(a, b) -> log(exp(a) + exp(b))``. Flaw: ``exp`` overflows above ~88 (float32)
    where logaddexp (which factors out the max) stays finite."""
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target == aten.logaddexp.default:
            a, b = node.args
            with gm.graph.inserting_before(node):
                total = gm.graph.call_function(aten.add.Tensor, (gm.graph.call_function(aten.exp.default, (a,)),
                                                                 gm.graph.call_function(aten.exp.default, (b,))))
                new = gm.graph.call_function(aten.log.default, (total,))
            node.replace_all_uses_with(new)
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()
    return gm


def _softplus_like(a, b):
    return torch.logaddexp(a, b) * 2


def test_a_pass_over_ops_the_catalog_lacks_is_vacuous_without_seeds_and_checked_with_them():
    # logaddexp is in no drawn graph, however many: 10 show it (focused on the add, exp and log the
    # pass's code names, then again unfocused)
    plain = verify(expand_logaddexp, seed=0, max_examples=10, repro_dir=None, device="cpu", shrink=False)
    assert plain.vacuous and plain.changed == 0 and plain.examples == 10
    seeded = verify(expand_logaddexp, seed=0, repro_dir=None, device="cpu", shrink=False,
                    seed_graphs=[(_softplus_like, (torch.randn(3), torch.randn(3)))])
    assert seeded.changed >= 1 and seeded.focus["seeds"]  # the overflow is found within a few graphs (seeds 0-3)
    assert not seeded.ok and "aten.log.default" in seeded.violations[0].graph_after


def test_a_correct_pass_over_seeds_is_not_flagged():
    def fuse_addmm_2d(gm):
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and node.target == aten.add.Tensor and not node.kwargs:
                mm, c = node.args
                if getattr(mm, "target", None) == aten.mm.default and isinstance(c, fx.Node) \
                        and c.meta["val"].dim() <= 2 and c.meta["val"].dtype == mm.meta["val"].dtype \
                        and torch.broadcast_shapes(c.meta["val"].shape, mm.meta["val"].shape) == mm.meta["val"].shape:
                    with gm.graph.inserting_before(node):
                        new = gm.graph.call_function(aten.addmm.default, (c, *mm.args))
                    new.meta["val"] = node.meta["val"]  # a later add may read it (add(mm, add(mm, c)))
                    node.replace_all_uses_with(new)
                    gm.graph.erase_node(node)
        gm.recompile()
        return gm

    # 60 graphs, unfocused: the pass changes 13, the seed graph's mm + add (focused on the ops its code
    # names, 40 graphs changed 18; but a pass defined in a function has no cache key, so every run
    # discovered it again: 3.7 s of this test's 3.8 on a fresh cache, 2-core AMD EPYC)
    result = verify(fuse_addmm_2d, seed=0, max_examples=60, repro_dir=None, device="cpu", shrink=False, focus="none",
                    seed_graphs=[(_linear, (torch.randn(3, 4), torch.randn(4, 2), torch.randn(2)))])
    assert result.ok, [v.message for v in result.violations]
    assert result.changed >= 10


def test_seed_graphs_from_a_target_string(tmp_path, monkeypatch, capsys):
    (tmp_path / "progs.py").write_text(textwrap.dedent("""
        import torch
        def examples():
            return [(lambda x, w, b: torch.mm(x, w) + b, (torch.randn(2, 3), torch.randn(3, 2), torch.randn(2)))]
    """))
    monkeypatch.chdir(tmp_path)
    seeds = resolve_seed_graphs("progs.py:examples")
    assert len(seeds) == 1 and "aten.mm.default" in repr(seeds[0])
    code = main(["verify", "tests.test_seeds:fuse_addmm", "--seed", "0", "--no-shrink", "--repro-dir", str(tmp_path),
                 "--seed-graphs", "progs.py:examples", "--device", "cpu"])
    out = capsys.readouterr().out
    assert code in (0, 1), out  # without seeds: vacuous, exit 4
    assert "the pass changed 0 of" not in out and "the pass changed" in out
    assert "1 seed graph (SeedGraph(aten.mm.default, aten.add.Tensor))" in out


@pytest.mark.parametrize("spec, message", [
    (42, "should give SeedGraphs"),
    ([], "should give SeedGraphs"),
    ([(_linear, (torch.randn(2, 3), torch.randn(5, 2), torch.randn(2)))], "make_fx could not trace it"),
    ([("not callable", ())], "should be a SeedGraph or a (program, example_args) pair"),
    ([(_linear, (torch.randn(3, 4).to(torch.int8), torch.randn(4, 2), torch.randn(2)))], "make_fx could not trace"),
    ([(lambda x: x.to(torch.int8) + 1, (torch.ones(2),))], None),
    ([(lambda x: x, (torch.randn(2),))], "no call_function node"),
    ([(lambda x: x + 1, (torch.randn(4096),))], "at most 2048"),
    ([(lambda x: x + 1, (torch.ones(2, dtype=torch.int8),))], "the generator draws"),
    (lambda: 1 / 0, "calling it raised ZeroDivisionError"),
])
def test_bad_seed_graphs_get_one_clear_error(spec, message):
    if message is None:
        assert len(resolve_seed_graphs(spec)) == 1  # a dtype the graph makes inside is fine
        return
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_seed_graphs(spec)


def test_seed_graph_validates_its_parts():
    gm = make_fx(lambda x: x + 1)(torch.randn(2))
    with pytest.raises(InvalidArgument, match="placeholders"):
        SeedGraph(gm, ())
    with pytest.raises(InvalidArgument, match="torch.fx.GraphModule"):
        SeedGraph(lambda x: x, (torch.randn(2),))
    with pytest.raises(InvalidArgument, match="must be SeedGraphs"):
        Focus(seeds=[gm])


def test_cli_seed_graphs_bad_target_is_a_usage_error(capsys):
    assert main(["verify", "tests.test_seeds:fuse_addmm", "--seed-graphs", "no_such_module_xyz:f"]) == 2
    err = capsys.readouterr().err
    assert "no_such_module_xyz" in err and "Traceback" not in err


def test_seed_graphs_come_as_a_pair_a_list_or_a_tuple_of_seed_graphs():
    pair = (_linear, (torch.randn(3, 4), torch.randn(4, 2), torch.randn(2)))
    assert len(resolve_seed_graphs(pair)) == 1 and len(resolve_seed_graphs([pair, pair])) == 2
    assert len(resolve_seed_graphs((_linear_seed(), _linear_seed()))) == 2

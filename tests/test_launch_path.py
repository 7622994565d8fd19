"""A lowered graph's direct launch path (issue 36, item 1; ``reference_lowering/pointwise/_fast.py``):
its kernels bound once at lowering and launched without the wrapper op's dispatch, giving what the
graph's own code gives wherever it serves a call, and the graph's own code wherever it does not."""

from __future__ import annotations

import copy

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from reference_lowering.pointwise import bound_launches, host_only, lower_pointwise
from reference_lowering.pointwise._fast import Alloc, Launch
from tests.graphs import build

aten = torch.ops.aten


def _two_kernels():
    """Two regions (a reduction between them): two launches, two allocations."""
    return build(2, lambda g, c, x, y: [c(aten.mul.Tensor, c(aten.sum.dim_IntList, c(aten.sin.default, x), [1], True),
                                          c(aten.exp.default, y))])


def test_a_lowered_graph_launches_its_kernels_directly_and_gives_what_the_op_gives():
    gm = _two_kernels()
    x, y = torch.randn(4, 5), torch.randn(4, 1)
    lowered = lower_pointwise(gm, (x, y))
    launches = bound_launches(lowered)
    assert len(launches) == 2 and all(isinstance(launch, Launch) and launch.run is not None for launch in launches)
    through_op = copy.deepcopy(lowered)  # a copy is made from the graph: it calls through the op
    assert bound_launches(through_op) == ()
    for args in [(x, y), (torch.randn(4, 5), torch.randn(4, 1))]:
        fast, slow = lowered(*args)[0], through_op(*args)[0]
        assert torch.equal(fast, slow) and fast.stride() == slow.stride()
        torch.testing.assert_close(fast, gm(*args)[0])
    # the kernels it launches are the graph's: an op-path call never runs them while the bound path does
    calls = []
    for launch in launches:
        run = launch.run
        launch.run = lambda *a, _run=run, **k: (calls.append(1), _run(*a, **k))[1]
    lowered(x, y)
    assert len(calls) == 2
    through_op(x, y)
    assert len(calls) == 2


def test_allocations_of_constant_sizes_are_bound_to_empty_strided():
    gm = build(1, lambda g, c, x: [c(aten.exp.default, c(aten.t.default, x))])
    x = torch.randn(3, 4)
    lowered = lower_pointwise(gm, (x,))
    [alloc] = type(lowered).forward.allocs  # the output's empty_strided, bound
    assert (alloc.size, alloc.stride, alloc.dtype, torch.device(alloc.device)) == \
        ((4, 3), (1, 4), torch.float32, torch.device("cpu"))
    out = alloc()
    assert out.shape == (4, 3) and out.stride() == (1, 4) and out.dtype == torch.float32
    got, want = lowered(x)[0], copy.deepcopy(lowered)(x)[0]
    assert torch.equal(got, want) and got.stride() == want.stride()


def test_a_dynamic_graph_binds_its_launches_and_sizes_each_grid_per_call():
    gm = build(2, lambda g, c, x, b: [c(aten.relu.default, c(aten.add.Tensor, x, b))])
    lowered = lower_pointwise(gm, (torch.randn(3, 5), torch.randn(5)), dynamic=True)
    (launch,) = bound_launches(lowered)
    assert launch.grid is None
    through_op = copy.deepcopy(lowered)
    for shape in [(7, 9), (40, 33), (0, 5)]:
        x, b = torch.randn(shape), torch.randn(shape[1])
        assert torch.equal(lowered(x, b)[0], through_op(x, b)[0])


def test_where_the_bound_path_cannot_serve_the_graphs_own_code_does():
    """A pass that edits the graph and recompiles, fake tensors, an active dispatch mode: each call means
    what the graph says, as before binding."""
    x, y = torch.randn(4, 5), torch.randn(4, 1)
    lowered = lower_pointwise(_two_kernels(), (x, y))
    want = copy.deepcopy(lowered)(x, y)[0]
    with FakeTensorMode() as mode:  # the wrapper op's fake implementation: shapes, no launch
        fake = lowered(mode.from_tensor(x), mode.from_tensor(y))[0]
    assert fake.shape == want.shape
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        ops: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    Seen.supports_higher_order_operators = True
    with Seen():
        assert torch.equal(lowered(x, y)[0], want)
    assert "triton_kernel_wrapper_mutation" in Seen.ops  # the mode saw the op, as the graph's code gives it
    edited = lowered
    for n in edited.graph.nodes:
        if n.op == "output":
            with edited.graph.inserting_before(n):
                neg = edited.graph.call_function(aten.neg.default, (n.args[0][0],))
            n.args = ((neg,),)
    edited.recompile()
    assert bound_launches(edited) == ()
    assert torch.equal(edited(x, y)[0], -want)


def test_host_only_stubs_the_launches_out_and_puts_them_back():
    x, y = torch.randn(4, 5), torch.randn(4, 1)
    lowered = lower_pointwise(_two_kernels(), (x, y))
    want = copy.deepcopy(lowered)(x, y)[0]
    runs = [launch.run for launch in bound_launches(lowered)]
    with host_only(lowered):
        assert all(launch.run is not run for launch, run in zip(bound_launches(lowered), runs))
        assert lowered(x, y)[0].shape == want.shape  # what the allocation held: no kernel ran
    assert [launch.run for launch in bound_launches(lowered)] == runs
    assert torch.equal(lowered(x, y)[0], want)
    with pytest.raises(ValueError, match="no bound launches"), host_only(copy.deepcopy(lowered)):
        pass

"""Isolation without fork: the worker process that examples go to where this process may not fork
(CUDA initialised, or examples on CUDA), run here on the CPU by forcing its start method.

A spawned interpreter importing torch costs seconds: these tests start few (the fork server's
workers are forked from one that imported torch once, a replacement in about 0.1 s).
"""

from __future__ import annotations

import math
import os
import signal
import time

import pytest
import torch
import torch.fx as fx

from conformance import HarnessError, UsageError, verify
from conformance.adapters import load_pass
from conformance.copies import clone_inputs
from conformance.search import workers
from conformance.search._spawn import Worker
from conformance.search._wire import dumps_case, loads_case
from conformance.search.isolate import ChildDied
from conformance.checker import Checker
from strategies import attach_meta
from tests.passes.planted import PLANTED

aten = torch.ops.aten


def _ops(gm) -> int:
    return sum(n.op == "call_function" for n in gm.graph.nodes)


def _log_pid(log: str, crashed: bool) -> None:
    with open(log, "a") as f:
        f.write(f"{os.getpid()} {int(crashed)}\n")


def _sigfpe_on_even_ops(gm, log):
    """Dies of SIGFPE on graphs of an even number of ops (as an integer division by zero in a kernel
    does on some graphs): about half of any dozen graphs, whatever the generator draws."""
    _log_pid(log, _ops(gm) % 2 == 0)
    if _ops(gm) % 2 == 0:
        os.kill(os.getpid(), signal.SIGFPE)
    return gm


def _identity_logging(gm, log):
    _log_pid(log, False)
    return gm


def _hang_on_two_ops(gm):
    """Hangs where SIGALRM cannot reach it (as a pass stuck in native code does)."""
    if _ops(gm) >= 2:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(600)
    return gm


def _calls(log) -> list:
    return [tuple(map(int, line.split())) for line in log.read_text().splitlines()]


def test_a_pass_killed_by_sigfpe_is_reported_and_the_search_goes_on_in_a_new_worker(tmp_path):
    log = tmp_path / "calls"
    result = verify(_sigfpe_on_even_ops, pass_kwargs={"log": str(log)}, seed=0, isolate=True, max_examples=12,
                    focus="none", repro_dir=None, known=lambda v: "SIGFPE" in v.message, _start_method="forkserver")
    assert result.ok and result.examples == 12  # the deaths were accepted as known: every example ran
    assert [v.property for v in result.known] == ["execution"]
    assert result.known[0].message.startswith("process killed by SIGFPE (signal 8), but the pass should return a graph")
    assert result.known[0].kind == "crashed"
    calls = _calls(log)
    assert os.getpid() not in {pid for pid, _ in calls}
    assert any(crashed for _, crashed in calls) and not all(crashed for _, crashed in calls)
    for (pid, crashed), (next_pid, _) in zip(calls, calls[1:]):
        # the worker serves example after example, and a new one follows each death
        assert (pid != next_pid) == bool(crashed), calls


def test_a_spawned_worker_serves_every_example(tmp_path):
    log = tmp_path / "calls"
    result = verify(_identity_logging, pass_kwargs={"log": str(log)}, seed=0, isolate=True, max_examples=8,
                    focus="none", repro_dir=None, _start_method="spawn")
    assert result.ok and result.isolated and result.examples == 8
    pids = {pid for pid, _ in _calls(log)}
    assert len(pids) == 1 and os.getpid() not in pids


def _graph(n_ops: int) -> tuple:
    def fn(x):
        for _ in range(n_ops):
            x = aten.neg.default(x)
        return (x,)

    inputs = (torch.randn(3),)
    return attach_meta(fx.symbolic_trace(fn), inputs), inputs


def test_a_hang_past_the_grace_time_kills_the_worker_and_a_new_one_takes_the_next_example():
    put = load_pass(_hang_on_two_ops)
    worker = Worker(put, Checker(put, timeout=0.2))
    try:
        with pytest.raises(ChildDied, match=r"^time=1 s elapsed, but the pass should finish within the timeout "
                                            r"\(killed the isolated process\)$") as died:
            worker.check(*_graph(2), grace=1.0)
        assert died.value.timed_out
        assert worker.check(*_graph(1), grace=60.0).ok
        assert worker.started == 2
    finally:
        worker.close()


def _slow_harness(gm):
    """Changes nothing, but makes the oracle of the process it runs in take 0.75 s per output (as a slow
    fp64 reference would): the harness's time, after the pass returned."""
    from conformance import oracle

    original = oracle.Oracle.output
    if not getattr(original, "slow", False):
        def slow(self, *args, **kwargs):
            time.sleep(0.75)
            return original(self, *args, **kwargs)

        slow.slow = True
        oracle.Oracle.output = slow
    return gm


def test_the_timeout_counts_the_pass_alone_not_the_harness(monkeypatch):
    """A 0.2 s timeout, a 0.5 s grace, and an oracle that takes 0.75 s: no timeout, in this process, in
    a forked child and in a worker; past the harness's own budget, the harness's fault (not a hang of
    the pass)."""
    from conformance import oracle
    from conformance.search import isolate

    monkeypatch.setattr(oracle.Oracle, "output", oracle.Oracle.output)  # restored after the in-process run
    put = load_pass(_slow_harness)
    checker = Checker(put, timeout=0.2)
    gm, inputs = _graph(1)
    worker = Worker(put, checker)
    try:
        assert worker.check(gm, inputs, grace=0.5).ok
    finally:
        worker.close()
    assert isolate.run_forked(lambda: checker.check(gm, inputs), 0.5, phased=True).ok
    assert checker.check(gm, inputs).ok
    monkeypatch.setattr(isolate, "HARNESS_BUDGET_S", 0.5)
    with pytest.raises(ChildDied) as died:
        isolate.run_forked(lambda: checker.check(gm, inputs), 0.5, phased=True)
    assert died.value.harness and not died.value.raised and "the harness's own work" in died.value.reason


def _make_closure():
    def local_pass(gm):
        return gm

    return local_pass


@pytest.mark.parametrize("pass_", [lambda gm: gm, _make_closure()], ids=["lambda", "closure"])
def test_a_pass_that_cannot_reach_a_worker_gets_one_line_saying_what_to_do(pass_):
    with pytest.raises(UsageError) as err:
        verify(pass_, isolate=True, max_examples=2, focus="none", repro_dir=None, _start_method="forkserver")
    message = str(err.value)
    assert "\n" not in message
    assert "cannot reach the isolated worker process" in message
    assert "import path (pkg.mod:attr or path/to/file.py:attr)" in message and "--device cpu" in message


def test_where_cuda_is_initialised_nothing_forks(tmp_path, monkeypatch):
    """A process that initialised CUDA must not fork: the search runs in it, and --isolate sends the
    examples to a worker (on a CUDA machine this is every search: drawing on CUDA initialises it)."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    log = tmp_path / "calls"
    # device="cpu": on a CUDA machine the default device would isolate every search by itself
    result = verify(_identity_logging, pass_kwargs={"log": str(log)}, seed=0, max_examples=3, focus="none",
                    repro_dir=None, device="cpu")
    assert result.ok and {pid for pid, _ in _calls(log)} == {os.getpid()}  # no forked driver
    log.unlink()
    result = verify(_identity_logging, pass_kwargs={"log": str(log)}, seed=0, max_examples=3, focus="none",
                    repro_dir=None, isolate=True, device="cpu")
    pids = {pid for pid, _ in _calls(log)}
    assert result.ok and result.isolated and len(pids) == 1 and os.getpid() not in pids
    with pytest.raises(HarnessError, match="initialised CUDA"):
        workers.run_drivers(1, [1], None, None, None)


def _case_with_shared_storage() -> tuple:
    """Inputs that are views of one storage, with a NaN payload and -0.0; a constant; two outputs."""
    base = torch.tensor([1.5, -0.0, math.inf, 4.0, 5.0, 6.0])
    base.view(torch.int32)[3] = 0x7FC00123  # a NaN with a payload
    inputs = (base[1:5].view(2, 2), base[::2])

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("c0", torch.arange(4.0).view(2, 2))

        def forward(self, x, y):
            return aten.add.Tensor(x, self.c0), aten.mul_.Tensor(y, 2.0)

    gm = fx.symbolic_trace(M())
    return attach_meta(gm, clone_inputs(inputs)), inputs


def test_an_example_crosses_to_the_worker_with_its_meta_names_and_storage_sharing():
    gm, inputs = _case_with_shared_storage()
    gm2, inputs2, symbolic = loads_case(dumps_case(gm, inputs, None))
    assert gm2.code == gm.code and symbolic is None
    assert [n.name for n in gm2.graph.nodes] == [n.name for n in gm.graph.nodes]
    for a, b in zip(gm.graph.nodes, gm2.graph.nodes):
        assert a.target == b.target and a.meta.keys() == b.meta.keys()
        va, vb = a.meta.get("val"), b.meta.get("val")
        if isinstance(va, torch.Tensor):
            assert (vb.shape, vb.stride(), vb.storage_offset(), vb.dtype, vb.device) == \
                (va.shape, va.stride(), va.storage_offset(), va.dtype, va.device)
    x, y = inputs2
    assert x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()  # still one storage
    assert bytes(x.untyped_storage()) == bytes(inputs[0].untyped_storage())  # NaN payload, -0.0
    assert (x.stride(), x.storage_offset(), y.stride()) == ((2, 1), 1, (2,))
    placeholders = [n.meta["val"] for n in gm2.graph.nodes if n.op == "placeholder"]
    assert placeholders[0].untyped_storage()._cdata == placeholders[1].untyped_storage()._cdata  # fakes share too
    assert torch.equal(gm2.c0, gm.c0)
    put = load_pass(PLANTED["operand_swap"])
    checker = Checker(put)
    mine, theirs = checker.check(gm, inputs), checker.check(gm2, inputs2)
    assert [(v.property, v.message) for v in mine.violations] == [(v.property, v.message) for v in theirs.violations]

"""A third-party pass under the conformance suite: ``pytest --fx-pass=pkg.mod:attr``.

One test per property, each a Hypothesis search over generated graphs (the active profile sets
the budget), so pytest-xdist (``-n auto``) spreads the properties over workers. Skipped when no
``--fx-pass`` is given. For repro scripts and reports use ``fx-conformance verify`` instead.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import UsageError, load_pass
from conformance._result import EXECUTION
from conformance.adapters import parse_pass_args
from conformance.pytest_plugin import record_fire
from conformance.search.options import resolve_device, resolve_ops
from conformance.search.focus import resolve_focus, with_user_ops
from conformance.checker import Checker
from strategies import InvalidArgument, graphs

pytestmark = pytest.mark.conformance


@pytest.fixture(scope="module")
def fx_options(request):
    return options_from(request.config)


def options_from(config):
    """``(pass, ensure, strategy, specials, dynamic, device)`` from the ``--fx-*`` options of ``config``."""
    target = config.getoption("fx_pass", default=None)
    if not target:
        pytest.skip("no --fx-pass given")
    try:
        put = load_pass(target, signature=config.getoption("fx_signature"),
                        settings_factory=config.getoption("fx_settings_factory"),
                        pass_kwargs=parse_pass_args(config.getoption("fx_pass_arg")),
                        context=config.getoption("fx_context"))
    except UsageError as exc:
        raise pytest.UsageError(f"--fx-pass: {exc}") from None
    mutating = config.getoption("fx_graphs") == "mutating"
    dynamic, ir, focus_option = config.getoption("fx_dynamic"), config.getoption("fx_ir"), config.getoption("fx_focus")
    if dynamic or ir == "torch":  # as verify(): focus shapes static ATen graphs, so it is not discovered for these
        if focus_option not in ("auto", "none", None):
            raise pytest.UsageError("--fx-focus: focus ops shape static ATen graphs; --fx-ir torch draws nn.Modules "
                                    "and --fx-dynamic symbolic programs (use --fx-focus none)")
        focus_option = "none"
    try:
        device = resolve_device(config.getoption("fx_device"))
    except UsageError as exc:
        raise pytest.UsageError(f"--fx-device: {exc}") from None
    try:  # after the pass's module, which may register them, is imported
        ops = resolve_ops(config.getoption("fx_ops"))
    except UsageError as exc:
        raise pytest.UsageError(f"--fx-ops: {exc}") from None
    if ops is not None and (dynamic or ir == "torch"):
        raise pytest.UsageError("--fx-ops shapes drawn aten graphs; --fx-ir torch draws nn.Modules and --fx-dynamic "
                                "symbolic programs")
    try:
        focus, info = resolve_focus(focus_option, put, mutations=mutating, timeout=10.0)
        if focus_option == "auto" and ops:
            focus, _ = with_user_ops(focus, info, ops, put, ir=ir, mutations=mutating, device=device, timeout=10.0)
    except UsageError as exc:
        raise pytest.UsageError(f"--fx-focus: {exc}") from None
    try:  # drawn on the device they run on (dynamic and torch-IR graphs on the CPU: check() moves them)
        strategy = graphs(dynamic=True) if dynamic else \
            graphs(mutations=mutating, special_values=True, focus=focus, ir=ir, ops=ops,
                   requires_grad=config.getoption("fx_requires_grad"), device="cpu" if ir == "torch" else device)
    except InvalidArgument as exc:
        raise pytest.UsageError(f"--fx-ir/--fx-requires-grad: {exc}") from None
    return put, tuple(config.getoption("fx_ensure")), strategy, config.getoption("fx_specials"), dynamic, device


def _check(fx_options, data, prop):
    put, ensure, strategy, specials, dynamic, device = fx_options
    # The contracts go to every checker, as in `fx-conformance verify`: what they allow (an input
    # returned as a copy with its own layout, say) holds for every property; each test then judges
    # its own property (and execution, which any test may hit first).
    checker = Checker(put, properties=[prop], ensure=ensure, specials=specials, dynamic=dynamic, device=device)
    case = data.draw(strategy, label="graph")
    verdict = checker.check(case.gm, case.example_inputs, case.symbolic)
    record_fire(verdict)
    mine = [v for v in verdict.violations if v.property == EXECUTION or v.property.split(":")[0] == prop]
    assert not mine, (f"{put.name} violates {prop}:\n" + "\n".join(f"{v.property}: {v.message}" for v in mine)
                      + f"\ngraph after the pass:\n{verdict.graph_after}")


@pytest.mark.parametrize("prop", ["validity", "values", "mutations", "aliasing"])
@given(data=st.data())
def test_property(fx_options, data, prop):
    """The pass keeps ``prop`` on every generated graph (and never raises or returns a non-graph)."""
    _check(fx_options, data, prop)


@given(data=st.data())
def test_dynamic(fx_options, data):
    """With ``--fx-dynamic``: on graphs over symbolic sizes the result holds at every size (``dynamic``)."""
    if not fx_options[4]:
        pytest.skip("no --fx-dynamic given")
    _check(fx_options, data, "dynamic")


@given(data=st.data())
def test_contracts(fx_options, data):
    """Every ``--fx-ensure`` contract holds on the pass's result."""
    if not fx_options[1]:
        pytest.skip("no --fx-ensure given")
    _check(fx_options, data, "contracts")

"""The reference lowering passes, verified like any third-party pass: through ``conformance.verify``.

Each pass is checked for what it promises on functional and on mutating graphs (every one of them
must survive in-place writes, views and metadata mutation, not only DCE and CSE), plus
idempotence and determinism; ``repair_input_as_output`` also under ``--ensure
no-input-as-output``. The default registry pipeline and a reference ``PassManager`` running the
passes are verified the same way. The Hypothesis profile sets the budget: 4x its max_examples per
run in make sweep's cases (one run is one pass over cheap graphs), 2x and unfocused in make test's
(``_search``); a derandomized profile fixes the seed.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from conformance import verify
from reference_lowering.passes import (
    DEFAULT_LOWERING_PASSES,
    PassManager,
    pass_result_wrapper,
    registry,
)

from ._tiers import spread

pytestmark = pytest.mark.conformance

PROPERTIES = ("validity", "values", "mutations", "aliasing", "idempotence", "determinism")  # + contracts

# What each pass promises beyond the default properties: one row per pass.
ENSURES = {
    "repair_input_as_output": ("no-input-as-output",),  # Torch-TensorRT's rule, the pass's whole point
}
# The passes whose job is removing dead code (verify(dce_pass=True)): a graph one only cleaned up counts.
DCE_PASSES = {"eliminate_dead_code"}


def _search(request) -> dict:
    """verify()'s budget, seed and focus. make sweep's cases: 4x the profile's examples, trigger
    discovery on. make test's: 2x (50 graphs under ci) and no discovery (focus="none"), which took
    about 5 s of CPU a pass with an empty FX_CONFORMANCE_CACHE, more than the graphs (2-core AMD
    EPYC). Unfocused, at seed 0, DCE changed 33 of 50 functional graphs, view_to_reshape 4 of 50
    mutating ones (23 focused), the registry pipeline 44 and the PassManager 49."""
    profile = settings.default
    sweep = request.node.get_closest_marker("sweep") is not None
    return dict(max_examples=(4 if sweep else 2) * profile.max_examples, seed=0 if profile.derandomize else None,
                focus="auto" if sweep else "none")


def _assert_verified(request, target, graphs, ensure=(), dce_pass=False):
    search = _search(request)
    max_examples = search["max_examples"]
    result = verify(target, graphs=graphs, ensure=ensure, properties=PROPERTIES, timeout=30, dce_pass=dce_pass,
                    **search)
    assert result.ok, "\n\n".join(
        f"{v.property}: {v.message}\ngraph before:\n{v.graph_before}\ngraph after:\n{v.graph_after}\n"
        f"repro: {v.repro_path}" for v in result.violations) + f"\n(seed {result.seed})"
    assert result.examples >= max_examples
    assert not result.vacuous, f"{result.fire_text}: no counterexample, but nothing verified (seed {result.seed})"


def _pass_cases():
    """Each pass on both graph kinds (DCE, which the pipeline runs twice, once: a second case would be
    the same search). make test checks two of these fourteen cases, evenly spread
    (conformance/suite/_tiers.py): DCE on functional graphs and view_to_reshape on mutating ones;
    the others are ``sweep`` cases. In make test every pass is still
    verified on both kinds inside the pipeline: test_default_registry_pipeline (functional graphs)
    and test_pass_manager_running_reference_passes (mutating) run them all, in the default order,
    the repair pass's contract included."""
    passes = list({p.__name__: p for p in DEFAULT_LOWERING_PASSES}.values())
    cases = [(p, graphs) for p in passes for graphs in ("functional", "mutating")]
    return spread(cases, 2, ids=lambda p, graphs: f"{p.__name__}-{graphs}")


@pytest.mark.parametrize("lowering_pass, graphs", _pass_cases())
def test_reference_pass(request, lowering_pass, graphs):
    """The pass keeps every property on generated graphs, and its contract where it has one."""
    _assert_verified(request, lowering_pass, graphs, ENSURES.get(lowering_pass.__name__, ()),
                     dce_pass=lowering_pass.__name__ in DCE_PASSES)


@pytest.mark.parametrize("graphs", spread(["functional", "mutating"], 1))
def test_default_registry_pipeline(request, graphs):
    """All reference passes in the default order, as Torch-TensorRT's lowering would run them: the
    result still has no input as an output (the last pass repairs what earlier ones exposed). make
    test runs it on functional graphs; on mutating graphs the same passes in the same order are
    verified there by test_pass_manager_running_reference_passes (make sweep runs this one too)."""
    _assert_verified(request, registry.apply_lowering_passes, graphs, ("no-input-as-output",))


def test_pass_manager_running_reference_passes(request):
    """A reference PassManager (wrapped passes, two fixpoint steps, lint and checks after each pass)
    is itself a pass the harness accepts and verifies."""
    wrapped = [pass_result_wrapper(_bind(p)) for p in DEFAULT_LOWERING_PASSES]
    manager = PassManager(wrapped, steps=2, run_checks_after_each_pass=True)
    _assert_verified(request, manager, "mutating", ("no-input-as-output",))


def _bind(lowering_pass):
    def run(gm):
        return lowering_pass(gm, ())

    run.__name__ = lowering_pass.__name__
    return run

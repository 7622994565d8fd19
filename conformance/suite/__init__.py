"""The conformance run (``make conformance``, ``fx-conformance run``): pytest modules, one per contract area.

They verify the reference implementations (the pass infrastructure, the reference and lowering
passes, functionalization, the pointwise lowering, the symbolic rewrites), torch's own passes in
the IRs and calling forms their pipelines use, with the torch findings they revealed as strict
xfails (``test_torch_passes.py``), and, with ``--fx-pass``, a third-party pass
(``test_third_party_pass.py``); ``_tiers.py`` says which cases ``make test`` checks.
"""

"""This repository's own test runs: the longest test files are collected first.

``make test`` runs each file whole in one pytest-xdist worker (``--dist loadfile``, the Makefile
says why), handing the files out in collection order (``--no-loadscope-reorder``: by default xdist
hands them out by their number of tests, which sent the 2-test, 27 s tests/test_gpu_targets.py out
last, and one worker ran it alone for 23 s): the longest first and the short ones behind them keep
both workers busy to the end. The order is by each file's measured time in a fresh clone's ``make
test`` (a cold discovery cache, 2-core AMD EPYC), longest first, files of 5 s and more; files not
listed keep pytest's order after them.
Nothing here imports torch, and nothing here changes what a test does.
"""

LONGEST_FIRST = (
    "tests/test_custom_ops.py", "tests/test_matcher_corpus.py", "tests/test_cli_verify.py", "tests/test_device.py", "tests/test_ir.py",
    "tests/test_dynamic.py", "tests/test_op_families.py", "tests/test_search.py",
    "conformance/suite/test_torch_passes.py", "tests/test_planted.py", "tests/test_gpu_targets.py",
    "tests/test_strategies.py", "tests/test_database.py", "tests/test_patterns.py", "tests/test_docs.py",
    "tests/test_campaign.py", "tests/test_torch_ir.py", "tests/test_aimed_draws.py",
    "conformance/suite/test_pointwise_lowering.py", "tests/test_seeds.py", "tests/test_pointwise_table.py",
    "tests/test_campaign_ray.py", "tests/test_higher_order_ops.py", "tests/test_drawn_regions.py",
    "tests/test_symbolic.py", "tests/test_isolation.py", "tests/test_real_pass_fire.py",
    "tests/test_generator_balance.py", "tests/test_nightly.py", "tests/test_drawn_hops.py",
    "conformance/suite/test_reference_passes.py", "tests/test_catalog.py", "tests/test_cuda_run.py",
    "conformance/suite/test_torch_passes_dynamic.py", "benchmarks/test_strategies.py",
    "tests/test_observability.py", "conformance/suite/test_symbolic_rewrites.py", "tests/test_quiet_output.py",
    "tests/test_pointwise_helpers.py", "tests/test_adapters.py", "tests/test_drivers.py",
)


def pytest_collection_modifyitems(items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def pytest_collection_finish(session):
    """What collection imported (torch, the generator, every test module) lives as long as the run:
    it is frozen out of the garbage collector, so each full collection walks only what tests make."""
    import gc

    gc.collect()
    gc.freeze()

"""This repository's own test runs: the longest test files are collected first.

``make test`` runs each file whole in one pytest-xdist worker (``--dist loadfile``, the Makefile
says why), handing the files out in collection order: the longest first and the short ones behind
them keep both workers busy to the end. The order is by each file's measured CPU in ``make test``
(``--durations``, 2-core AMD EPYC), longest first; files not listed keep pytest's order after them.
Nothing here imports torch, and nothing here changes what a test does.
"""

LONGEST_FIRST = (
    "tests/test_cli_verify.py", "tests/test_dynamic.py", "tests/test_ir.py", "tests/test_custom_ops.py",
    "tests/test_device.py", "tests/test_search.py", "tests/test_strategies.py", "tests/test_planted.py",
    "tests/test_campaign_ray.py", "tests/test_op_families.py", "conformance/suite/test_torch_passes.py", "tests/test_docs.py",
    "tests/test_patterns.py", "tests/test_pointwise_table.py", "tests/test_gpu_targets.py",
    "tests/test_real_pass_fire.py", "tests/test_seeds.py", "conformance/suite/test_pointwise_lowering.py",
    "tests/test_torch_ir.py", "tests/test_higher_order_ops.py", "tests/test_aimed_draws.py",
    "tests/test_symbolic.py", "tests/test_isolation.py",
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

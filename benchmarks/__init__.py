"""Benchmarks, run timed by make bench and make nightly, and once as smoke tests by make test."""


def per_round(benchmark, n: int) -> int:
    """Cases a round: ``n`` when timed (make bench, make nightly); a tenth, at least 5, in make test's
    smoke run (``--benchmark-disable``), which checks that the benchmark runs and its cases pass."""
    return max(5, n // 10) if benchmark.disabled else n

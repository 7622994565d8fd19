"""pytest plugin (entry point ``pytest11``): Hypothesis profiles, a report header, and the
per-module conformance summary that ``fx-conformance run`` prints."""

from __future__ import annotations

import collections
import os

from . import profiles  # noqa: F401  (registers dev/ci/nightly before Hypothesis loads a profile)


def pytest_addoption(parser):
    group = parser.getgroup("fx-conformance")
    group.addoption("--fx-summary", action="store_true", default=False,
                    help="print a per-module pass/fail table of the conformance suite at the end")


def pytest_report_header(config):
    import hypothesis
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    profile = config.getoption("hypothesis_profile", default=None) or os.environ.get("HYPOTHESIS_PROFILE", "default")
    return (f"fx-conformance: torch {torch.__version__}, triton {triton_version}, "
            f"hypothesis {hypothesis.__version__}, profile {profile}")


class _Summary:
    def __init__(self):
        self.counts = collections.defaultdict(collections.Counter)

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            module = report.nodeid.split("::")[0]
            self.counts[module][report.outcome] += 1

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        tr.section("fx-conformance summary")
        if not self.counts:
            tr.write_line("no conformance tests ran")
            return
        width = max(len(m) for m in self.counts)
        tr.write_line(f"{'module'.ljust(width)}  passed  failed  skipped")
        for module, c in sorted(self.counts.items()):
            tr.write_line(f"{module.ljust(width)}  {c['passed']:6d}  {c['failed']:6d}  {c['skipped']:7d}")
        total = sum(self.counts.values(), collections.Counter())
        tr.write_line(f"{'total'.ljust(width)}  {total['passed']:6d}  {total['failed']:6d}  {total['skipped']:7d}")


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance: a conformance-suite check")
    if config.getoption("fx_summary", default=False):
        config.pluginmanager.register(_Summary(), "fx-conformance-summary")

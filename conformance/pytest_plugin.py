"""pytest plugin (entry point ``pytest11``): Hypothesis profiles, a report header, and the
per-module conformance summary that ``fx-conformance run`` prints."""

from __future__ import annotations

import collections
import os
import pathlib

import pytest

from . import profiles  # noqa: F401  (registers fx-dev/fx-ci/fx-nightly before Hypothesis loads a profile)
from ._result import SPECIALS


THIRD_PARTY_MODULE = pathlib.Path(__file__).resolve().parent / "suite" / "test_third_party_pass.py"


def pytest_addoption(parser):
    group = parser.getgroup("fx-conformance")
    group.addoption("--fx-summary-json", default=None, metavar="PATH",
                    help="also write the per-module conformance counts as JSON (for nightly reports)")
    group.addoption("--fx-summary", action="store_true", default=False,
                    help="print a per-module pass/fail table of the conformance suite at the end")
    group.addoption("--fx-pass", default=None, metavar="TARGET",
                    help="verify this pass (pkg.mod:attr or file.py:attr) with the conformance suite")
    group.addoption("--fx-graphs", choices=("functional", "mutating"), default="functional",
                    help="graphs for --fx-pass: functional (default) or mutating")
    group.addoption("--fx-ensure", action="append", default=[], metavar="NAME",
                    help="a contract --fx-pass must keep (repeatable)")
    group.addoption("--fx-specials", choices=SPECIALS, default="strict",
                    help="special-values policy for --fx-pass: strict (default) or relaxed (see fx-conformance "
                         "verify --help)")
    group.addoption("--fx-signature", default=None, help="the calling form of --fx-pass (default: detected)")
    group.addoption("--fx-settings-factory", default=None, metavar="PKG.MOD:FN",
                    help="settings factory for an fn(gm, settings) --fx-pass")
    group.addoption("--fx-pass-arg", action="append", default=[], metavar="NAME=VALUE",
                    help="an extra keyword argument for --fx-pass (repeatable; as fx-conformance verify --pass-arg)")
    group.addoption("--fx-context", default=None, metavar="PKG.MOD:FN",
                    help="a context-manager factory --fx-pass runs inside (as fx-conformance verify --context)")
    group.addoption("--fx-focus", default="auto", metavar="auto|none|OPS",
                    help="what the graphs for --fx-pass draw more of (as fx-conformance verify --focus)")
    group.addoption("--fx-ops", default=None, metavar="OPS",
                    help="what the graphs for --fx-pass are drawn of, your own ops among them (as fx-conformance "
                         "verify --ops: mylib, mylib::rms_norm,...)")
    group.addoption("--fx-ir", choices=("aten", "post-grad", "export", "core-aten", "export-module", "dynamo", "pre-dispatch", "torch"), default="aten",
                    help="the IR the graphs for --fx-pass are drawn in (as fx-conformance verify --ir)")
    group.addoption("--fx-requires-grad", action="store_true", default=False,
                    help="inputs and constants that require grad (as fx-conformance verify --requires-grad)")
    group.addoption("--fx-dynamic", action="store_true", default=False,
                    help="graphs over symbolic sizes, and the dynamic property (as fx-conformance verify --dynamic)")
    group.addoption("--fx-device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="where --fx-pass's graphs are drawn and run: auto (CUDA where present, as fx-conformance "
                         "verify --device), cpu or cuda")
    group.addoption("--fx-allow-vacuous", action="store_true", default=False,
                    help="exit 0, not 4, when --fx-pass changed none of the graphs (or only removed dead code)")
    group.addoption("--fx-dce-pass", action="store_true", default=False,
                    help="removing dead code is --fx-pass's job: a graph it only cleaned up counts as one it acted "
                         "on (as fx-conformance verify --dce-pass; by default such a run is vacuous)")
    group.addoption("--fx-db", default=None, metavar="PATH|redis://host:port/N",
                    help="an example database shared between runs and machines (several comma-separated): each "
                         "Hypothesis test and each suite row's search replays its saved failures first and saves "
                         "the ones it finds (as fx-conformance verify --db)")
    group.addoption("--fx-db-readonly", action="store_true", default=False,
                    help="with --fx-db: replay, write nothing (CI)")


# --fx-db and --fx-db-readonly as verify() takes them (db=, db_readonly=), for the suite's own searches
# (conformance/suite/test_torch_passes.py's rows); empty without --fx-db
DATABASE: dict = {}


_UNKEYED = {"fx_pass", "fx_device", "fx_db", "fx_db_readonly", "fx_summary", "fx_summary_json", "fx_allow_vacuous",
            "fx_dce_pass"}


def plugin_search_key(options: dict, device: str) -> bytes:
    """The database key of ``--fx-pass``'s searches: the pass, the device type and every ``--fx-*``
    option but those that only say where results go (``options``: pytest's option namespace as a
    dict), so an option added later keys the search too and a draw it changes is never replayed
    under another's key."""
    from .search.database import key_of

    keyed = {name: value for name, value in options.items() if name.startswith("fx_") and name not in _UNKEYED}
    return key_of("pass", options.get("fx_pass"), device, keyed)


class _Database:
    """``--fx-db``: each Hypothesis test of the run gets the database, under a key of its own: its node
    id, and for ``--fx-pass``'s property tests the pass and the options (``plugin_search_key``), so
    two passes, IRs or devices never replay each other's failures."""

    def __init__(self, config):
        from ._errors import UsageError
        from .search.database import open_database

        try:
            self.db = open_database(config.getoption("fx_db"), config.getoption("fx_db_readonly"))
        except UsageError as exc:
            raise pytest.UsageError(f"--fx-db: {exc}") from None
        self.config = config

    def key(self, item) -> bytes:
        import hashlib

        if pathlib.Path(str(item.fspath)).resolve() == THIRD_PARTY_MODULE and self.config.getoption("fx_pass"):
            device = self.config.getoption("fx_device")
            if device == "auto":
                import torch

                device = "cuda" if torch.cuda.is_available() else "cpu"
            return plugin_search_key(vars(self.config.option), device) + b"." + item.name.encode()
        return b"fx-conformance.test." + hashlib.sha256(item.nodeid.encode()).hexdigest()[:32].encode()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        test = getattr(item, "obj", None)
        if not hasattr(test, "hypothesis") or not hasattr(test, "_hypothesis_internal_use_settings"):
            yield
            return
        from hypothesis import settings

        before = test._hypothesis_internal_use_settings, test.__dict__.get("_hypothesis_internal_database_key")
        test._hypothesis_internal_use_settings = settings(before[0], database=self.db)
        test._hypothesis_internal_database_key = self.key(item)
        try:
            yield
        finally:
            test._hypothesis_internal_use_settings = before[0]
            if before[1] is None:
                test.__dict__.pop("_hypothesis_internal_database_key", None)
            else:
                test._hypothesis_internal_database_key = before[1]


def pytest_report_header(config):
    """Versions and profile on every run (read from the installed distributions: nothing imported);
    the device, whose query imports torch, where the run asks for fx-conformance (``--fx-pass``, or
    ``--fx-summary`` as ``fx-conformance run`` passes it)."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    profile = config.getoption("hypothesis_profile", default=None) or os.environ.get("HYPOTHESIS_PROFILE", "default")
    line = (f"fx-conformance: torch {installed('torch')}, triton {installed('triton')}, "
            f"hypothesis {installed('hypothesis')}, profile {profile}")
    if config.getoption("fx_pass", default=None) or config.getoption("fx_summary", default=False) \
            or config.getoption("fx_summary_json", default=None):
        import torch

        cuda = torch.cuda.is_available()
        line += f", device {f'cuda ({torch.cuda.get_device_name(0)})' if cuda else 'cpu (no CUDA device)'}"
    lines = [line]
    target = config.getoption("fx_pass", default=None)
    if target:
        ensure = ", ".join(config.getoption("fx_ensure")) or "none"
        lines.append(f"fx-conformance: verifying {target} on {config.getoption('fx_graphs')} graphs, "
                     f"contracts: {ensure}, specials: {config.getoption('fx_specials')}, "
                     f"device: {config.getoption('fx_device')}")
    return lines


# Whether the pass under --fx-pass changed each graph, and whether only by removing dead code, per test
# (filled by the third-party suite in the process that ran the test; the counts travel to the
# controller in the report's user_properties).
FIRE: dict = collections.defaultdict(list)
VACUOUS_EXIT = 4
_COUNTS = ("fx_examples", "fx_changed", "fx_dead_code_only")


def record_fire(verdict) -> None:
    """Log one checked graph of the running test: whether the pass changed it, and whether that change
    was dead-code removal alone."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    changed = bool(verdict.changed)
    FIRE[test].append((changed, changed and bool(verdict.dead_code_only)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call" and item.nodeid in FIRE:
        runs = FIRE.pop(item.nodeid)
        outcome.get_result().user_properties += [("fx_examples", len(runs)), ("fx_changed", sum(c for c, _ in runs)),
                                                 ("fx_dead_code_only", sum(d for _, d in runs))]


class _Fire:
    """``--fx-pass``: the fire line at the end (rewrites and dead-code-only changes apart), and exit
    status 4 when the pass rewrote no graph (changed none, with ``--fx-dce-pass``)."""

    def __init__(self, allow_vacuous: bool, dce_pass: bool = False):
        self.counts = collections.Counter()
        self.allow_vacuous = allow_vacuous
        self.dce_pass = dce_pass

    @pytest.hookimpl(hookwrapper=True, trylast=True)  # inside Hypothesis's own wrapper, which it chains to
    def pytest_runtest_call(self, item):
        """Counts the graphs Hypothesis generated, not those it ran while shrinking a failure."""
        from .search.fire import generated_examples

        with generated_examples() as generated:
            yield
        if generated.get("examples") is not None and item.nodeid in FIRE:
            del FIRE[item.nodeid][generated["examples"]:]

    def pytest_runtest_logreport(self, report):
        for key, value in getattr(report, "user_properties", ()):
            if key in _COUNTS:
                self.counts[key] += value

    def result(self):
        from ._result import VerifyResult

        return VerifyResult(target="", examples=self.counts["fx_examples"], changed=self.counts["fx_changed"],
                            changed_dead_code_only=self.counts["fx_dead_code_only"],
                            options={"dce_pass": self.dce_pass})

    def vacuous(self) -> bool:
        result = self.result()
        return result.examples > 0 and result.acted == 0

    def pytest_terminal_summary(self, terminalreporter):
        result = self.result()
        if result.examples:
            terminalreporter.write_line(result.fire_text)
        if self.vacuous():
            terminalreporter.write_line("VACUOUS: " + result.vacuous_text
                                        + ("" if not self.allow_vacuous else " (allowed: --fx-allow-vacuous)"))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.vacuous() and not self.allow_vacuous and exitstatus == 0:
            session.exitstatus = VACUOUS_EXIT


class _Summary:
    def __init__(self, json_path=None, profile=None):
        self.counts = collections.defaultdict(collections.Counter)
        self.json_path, self.profile = json_path, profile
        self.known = []  # the xfails: each a known divergence or finding, with the reason its mark gives

    def pytest_sessionfinish(self, session, exitstatus):
        if self.json_path:
            import json
            import pathlib

            columns = ("passed", "failed", "skipped", "xfailed")
            modules = {m: {k: c[k] for k in columns} for m, c in sorted(self.counts.items())}
            total = {k: sum(c[k] for c in self.counts.values()) for k in columns}
            path = pathlib.Path(self.json_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            doc = {"profile": self.profile, "modules": modules, "total": total, "exitstatus": int(exitstatus),
                   "known": sorted(self.known, key=lambda k: k["test"])}
            path.write_text(json.dumps(doc, indent=2) + "\n")

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            module = report.nodeid.split("::")[0]
            # An xfail is a known divergence (e.g. a torch bug the suite documents): its own column.
            outcome = "xfailed" if report.skipped and hasattr(report, "wasxfail") else report.outcome
            self.counts[module][outcome] += 1
            if outcome == "xfailed":
                self.known.append({"test": report.nodeid, "reason": report.wasxfail.removeprefix("reason: ")})

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        tr.section("fx-conformance summary")
        if not self.counts:
            tr.write_line("no conformance tests ran")
            return
        width = max(len(m) for m in self.counts)
        columns = ("passed", "failed", "skipped", "xfailed")
        tr.write_line(f"{'module'.ljust(width)}  " + "  ".join(columns))
        rows = sorted(self.counts.items()) + [("total", sum(self.counts.values(), collections.Counter()))]
        for module, c in rows:
            tr.write_line(f"{module.ljust(width)}  " + "  ".join(f"{c[k]:{len(k)}d}" for k in columns))


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance: a conformance-suite check")
    # `pytest --fx-pass=X` with no test paths runs the third-party module, wherever pytest runs.
    if config.getoption("fx_pass", default=None) and config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = [str(THIRD_PARTY_MODULE)]
    if config.getoption("fx_pass", default=None):
        config.pluginmanager.register(_Fire(config.getoption("fx_allow_vacuous", default=False),
                                            config.getoption("fx_dce_pass", default=False)), "fx-conformance-fire")
    DATABASE.clear()
    if config.getoption("fx_db", default=None):
        config.pluginmanager.register(_Database(config), "fx-conformance-database")
        DATABASE.update(db=config.getoption("fx_db"), db_readonly=config.getoption("fx_db_readonly"))
    elif config.getoption("fx_db_readonly", default=False):
        raise pytest.UsageError("--fx-db-readonly needs --fx-db PATH or redis://host:port/N: there is no database "
                                "to read")
    if config.getoption("fx_summary", default=False) or config.getoption("fx_summary_json", default=None):
        profile = config.getoption("hypothesis_profile", default=None)
        config.pluginmanager.register(_Summary(config.getoption("fx_summary_json", default=None), profile),
                                      "fx-conformance-summary")

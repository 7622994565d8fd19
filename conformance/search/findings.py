"""What a search found, and what is made of it: ``_Found`` keeps the smallest failing example per
property (by ``_size``: call nodes, then input elements), the graphs the pass ran on (``fire.Run``s),
timeouts, graphs that did not run as drawn, known violations, the dynamic property's counts and the
warnings met; it crosses a pipe from a forked driver without its graphs. ``_fill`` copies it into the
``VerifyResult`` and ``_order`` ranks the violations; ``_write_repros`` writes each minimal
counterexample as a standalone script (``repro.py``), saying how the search drew it
(``searched_text``).
"""

from __future__ import annotations

from .._result import EXECUTION, Verdict, VerifyResult
from .._warning_log import PassWarnings, WarningLog
from ..repro import write_repro
from .fire import tally


class _Found:
    """Smallest failing example per property seen so far, and the graphs run (picklable for workers)."""

    def __init__(self):
        self.best = {}  # property -> (size, violation, case); case is None once it crossed a pipe
        self.runs = []  # one fire.Run per graph the pass ran on; shrinking runs are cut by settle()
        self.shrink_runs = 0
        self.timeouts = 0
        self.unrunnable = []  # why drawn graphs did not run as given (OriginalFailed): rejected, never verdicts
        self.interrupted = False
        self.known = {}  # (property, first line) -> violation, for violations verify(known=) accepts
        self.dynamic = {}  # dynamic=True: sizes run, prover verdicts and their time, summed (add_dynamic)
        self.generator_crashes = []  # torch killed the generator's eager call: {"call", "death", "op"} each
        self.warnings = WarningLog()  # raised while graphs were drawn and run: counted, never shown
        self.pass_warnings = PassWarnings()  # raised by the pass: each kind with the example that first did
        self.user_ops = {}  # verify(ops=): op name -> strategies.CustomHealth of the calls drawn

    @property
    def examples(self) -> int:
        return len(self.runs)

    def settle(self, counts: dict) -> None:
        """Keep the first ``counts["examples"]`` runs (what Hypothesis generated); the rest shrank
        failures (``counts["shrinking"]``) or replayed the minimal ones."""
        if "examples" in counts:
            self.shrink_runs += counts["shrinking"]
            del self.runs[counts["examples"]:]

    def checked(self) -> dict:
        """Property -> examples it was checked on."""
        counts: dict = {}
        for run in self.runs:
            for p in run.checked:
                counts[p] = counts.get(p, 0) + 1
        return counts

    def __getstate__(self):  # graphs stay in the driver that found them (it wrote their repros)
        state = dict(self.__dict__)
        state["best"] = {p: (size, v, None) for p, (size, v, _) in self.best.items()}
        return state

    def add_known(self, violations: list) -> None:
        for v in violations:
            self.known.setdefault((v.property, v.message.splitlines()[0]), v)

    def add_dynamic(self, stats: dict) -> None:
        d = self.dynamic
        d["graphs"] = d.get("graphs", 0) + stats.get("graphs", 1)
        d["sizes_run"] = d.get("sizes_run", 0) + stats["sizes_run"]
        d["prove_ms"] = round(d.get("prove_ms", 0.0) + stats["prove_ms"], 3)
        proofs = d.setdefault("proofs", {"proved": 0, "refuted": 0, "unknown": 0})
        for k, n in stats["proofs"].items():
            proofs[k] += n

    def add(self, verdict: Verdict, case, size) -> list:
        new = []
        for v in verdict.violations:
            old = self.best.get(v.property)
            if old is None:
                new.append(v)
            if old is None or size < old[0]:
                v.example = old[1].example if old else self.examples  # the example that first showed it
                self.best[v.property] = (size, v, case)
        return new


def _size(case) -> tuple:
    nodes = sum(1 for n in case.gm.graph.nodes if n.op == "call_function")
    return nodes, sum(t.numel() for t in case.example_inputs)


def _fill(result: VerifyResult, found: _Found, prior: _Found | None = None) -> None:
    result.examples, result.shrink_runs = found.examples, found.shrink_runs
    noise, warned = WarningLog(), PassWarnings()
    for f in (prior, found):
        if f is not None:
            noise.absorb(f.warnings.kinds())
            warned.merge(f.pass_warnings)
    result.warnings, result.pass_warnings = noise.kinds(), warned.listed()
    result.known = list(found.known.values())
    result.unrunnable = len(found.unrunnable)
    missing = [r.no_reference for r in found.runs if r is not None and r.no_reference]
    result.no_reference, result.no_reference_why = len(missing), list(dict.fromkeys(missing))[:3]
    result.dynamic = dict(found.dynamic) or None
    result.changed, result.changed_dead_code_only = tally(r for r in found.runs if r is not None)
    result.generator_crashes = list(found.generator_crashes)
    result.user_ops = {name: {"tried": h.tried, "ran": h.ran, "fake_disagreements": h.fake, "line": h.line(name),
                              "fault": h.fault(name)} for name, h in sorted(found.user_ops.items())}
    if result.focus.get("ops"):
        result.focus["graphs_holding"] = sum(r.held_focus for r in found.runs if r is not None)


def _order(checked):
    rank = {p: i for i, p in enumerate((EXECUTION, *checked))}
    return lambda p: rank.get(p, len(rank))


def searched_text(focus_info: dict | None, seed: int) -> str:
    """``with seed 3 over aten graphs, focused on aten.add, aten.mul (edges aten.mm -> aten.add)``: what
    a search drew, as its repro scripts say (the JSON report holds the whole focus)."""
    text = f"with seed {seed}"
    if not focus_info or focus_info.get("mode") == "none":
        return text + ", unfocused"
    ops = [o["op"] for o in focus_info.get("ops", ())]
    edges = [f"{e['producer']} -> {e['consumer']}" for e in focus_info.get("edges", ())]
    shown = ", ".join(ops[:12]) + (f" and {len(ops) - 12} more" if len(ops) > 12 else "")
    text += f", focused ({focus_info.get('mode')}) on {shown or 'no op'}"
    if edges:
        text += f" (edges {', '.join(edges[:6])}{' ...' if len(edges) > 6 else ''})"
    if focus_info.get("probes_cut"):
        text += "; discovery's probes were cut"
    return text


def _write_repros(found: _Found, put, opts, repro_dir, searched: str = "") -> None:
    if not repro_dir:
        return
    call_opts = {k: opts[k] for k in ("properties", "ensure", "preserve", "signature", "settings_factory", "device",
                                      "signed_zeros", "specials")}
    call_opts.update({k: opts[k] for k in ("pass_kwargs", "context") if opts[k]})  # only where the pass needs them
    call_opts["timeout"] = opts["timeout"]
    written = {}
    for prop, (_, v, case) in found.best.items():
        key = (id(case), prop if case is not None and case.symbolic is not None else None)
        if key not in written:
            options = call_opts
            if case is not None and case.symbolic is not None:  # the sizes it shows at, run by the repro
                options = {**call_opts, "symbolic": case.symbolic.dims, "sizes": v.sizes}
            try:
                written[key] = str(write_repro(repro_dir, gm=case.gm, example_inputs=case.example_inputs,
                                               target=put.reference, violation=v, options=options,
                                               searched=searched))
            except Exception as exc:  # noqa: BLE001 - a repro that cannot be written must not lose the finding
                v.message += f"\n  (repro script not written: {type(exc).__name__}: {exc})"
                continue
        v.repro_path = written[key]


__all__ = ["searched_text"]

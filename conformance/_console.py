"""What ``fx-conformance verify`` prints: a rich progress bar on a terminal, plain lines otherwise,
each violation as soon as it is found, and a closing summary table with the minimal graphs."""

from __future__ import annotations

import sys

from ._result import LOW_FIRE_SHARE, VerifyResult, Violation, vacuous_hint

_SHRINK_EVERY = 500  # graphs run between two progress lines while shrinking


class ConsoleReporter:
    """A ``verify(reporter=...)`` sink that writes to ``stream`` (stdout by default)."""

    def __init__(self, stream=None, rich: bool | None = None, verbose: bool = False):
        self.stream = stream or sys.stdout
        self.rich = self.stream.isatty() if rich is None else rich
        self.verbose = verbose  # list each kind of warning the run counted (-v)
        self.total, self.progress, self.task, self.last_pct = 0, None, None, -1
        self.shrinking = None  # graphs run when the last shrinking line was printed (None: nothing found yet)
        if self.rich:
            from rich.console import Console

            self.console = Console(file=self.stream)

    def _line(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def start(self, target, max_examples, options):
        self.total = max_examples
        specials = f"on ({options.get('specials', 'strict')})" if options["special_values"] else "off"
        self._line(f"fx-conformance verify {target}: up to {max_examples} examples, graphs={options['graphs']}, "
                   f"ir={options.get('ir', 'aten')}, special values {specials}, device={options['device']}"
                   + (f", near misses {options['near_misses']} a rewritten graph" if options.get("near_misses") else ""))
        if self.rich:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=self.console, transient=True)
            self.progress.start()
            self.task = self.progress.add_task("checking graphs", total=max_examples)

    def example(self, ok: bool, done: int):
        """Progress: ``k/N graphs checked`` until a violation is found; after it, Hypothesis generates
        a few more graphs and then shrinks, and which run is which is known only at the end, so
        the count is of graphs run."""
        if self.progress is not None:
            self.progress.update(self.task, completed=min(done, self.total) if self.shrinking is None else done)
            return
        if self.shrinking is not None:
            if done - self.shrinking >= _SHRINK_EVERY:
                self.shrinking = done
                self._line(f"  {done} graphs run (shrinking)")
            return
        pct = min(100, done * 100 // max(self.total, 1)) // 25 * 25
        if pct > self.last_pct and done <= self.total:
            self.last_pct = pct
            self._line(f"  {min(done, self.total)}/{self.total} graphs checked")

    def found(self, violation: Violation):
        self._line(f"  found: {violation.property}: {violation.headline} (shrinking...)")
        if self.shrinking is None:
            self.shrinking = 0
            if self.progress is not None:
                self.progress.update(self.task, description="shrinking", total=None)

    def note(self, text: str):
        self._line(f"  note: {text}")

    def warned(self, warning: dict):
        """A kind of warning the pass raised, the first time an example raised it."""
        where = "while shrinking" if warning.get("example") and warning["example"] > self.total else ""
        example = f"example {warning['example']}" if warning.get("example") else "an example"
        self._line(f"  {example}{' ' + where if where else ''}: the pass warned: {warning['category']}: "
                   f"{_first(warning['message'])}")

    def focus(self, focus: dict):
        line = focus_line(focus)
        if line:
            self._line(line)

    def finish(self, result: VerifyResult):
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        rows = [(name, str(count.checked), "VIOLATED" if count.violated else "ok")
                for name, count in result.properties.items()]
        rows += [(v.property, "-", "VIOLATED") for v in result.violations if v.property not in result.properties]
        for v in result.violations:
            self._line("")
            graph = "a minimal graph" if result.options.get("shrink", True) else "a graph (not shrunk: --no-shrink)"
            self._line(f"{v.property} violated by {graph}:")
            self._line(_indent(v.message))
            self._line("  inputs:")
            self._line(_indent(v.inputs, 4))
            self._line("  graph before the pass:")
            self._line(_indent(v.graph_before, 4))
            self._line("  graph after the pass:")
            self._line(_indent(v.graph_after or "<none>", 4))
            if v.repro_path:
                self._line(f"  repro: python {v.repro_path}")
        self._line("")
        self._table(rows)
        self._line(fire_line(result))
        if result.dynamic:
            d, p = result.dynamic, result.dynamic["proofs"]
            self._line(f"dynamic: {d['sizes_run']} runs at other sizes; z3 {p['proved']} proved, {p['refuted']} "
                       f"refuted, {p['unknown']} unknown ({d['prove_ms']:.0f} ms)")
        if result.no_reference:
            self._line(f"{result.no_reference} graphs had values judged by the dtype tolerances alone: "
                       f"{'; '.join(result.no_reference_why) or 'the fp64 reference did not run'}")
        for line in warning_lines(result, self.verbose):
            self._line(line)
        if result.unrunnable:
            self._line(f"{result.unrunnable} drawn graphs did not run as given on {result.options.get('device', 'cpu')} "
                       f"(not the pass's doing: each was replaced by another draw)")
        for name, health in result.user_ops.items():  # the user's ops: a fault of the op's own, or how they drew
            self._line(health["fault"] or f"user op {health['line']}")
        for crash in result.generator_crashes:
            self._line(f"torch finding (not the pass's): the generator's eager call {crash['call']} killed the "
                       f"drawing process ({crash['death']}); the search ran again without it")
        if result.vacuous:
            self._line(f"VACUOUS: {result.vacuous_text}; {vacuous_hint(result.options)} (seed {result.seed}, "
                       f"{result.duration_s:.1f} s)")
        elif result.ok:
            self._line(f"OK: no counterexample in {result.examples} {result.ir_text}graphs (seed {result.seed}, "
                       f"{result.duration_s:.1f} s)")
        else:
            what = "INTERRUPTED" if result.interrupted else "FAIL"
            self._line(f"{what}: {len(result.violations)} propert{'y' if len(result.violations) == 1 else 'ies'} "
                       f"violated in {result.graphs_text} (seed {result.seed}, {result.duration_s:.1f} s; rerun "
                       f"with --seed {result.seed})")

    def _table(self, rows):
        if self.rich:
            from rich.table import Table

            table = Table(title="fx-conformance summary")
            for column in ("property", "graphs checked", "result"):
                table.add_column(column)
            for row in rows:
                table.add_row(*row, style="red" if row[2] == "VIOLATED" else None)
            self.console.print(table)
            return
        widths = [max(len(r[i]) for r in rows + [("property", "graphs checked", "result")]) for i in range(3)]
        for row in [("property", "graphs checked", "result"), *rows]:
            self._line("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def fire_line(result: VerifyResult) -> str:
    """``the pass changed K of N graphs (P%)`` (its rewrites and its dead-code-only changes apart where
    it had both), with a warning when the graphs it acted on are few."""
    line = result.fire_text
    dead = result.changed_dead_code_only
    holding = (result.focus or {}).get("graphs_holding")
    if holding == 0 and result.focus.get("ops") and result.examples and dead == result.changed:  # its own ops never reached it
        ops = ", ".join(item["op"] for item in result.focus["ops"][:4])
        line += (f"; warning: none of the {result.examples} {result.ir_text}graphs held {ops} (what it looks for)"
                 + (f": {result.ir_text.strip()} tracing decomposes them away (try --ir aten, or --seed-graphs with "
                    f"a program that holds them)" if result.ir_text else "") + f"; {vacuous_hint(result.options)}")
    acted = result.acted / result.examples if result.examples else 0.0
    if 0 < acted < LOW_FIRE_SHARE:
        what = "rewrote" if not result.dce_pass and dead else "changed"
        line += (f"; warning: it {what} under {LOW_FIRE_SHARE:.0%} of them, so few graphs tested it; "
                 f"{vacuous_hint(result.options)}")
    return line


def warning_lines(result: VerifyResult, verbose: bool = False) -> list:
    """What the summary says of warnings: the pass's (each shown above with its example), and the
    run's own, counted: the search's, whose count a seed reproduces (each kind listed when
    ``verbose``), and trigger discovery's (``verbose`` only: counted where discovery ran, none
    where its result came from the cache)."""
    lines = []
    if result.pass_warnings:
        n = sum(w["count"] for w in result.pass_warnings)
        lines.append(f"the pass warned {_n(n, 'time')} ({_n(len(result.pass_warnings), 'kind')}, each shown above "
                     f"with the first example that raised it)")
    search = [k for k in result.warnings if k["where"] != "discovery"]
    discovery = [k for k in result.warnings if k["where"] == "discovery"]
    if search:
        lines.append(f"{_n(sum(k['count'] for k in search), 'warning')} from torch while drawing and running graphs: "
                     f"{_n(len(search), 'kind')}" + ("" if verbose else " (-v lists them)"))
    if verbose:
        lines += [_kind_line(k) for k in search]
        if discovery:
            lines.append(f"{_n(sum(k['count'] for k in discovery), 'warning')} while trigger discovery drew and "
                         f"probed graphs (counted where it runs, not where its result is cached): "
                         f"{_n(len(discovery), 'kind')}")
            lines += [_kind_line(k) for k in discovery]
    return lines


def _kind_line(kind: dict) -> str:
    return f"  {kind['count']} x {kind['category']} ({kind['where']}): {_first(kind['message'])}"


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _first(text: str) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def focus_line(focus: dict) -> str | None:
    """``focus: aten.log, aten.exp (code), aten.maximum (probe)``: what trigger discovery found."""
    seeds = focus.get("seeds", ()) if focus else ()
    if not focus or (focus.get("mode") == "none" and not seeds):
        return None
    groups: dict = {}
    for item in focus.get("ops", ()):
        groups.setdefault(item["how"], []).append(item["op"])
    parts = [f"{', '.join(ops)} ({how})" for how, ops in groups.items()]
    if focus.get("hops"):
        parts.append(f"{', '.join('higher_order.' + h for h in focus['hops'])} (code; drawn in every graph)")
    if focus.get("pairs"):
        parts.append(f"acts on {', '.join(p + '(x, x)' for p in focus['pairs'])} (drawn with x holding NaN or inf)")
    if "duplicates" in focus.get("structures", ()):
        parts.append("acts on an expression computed twice (probe; drawn at a third of the steps, with scalars "
                     "of the other type and across writes)")
    missing = focus.get("not_in_catalog", ())
    if missing:
        where = "only the seed graphs have it" if seeds else "so no drawn graph has it: try --seed-graphs"
        parts.append(f"{', '.join(missing)} (code; not in the op catalog, {where})")
    consts = focus.get("constants", ())
    if consts:
        parts.append(f"constants {', '.join(map(repr, consts))}")
    payoff = focus.get("payoff") or ()
    if focus.get("weak"):
        parts.append(f"focused in {focus['share']:.0%} of the graphs only (plain graphs made the pass act more "
                     f"often: {payoff[0]} of {payoff[2]}, focused {payoff[1]})")
    if focus.get("probes_cut"):
        parts.append("probing stopped at its budget of runs of the pass: ops it acts on may be missing, name "
                     "them with --focus")
    if seeds:
        parts.append(f"{len(seeds)} seed graph{'s' if len(seeds) != 1 else ''} ({', '.join(seeds)})")
    if not parts:
        return "focus: nothing found (the pass's code names no catalog op and no one-op graph changed)"
    return "focus: " + "; ".join(parts)


def _indent(text: str, n: int = 2) -> str:
    return "\n".join(" " * n + line for line in (text or "").splitlines())

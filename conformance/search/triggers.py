"""Trigger discovery: before the search, find what makes the pass act.

- *code*: the ATen ops and numeric constants the pass's code names, followed through the
  functions, classes, closures, defaults and globals of its own package (``static_triggers.py``);
- *pattern*: the targets an Inductor ``PatternMatcherPass`` keys its pattern table by (also there);
- *probe*: catalog ops whose one-op graph the pass changes;
- *chain*: ops found so far, in short drawn chains the pass changes;
- *edges*: producer -> consumer pairs the pass matches: from a pattern table's pattern graphs,
  and, confirmed by probes (graphs drawn with the pair chained), from the pairs of ops its code
  names and the pairs in the chains that made it act;
- *pairs*: ops it acts on as ``x op x`` only (the two operands ``OpSpec.pair_positions`` names:
  ``sub``'s first two, ``where``'s two after its mask);
- *structures*: where none of those made it act, whether it merges a repeated call and acts on no
  graph without one (a CSE): its focus is then duplicates (``Focus.duplicates``), not its ops;
- *payoff*: whether focused graphs make the pass act more often than plain ones. A generic pass
  (CSE, DCE) names ops in its code that are not what it acts on; focusing on them made it fire on
  fewer graphs and find its planted bug less often, so where plain graphs do clearly better (at
  least twice as many changed, and three more), or the focused graphs changed at most one where
  plain ones changed as many (functorch's CSE names the random ops it never merges), the focus
  keeps a quarter of the graphs (``WEAK_SHARE``).

The result (``Triggers``) feeds ``strategies.Focus``; it is cached per pass and catalog, in
process and on disk (``FX_CONFORMANCE_CACHE``, default ``~/.cache/fx-conformance``).

Here: ``discover()``, ``Triggers``, the dynamic kinds (the probes: the graphs drawn for them, and the
pass run on them, in a forked child or the search's worker) and the in-process memory of results.
Reading the pass's code is ``static_triggers.py``; the on-disk cache, its key and its lock,
``trigger_cache.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import operator
import pickle
import sys
import time

import torch
from hypothesis import HealthCheck, Phase, given, settings, seed as hseed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

import strategies
from strategies import OPS, Focus, graphs, rows_named
from strategies._catalog import vocabulary as C
from strategies._catalog.custom import custom_rows, defining_function, rule_of
from strategies._catalog.ops import DEQUANTIZE, QUANTIZE
from strategies._draw.edges import tensor_arguments
from strategies._draw.case import GraphCase
from strategies._draw.support import cpu_support

from .._errors import HarnessError
from ..copies import clone_inputs, graph_run
from ..changes import what_changed
from ..deadlines import ExampleTimeout, deadline
from .isolate import ChildDied, current_worker, fork_is_safe, run_forked
from .static_triggers import op_name, packet_name, static_triggers
from ._wire import dumps_case, loads_case
from .trigger_cache import (_cache_key, _discovering, probe_graphs_path, read_entry, read_probe_graphs, write_entry,
                            write_probe_graphs)

_PROBES_PER_OP = 2
_CHAIN_EXAMPLES = 24
_PAYOFF_EXAMPLES = 24
_EDGE_EXAMPLES = 12  # graphs holding a candidate edge drawn to confirm it (per argument of the consumer)
_EDGE_RUNS = 3  # independent draws an edge probe may take while it holds too few graphs (_edge_acts)
_MAX_EDGE_OPS = 4  # pairs of the first this many code-named ops are candidate edges (16 at most)
WEAK_SHARE = 0.25  # the share of focused graphs when plain graphs made the pass act clearly more often
# Probing runs the pass 410-500 times (measured on Inductor's and torch.fx's passes). It stops after
# this many runs of the pass, a count and not a time, so that a seed draws the same graphs on a
# loaded machine as on an idle one (the static findings stand, and the report says the probes were
# cut); a pass that takes 0.2 s per graph keeps the user waiting a minute or two once, then the cache
# answers.
PROBE_BUDGET = 1000
# A forked prober that has not answered after this long (a hang in native code the per-probe timeout
# cannot end) is killed, as a pass crashing on a probe is: the search meets it itself.
PROBE_LIMIT_S = 900.0


@dataclasses.dataclass
class Triggers:
    """What discovery found: ``ops`` as ``(name, how)`` pairs in the catalog, the ops the code names
    that the catalog lacks, and constants; ``rows`` are the catalog rows to focus on."""

    ops: list = dataclasses.field(default_factory=list)
    not_in_catalog: list = dataclasses.field(default_factory=list)
    constants: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    probes_cut: bool = False  # probing stopped at PROBE_BUDGET runs of the pass
    share: float = Focus.share  # of graphs focused: WEAK_SHARE when plain graphs did better
    payoff: tuple = ()  # (plain, focused, n): of n graphs each, how many the pass changed
    # (producer, consumer, how, argument): chained in focus, the producer at the consumer's argument of
    # that schema name (None: its first operand)
    edges: list = dataclasses.field(default_factory=list)
    acting: list = dataclasses.field(default_factory=list)  # rows whose one-op graphs the pass changes
    hops: list = dataclasses.field(default_factory=list)  # higher-order ops the code names: drawn (graphs(hops=))
    pairs: list = dataclasses.field(default_factory=list)  # rows the pass acts on as x op x (of ``acting`` too)
    # structures it acts on where it names no op it acts on: "duplicates" (an expression computed twice: a CSE)
    structures: list = dataclasses.field(default_factory=list)

    @property
    def rows(self) -> tuple:
        """In catalog order, whatever order discovery found them in (a set's order changes from
        process to process, and the focus table's order decides the draws: a seed must reproduce)."""
        found = {row for name, _ in self.ops for row in rows_named(name)}
        return tuple(row for row in OPS if row in found)

    def to_dict(self) -> dict:
        return {"ops": [{"op": n, "how": h} for n, h in self.ops], "not_in_catalog": list(self.not_in_catalog),
                "constants": list(self.constants), "seconds": round(self.seconds, 3), "cached": self.cached,
                "probes_cut": self.probes_cut, "share": self.share, "payoff": list(self.payoff),
                "weak": self.share < Focus.share,
                "edges": [{"producer": p, "consumer": c, "how": h, "argument": a} for p, c, h, a in self.edges],
                "acting": list(self.acting), "hops": list(self.hops), "pairs": list(self.pairs),
                "structures": list(self.structures)}

    @classmethod
    def from_dict(cls, data: dict) -> Triggers:
        """The inverse of ``to_dict`` (a cache entry; fields it lacks take their defaults)."""
        return cls(ops=[(p["op"], p["how"]) for p in data["ops"]], not_in_catalog=data["not_in_catalog"],
                   constants=data["constants"], seconds=data["seconds"], probes_cut=data.get("probes_cut", False),
                   share=data.get("share", Focus.share), payoff=tuple(data.get("payoff", ())),
                   edges=[(e["producer"], e["consumer"], e["how"], e.get("argument")) for e in data.get("edges", ())],
                   acting=list(data.get("acting", ())), hops=list(data.get("hops", ())),
                   pairs=list(data.get("pairs", ())), structures=list(data.get("structures", ())))

    def focus(self) -> Focus | None:
        # a pass found acting on duplicates acted on none of the ops it names: drawing them would crowd
        # out the duplicates (a CSE naming the ops it guards against, _unsafe_view: 0 of 24 focused
        # graphs changed with them, 8 without)
        rows = () if "duplicates" in self.structures else self.rows
        edges = tuple((p, c, a) for p, c, _, a in self.edges)
        acting = tuple(name for name in self.acting if any(r.name == name for r in rows))
        pairs = tuple(name for name in self.pairs if any(r.name == name for r in rows))
        return Focus(ops=rows, scalars=tuple(self.constants), share=self.share, edges=edges,
                     acting=acting, hops=tuple(self.hops), pairs=pairs, duplicates="duplicates" in self.structures) \
            if rows or self.hops or self.structures else None


# --- dynamic: run the pass on small graphs --------------------------------------------------------


class _Enough(BaseException):
    """Ends a ``_draw_cases`` early. Not an Exception, so Hypothesis neither reports nor replays it: it
    leaves the run at once, and the cases drawn so far are the ones the whole draw starts with."""


def _draw_cases(strategy, n: int, seed_value: int, until=None) -> list:
    """The first ``n`` cases ``strategy`` draws at ``seed_value`` (fewer where no more can be drawn), or
    those up to the first for which ``until(case)`` is true."""
    cases = []

    @settings(max_examples=n, database=None, deadline=None, derandomize=False, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck))
    @hseed(seed_value)
    @given(strategy)
    def collect(case):
        cases.append(case)
        if until is not None and until(case):
            raise _Enough

    try:
        collect()
    except (Unsatisfiable, _Enough):  # Unsatisfiable: an op no small graph can hold; the search still draws it
        pass
    return cases


@functools.lru_cache(maxsize=2)
def plain_cases(mutations: bool) -> tuple:
    """Plain graphs (as ``verify()`` draws them) to weigh a focus against (drawn once per process, and
    stored with the probe graphs)."""
    cases = _stored_draw(("plain", mutations), graphs(mutations=mutations, random=True), _PAYOFF_EXAMPLES, 1)
    _STORE.flush()
    return cases


def probe_cases(mutations: bool) -> tuple:
    """Per catalog row, a few one-op graphs (each row's drawn once per process: discovery with and
    without mutations shares the rows both probe; and once per generator and machine: they are
    stored, ``trigger_cache.read_probe_graphs``)."""
    cpu = cpu_support()  # discovery runs on the CPU: rows without a CPU kernel (CUDA's attention) are not probed
    cases = tuple((row, _row_probes(row, i)) for i, row in enumerate(OPS)
                  if (mutations or row.category != "inplace") and cpu.runs_row(row))
    _STORE.flush()
    return cases


class _ProbeStore:
    """This process's view of the stored probe graphs (``trigger_cache.read_probe_graphs``): the file as
    read, read again on a miss where it changed since (a forked prober or another process wrote it),
    and what this process drew, until ``flush`` writes it (discovery does when it is done)."""

    def __init__(self):
        self._read, self._stamp, self._drawn = {}, None, {}

    def get(self, key):
        if key not in self._read and key not in self._drawn:
            path = probe_graphs_path()
            try:
                stat = path.stat()
                stamp = (path, stat.st_mtime_ns, stat.st_size)
            except OSError:
                stamp = (path, None, None)
            if stamp != self._stamp:
                self._read, self._stamp = read_probe_graphs(), stamp
        return self._drawn.get(key, self._read.get(key))

    def keep(self, key, entry) -> None:
        self._drawn[key] = entry

    def flush(self) -> None:
        if self._drawn:
            write_probe_graphs(self._drawn)
            self._read.update(self._drawn)
            self._drawn = {}


_STORE = _ProbeStore()


def _stored_draw(what: tuple, strategy, n: int, seed_value: int = 0, until=None) -> tuple:
    """The cases ``_draw_cases(strategy, n, seed_value, until)`` shows ``until`` (all of them where it is
    None), from the store where a draw of the same (``what``: what the strategy depends on) kept them.
    A draw that ``until`` ended is kept as a prefix: the stored cases are tried first and, where
    ``until`` asks for more, the draw runs again from its start, showing only the cases it had not
    (its first ones are the stored ones). A case the wire format cannot carry keeps none."""
    key = (*what, n, seed_value)
    seen: list = []
    entry = _STORE.get(key)
    if entry is not None:
        complete, blobs = entry
        for case in _cases_of(blobs) or ():
            seen.append(case)
            if until is not None and until(case):
                return tuple(seen)
        if complete and _cases_of(blobs) is not None:
            return tuple(seen)
    tried, drawn, stopped = len(seen), [], [False]

    def step(case) -> bool:
        drawn.append(case)
        stopped[0] = len(drawn) > tried and until is not None and until(case)
        return stopped[0]
    _draw_cases(strategy, n, seed_value, until=step)
    try:
        _STORE.keep(key, (not stopped[0], [pickle.dumps((dumps_case(c.gm, c.example_inputs), c.features, c.recipes,
                                                         c.device)) for c in drawn]))
    except Exception:  # noqa: BLE001 - HarnessError (an unportable graph) or a pickling error: not kept
        pass
    return tuple(seen + drawn[tried:])


def _cases_of(blobs) -> tuple | None:
    """The cases of stored bytes, or None where this code cannot read them (they are drawn again)."""
    try:
        return tuple(_case_of(blob) for blob in blobs)
    except Exception:  # noqa: BLE001 - an entry of another version
        return None


def _case_of(blob: bytes) -> GraphCase:
    data, features, recipes, device = pickle.loads(blob)
    gm, inputs, _ = loads_case(data)
    return GraphCase(gm, inputs, features, recipes, device=device)


def _focus_key(focus: Focus) -> tuple:
    """A ``Focus`` of discovery's (no seed programs) as a stored draw's key: its rows by name."""
    def names(items):
        return tuple(getattr(i, "name", i) for i in items)
    return (names(focus.ops), tuple(focus.scalars), focus.share, tuple(focus.edges), names(focus.acting),
            names(focus.hops), names(focus.pairs), focus.duplicates)


@functools.lru_cache(maxsize=None)
def _row_probes(row, i: int) -> tuple:
    """``_PROBES_PER_OP`` graphs of ``row`` (the ``i``-th catalog row) alone, at seed ``i`` (stored)."""
    return _stored_draw(("row", row.name), _row_probe_strategy(row), _PROBES_PER_OP, i)


def _row_probe_strategy(row):
    # One op (and a getitem per result of a multi-result op, one for a list of tensors); ops drawn
    # whole (matmul, attention) get room for their operands; dequantize gets the quantize that
    # makes its int8 input (no leaf is int8). Both were never drawn while the list's getitem and
    # the quantize had no room: 459 rejected draws a row, and a pass acting on split, chunk,
    # unbind or dequantize alone was never seen to.
    nodes = _nodes_of(row)
    ops = [row]
    if row.overload is DEQUANTIZE:
        ops, nodes = [*rows_named(QUANTIZE), row], nodes + 1
    strategy = graphs(ops=ops, min_nodes=1, max_nodes=nodes, max_inputs=4 if row.draws_whole_call else 2,
                      mutations=row.category == "inplace", random=row.category == "random",
                      special_values=False, constants=False,
                      dtypes=st.sampled_from(sorted(C.COMPLEX, key=str)) if row.complex_only else None)
    if len(ops) > 1:  # a graph of the producer alone is no probe of the row
        strategy = strategy.filter(functools.partial(_holds, row.overload))
    return strategy


def _nodes_of(row) -> int:
    """The nodes one call of ``row`` takes: the call, and a getitem per result of a multi-result op
    (one for a list of tensors)."""
    results = row.overload._schema.returns
    return 1 + (len(results) if len(results) > 1 else isinstance(results[0].type, torch.ListType))


def _room_of(row) -> int:
    """The nodes one call of ``row`` may take as an edge's producer: ``_nodes_of``, and for a list of
    tensors (split, chunk, unbind: up to four pieces drawn) a getitem for each piece, all of which a
    list's consumer reads (cat of every piece of a split)."""
    results = row.overload._schema.returns
    if len(results) == 1 and isinstance(results[0].type, torch.ListType):
        return 1 + 4
    return _nodes_of(row)


def _holds(op, case) -> bool:
    return any(node.target is op for node in case.gm.graph.nodes)


def _acts(put, case, timeout, judge=None) -> bool:
    """Whether the pass changes ``case``'s graph by more than removing dead code (drawn graphs
    carry dead nodes, and a pass that ends with a clean-up removes them wherever it runs), and
    ``judge(before, after)`` holds of the change where one is given."""
    try:
        with graph_run(), deadline(timeout):
            applied = put.apply(case.gm, clone_inputs(case.example_inputs))
        n, dead_code_only = what_changed(case.gm, applied.gm)
        return n > 0 and not dead_code_only and (judge is None or judge(case.gm, applied.gm))
    except (Exception, ExampleTimeout, SystemExit):  # noqa: BLE001 - a pass failing on a probe is the search's to report
        return False


def discover(put, *, mutations: bool, timeout: float | None = 10.0) -> Triggers:
    """Static and dynamic trigger discovery for the adapted pass ``put`` (cached)."""
    key = _cache_key(put, mutations)
    cached = _load(key)
    if cached is not None:
        return cached
    limit = None if timeout is None else PROBE_LIMIT_S + 2 * timeout
    with _discovering(key, limit):
        cached = _load(key)  # another process discovered it while this one waited
        if cached is not None:
            return cached
        return _discover(put, key, mutations, timeout, limit)


def _discover(put, key, mutations: bool, timeout, limit) -> Triggers:
    t0 = time.monotonic()
    walker = static_triggers(put.fn)
    found, cut = dict(walker.ops), False
    payoff: tuple = ()
    # A pass that kills the interpreter on some op must not kill the run: the probes run in a forked
    # child, or where this process may not fork (CUDA initialised) in the search's spawned worker,
    # which draws the same probe graphs itself. Without either (CUDA, no --isolate, so the search
    # runs in this process too) they run here: a crash would end the search as surely.
    worker = None if fork_is_safe() else current_worker()
    edges: dict = dict(walker.edges)
    acting: list = []
    pairs: list = []
    structures: list = []
    args = (dict(found), dict(edges), tuple(walker.constants), mutations, timeout)
    if fork_is_safe() or worker is not None:
        try:
            if worker is None:
                cases = probe_cases(mutations)  # drawn here, so a forked prober inherits them
                plain_cases(mutations)
                found, edges, acting, pairs, structures, cut, payoff = run_forked(
                    functools.partial(_probe, put, cases, *args), limit)
            else:
                found, edges, acting, pairs, structures, cut, payoff = worker.call(
                    "conformance.search.triggers:_probe_drawn", args, limit)
        except ChildDied as exc:
            if exc.raised:  # _probe catches what the pass raises: this is discovery's own failure
                raise HarnessError(f"trigger discovery failed: {exc.reason}") from None
            # else the pass crashed the interpreter on a probe: the search finds that crash itself
    else:
        try:
            found, edges, acting, pairs, structures, cut, payoff = _probe(put, probe_cases(mutations), *args)
        except Exception as exc:  # noqa: BLE001 - _probe catches what the pass raises, as above
            raise HarnessError(f"trigger discovery failed: {type(exc).__name__}: {exc}") from exc
    weak = bool(payoff) and _plain_did_better(*payoff[:2])
    result = Triggers(ops=list(found.items()), not_in_catalog=sorted(walker.missing),
                      constants=list(walker.constants), seconds=time.monotonic() - t0, probes_cut=cut,
                      share=WEAK_SHARE if weak else Focus.share, payoff=payoff,
                      edges=[(p, c, h, a) for (p, c, a), h in edges.items()], acting=list(acting),
                      hops=list(walker.hops), pairs=list(pairs), structures=list(structures))
    _store(key, result)
    return result


def _plain_did_better(plain: int, focused: int) -> bool:
    """Clearly better (not by a graph or two of noise: twice as many and three more, or twice as
    many of at least six), or the focus showed nothing: it made the pass act on at most one graph,
    and plain graphs did as well (the reference constant folding names ``_unsafe_view``: 1 and 1 of
    24, then 0 of 100 focused graphs changed against 12 plain; export's replace_set_grad_with_hop
    acts on grad regions, which one-op probes of in-place ops hold: 8 plain and 4 focused of 24,
    then 0 of 40 focused graphs against 22 plain)."""
    return plain >= 2 * focused + 3 or (plain >= 2 * focused and plain >= 6) or (plain > 0 and focused <= min(plain, 1))


def _probe_drawn(put, found: dict, edges: dict, constants: tuple, mutations: bool, timeout) -> tuple:
    """``_probe`` on probe graphs drawn in this process (a spawned worker's: the same graphs, as a
    seed draws the same graphs whatever the process imported)."""
    plain_cases(mutations)  # before _probe's time budget starts, as in a forked prober
    return _probe(put, probe_cases(mutations), found, edges, constants, mutations, timeout)


def _probe(put, cases, found: dict, edges: dict, constants: tuple, mutations: bool, timeout) -> tuple:
    """``(found, edges, acting, pairs, structures, cut, payoff)``: ``found`` with the ops whose one-op
    graphs (and short chains) the pass changes; ``edges`` with the candidate pairs whose chained graphs
    it changes; ``acting``: the rows whose one-op graphs it changes (what it matches, not what it emits);
    ``pairs``: of those, the code-named rows it changes only as ``x op x`` (``_pair_acts``);
    ``structures``: where nothing it names or is drawn alone made it act, ``["duplicates"]`` if it acts
    on graphs computing an expression twice and on none without (``_duplicates_act``: a CSE); ``cut`` when
    PROBE_BUDGET runs of the pass were spent first; ``payoff``: how many plain and how many focused
    graphs the pass changed (empty when there is no focus or the budget was spent)."""
    runs = [0]
    alone = set()  # rows whose one-op graphs the pass changes: an edge through one of them adds nothing
    pairs: list = []
    structures: list = []

    def out_of_runs() -> bool:
        return runs[0] >= PROBE_BUDGET

    def done(cut: bool, payoff: tuple = ()) -> tuple:
        _STORE.flush()  # the graphs drawn for this pass's probes, for the next pass's (in a forked prober too)
        return found, edges, _names(alone), pairs, structures, cut, payoff

    def acts(case, judge=None) -> bool:
        if out_of_runs():
            return False  # never run: the caller's next check reports the cut
        runs[0] += 1
        return _acts(put, case, timeout, judge)
    code_named = [name for name, how in found.items() if how == "code"]
    named = {r for name in code_named for r in rows_named(name)}
    paired = set()  # rows whose one-op graph the pass changed held the row only as x op x
    for row, row_cases in cases:
        if out_of_runs():
            return done(True)
        if row.name not in found or row in named:
            acted = next((c for c in row_cases if acts(c)), None)
            if acted is not None:
                found.setdefault(row.name, "probe")
                alone.add(row)
                if row.pair_positions is not None and _holds_pair(row, acted):
                    paired.add(row)
    # A code-named binary op may be matched as x op x only (sub(x, x) -> 0: the code compares the two
    # operands), which plain focus draws make in one focus call of that op in six: where its one-op
    # graphs left it alone, or the one it changed held the pair, pair graphs are probed against others.
    for row in _pair_candidates((named - alone) | paired)[:_MAX_PAIR_OPS] if len(named) <= _MAX_PAIR_NAMED else ():
        if out_of_runs():
            return done(True)
        if _pair_acts(row, acts):
            pairs.append(row.name)
            alone.add(row)
    rows = [r for r in Triggers(ops=list(found.items())).rows if mutations or r.category != "inplace"]
    candidates = dict.fromkeys((p, c, a) for p in code_named[:_MAX_EDGE_OPS] for c in code_named[:_MAX_EDGE_OPS]
                               for a in _consumer_arguments(c))
    if rows:
        strategy = graphs(ops=rows, focus=Focus(ops=rows, share=1.0), min_nodes=2, max_nodes=4,
                          mutations=mutations, special_values=False, random=True)
        for case in _stored_draw(("chain", tuple(r.name for r in rows), mutations), strategy, _CHAIN_EXAMPLES):
            if out_of_runs():
                return done(True)
            if acts(case):
                acted_alone = any(node.op == "call_function" and set(rows_named(node.target)) & alone
                                  for node in case.gm.graph.nodes)  # then no edge of it need be why
                for node in case.gm.graph.nodes:
                    rows = rows_named(node.target) if node.op == "call_function" else ()
                    if rows and rows[0].name not in found and packet_name(node.target) not in found:
                        found[rows[0].name] = "chain"
                held = [] if acted_alone else list(dict.fromkeys(e for e in _edges_in(case.gm) if _adds_to(e, alone)))
                if len(held) == 1:  # the pass acted on a graph holding this edge and no other
                    edges.setdefault(held[0], "chain")
                candidates.update(dict.fromkeys(held))  # else each must make it act by itself, below
    groups: dict = {}  # each pair's candidate arguments, probed together (one draws each in turn)
    for edge in candidates:
        if edge in edges or not all(rows_named(n) for n in edge[:2]) or not _adds_to(edge, alone):
            continue
        groups.setdefault(edge[:2], []).append(edge[2])
    for pair, arguments in groups.items():
        if out_of_runs():
            return done(True)
        for argument in _edge_acts(pair, arguments, mutations, acts, constants):
            edges[(*pair, argument)] = "probe"
    focus = Triggers(ops=list(found.items()), constants=list(constants),
                     edges=[(p, c, h, a) for (p, c, a), h in edges.items()], acting=_names(alone), pairs=pairs).focus()
    # nothing the pass names or is drawn alone made it act (a CSE names no op it acts on, or only ops it
    # guards against): whether it acts on an expression computed twice
    if not alone and not edges and not pairs and not out_of_runs() and _duplicates_act(acts):
        structures.append("duplicates")
        focus = Focus(duplicates=True)  # (Triggers.focus: without the ops it names)
    if focus is None:
        return done(out_of_runs())
    # drawn as verify() draws (random ops allowed): a focus on random ops must be weighed too
    focused = _stored_draw(("payoff", mutations, _focus_key(focus)),
                           graphs(mutations=mutations, random=True, focus=dataclasses.replace(focus, share=1.0)),
                           _PAYOFF_EXAMPLES, 1)
    counts = []
    for sample in (plain_cases(mutations), focused):
        n = 0
        for case in sample:
            if out_of_runs():
                return done(True)
            n += acts(case)
        counts.append(n)
    return done(False, (*counts, _PAYOFF_EXAMPLES))


_DUPLICATE_EXAMPLES = 6  # graphs computing an expression twice drawn to see whether the pass acts on one
_UNDUPLICATED_EXAMPLES = 3  # and graphs computing none twice, which it must leave alone


def _duplicates_act(acts) -> bool:
    """Whether the pass acts on an expression computed twice, and only there (a CSE names no op, so no
    one-op graph shows it anything, and its plain graphs held a duplicate one step in twenty): on one
    of ``_DUPLICATE_EXAMPLES`` small graphs that repeat a pure call (``Focus.duplicates``), and on
    none of ``_UNDUPLICATED_EXAMPLES`` that repeat none; on the first, by merging what was repeated
    (fewer repeated calls after it: a pass that acts on every graph somewhere is not a CSE)."""
    def tried_on(holds, n, judge=None) -> tuple:
        seen = []

        def tried(case) -> bool:
            if not holds(case.gm):
                return False
            seen.append(acts(case, judge))
            return seen[-1] or len(seen) >= n
        # functional graphs whatever the search draws: a CSE rightly leaves alone the duplicates of
        # mutating graphs, which are mostly written or returned (1 of 18 merged, measured)
        strategy = graphs(focus=Focus(duplicates=True, share=1.0), min_nodes=2, max_nodes=5, mutations=False,
                          special_values=False, constants=False)
        _stored_draw(("duplicates",), strategy, 4 * n, until=tried)
        return len(seen), any(seen)
    if not tried_on(_repeats_a_call, _DUPLICATE_EXAMPLES, lambda a, b: _repeated(b) < _repeated(a))[1]:
        return False
    drawn, acted = tried_on(lambda gm: not _repeats_a_call(gm), _UNDUPLICATED_EXAMPLES)
    return drawn == _UNDUPLICATED_EXAMPLES and not acted


def _repeats_a_call(gm) -> bool:
    """Two calls of one target on the same arguments (integral scalars of either type alike)."""
    return _repeated(gm) > 0


def _repeated(gm) -> int:
    """How many calls of ``gm`` repeat an earlier one (its target and arguments)."""
    seen, n = set(), 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        key = (node.target, tuple(_same(a) for a in node.args),
               tuple(sorted((k, _same(v)) for k, v in node.kwargs.items())))
        n += key in seen
        seen.add(key)
    return n


def _same(a):
    """An argument as a duplicate's key: a node itself, a number by value (1 and 1.0 alike), the rest by repr."""
    if isinstance(a, torch.fx.Node):
        return ("node", a.name)
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return ("number", float(a))
    if isinstance(a, (list, tuple)):
        return tuple(_same(x) for x in a)
    return ("other", repr(a))


# A pass matching x op x names few ops (sub and what replaces it); one naming many (Inductor's joint-graph
# passes name dozens) would pay 7 runs and two small draws per op it names, at every cold discovery.
_MAX_PAIR_NAMED = 8  # pairs are probed only where the code names at most this many catalog rows
_MAX_PAIR_OPS = 4  # and of those, the first this many binary ones
_PAIR_EXAMPLES = 4  # graphs holding x op x drawn to see whether the pass acts on one (per candidate row)
_UNPAIRED_EXAMPLES = 3  # and graphs holding the op on two values, which it must leave alone


def _pair_candidates(rows) -> list:
    """Of ``rows``, in catalog order, the functional ones drawn operand by operand two of whose operands
    may be one value (``OpSpec.pair_positions``, ``call.py``'s equal-operands pair)."""
    return [r for r in OPS if r in rows and r.category not in (C.INPLACE, C.RANDOM) and r.pair_positions is not None]


def _pair_acts(row, acts) -> bool:
    """Whether the pass acts on ``row`` as x op x only: on one of ``_PAIR_EXAMPLES`` small graphs holding
    the op only as pairs, and on none of ``_UNPAIRED_EXAMPLES`` holding it on two tensors and no pair."""
    def acted(focus, holds, n) -> tuple:
        """``(cases drawn, whether the pass acted on one)``: the draw ends at the first it acts on."""
        seen = []

        def tried(case) -> bool:
            seen.append(acts(case))
            return seen[-1]
        strategy = graphs(ops=[row], focus=focus, min_nodes=1, max_nodes=3, special_values=False, constants=False)
        _stored_draw(("pair", row.name, _focus_key(focus), holds.func.__name__), strategy.filter(holds), n, until=tried)
        return len(seen), any(seen)
    if not acted(Focus(ops=[row], pairs=[row.name], share=1.0), functools.partial(_holds_pair, row),
                 _PAIR_EXAMPLES)[1]:
        return False
    drawn, any_acted = acted(Focus(ops=[row], share=1.0), functools.partial(_holds_unpaired, row),
                             _UNPAIRED_EXAMPLES)
    return drawn == _UNPAIRED_EXAMPLES and not any_acted


def _pair_operands(row, case) -> list:
    """Of each of ``row``'s calls in ``case``, the two operands an equal-operands pair makes one
    (``OpSpec.pair_positions``: ``sub``'s first two, ``where``'s two after its mask)."""
    i, j = row.pair_positions
    return [(n.args[i], n.args[j]) for n in case.gm.graph.nodes if n.target is row.overload and len(n.args) > j]


def _holds_pair(row, case) -> bool:
    """``row`` as x op x, and nowhere on two values (where the pass acts, the pair is why)."""
    calls = _pair_operands(row, case)
    return bool(calls) and all(a is b for a, b in calls)


def _holds_unpaired(row, case) -> bool:
    """``row`` on two distinct tensors, and nowhere on one as both operands."""
    calls = _pair_operands(row, case)
    return bool(calls) and all(isinstance(b, torch.fx.Node) and a is not b for a, b in calls)


def _names(rows) -> list:
    return [row.name for row in OPS if row in rows]  # catalog order: a set's order changes between processes


def _adds_to(edge: tuple, alone: set) -> bool:
    """Whether an edge says more than its ops: neither makes the pass act by itself."""
    return not any(set(rows_named(n)) <= alone for n in edge[:2])


_MAX_EDGE_ARGUMENTS = 3  # a consumer's first this many tensor arguments are candidate places of a producer


def _consumer_arguments(name: str) -> tuple:
    """The tensor arguments of the op ``name`` (its catalog rows'), the first few: where a producer may
    feed it (``bmm``'s ``self`` and ``mat2``; a matcher reads ``node.args[1]`` as surely as ``args[0]``)."""
    found: dict = {}
    for row in rows_named(name):
        found.update(dict.fromkeys(tensor_arguments(row)))
    return tuple(found)[:_MAX_EDGE_ARGUMENTS]


def _edges_in(gm) -> list:
    """The ``(producer, consumer, argument)`` of the call -> call edges of ``gm``: catalog (or a user's
    op's) names, and the consumer's argument (schema name) the producer feeds. A getitem stands for
    the multi-result call it reads, and an ``auto_functionalized(_v2)`` node (post-grad graphs) for
    the op it wraps, its arguments its keywords."""
    out = []
    for node in gm.graph.nodes:
        consumer = _call_name(node)
        if not consumer:
            continue
        for argument, value in _named_arguments(node):
            for a in value if isinstance(value, (list, tuple)) else (value,):
                if not isinstance(a, torch.fx.Node):
                    continue
                if a.target is operator.getitem:
                    a = a.args[0]
                producer = _call_name(a)
                if producer:
                    out.append((producer, consumer, argument))
    return out


def _wrapped(node):
    """The op an ``auto_functionalized(_v2)`` node (a higher-order op over an OpOverload) wraps, or None."""
    if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator) and node.args \
            and isinstance(node.args[0], torch._ops.OpOverload):
        return node.args[0]
    return None


def _call_name(node) -> str | None:
    if node.op != "call_function":
        return None
    target = _wrapped(node) or node.target
    name = op_name(target)
    if name is None and isinstance(target, torch._ops.OpOverload):
        rows = custom_rows(target)
        name = rows[0].name if rows else None
    return name


def _named_arguments(node) -> list:
    """``(schema name, value)`` of a call's arguments, positional and keyword (of the wrapped op's
    keywords, for an ``auto_functionalized(_v2)`` node)."""
    if _wrapped(node) is not None:
        return [(k, v) for k, v in node.kwargs.items() if not k.startswith("_")]
    schema = getattr(node.target, "_schema", None)
    names = [a.name for a in schema.arguments] if schema is not None else []
    pairs = [(names[i] if i < len(names) else str(i), v) for i, v in enumerate(node.args)]
    return pairs + list(node.kwargs.items())


def _edge_acts(pair: tuple, arguments: list, mutations: bool, acts, constants=()) -> list:
    """The ``arguments`` of the consumer at which the producer made ``acts`` hold, of ``pair``'s graphs
    drawn with the edge alone (two calls, the consumer on the producer's result at one of those
    arguments in turn: ``Focus.edges`` holds one edge per argument): up to ``_EDGE_EXAMPLES`` of
    them for each argument, of twice as many drawn (an edge step can fail), tried in the order
    drawn; where a run held under half of them and none acted, another independent run, up to
    ``_EDGE_RUNS`` (one run's draws are mutations of its first ones: abs -> pow, pow's base refusing
    many results, was held by 3 of one run's graphs and never confirmed). The draw stops
    at the first that acts, and that graph's edges say at which arguments: the same graphs are tried
    as when all were drawn first, and a confirmed edge no longer pays for the rest (edges were 15%
    of the discoveries of tests/test_patterns.py and test_op_families.py on the 2-core AMD EPYC).
    The graphs are drawn with room for the two calls (and the producer's getitems) and no more: with
    room for a third call, 60% of them held three and were drawn for nothing (152 of 455 graphs were
    the edge alone, over the discoveries of reinplace, functorch's CSE and an addmm fusion; 390 of
    405 now, in 0.7 of the time). The pass's ``constants`` are the focus's scalars, as in its search:
    the numbers a matcher compares an edge's arguments with (``dim == 0``, ``step == 1``). Its leaves
    are inputs: an edge on constants alone reaches no output, and a rewrite of it is dead-code
    removal (a drawn diamond, ``mul(c, sigmoid(c))``, was so in two of three)."""
    rows = [r for name in pair for r in rows_named(name) if mutations or r.category != "inplace"]
    if not rows:
        return []
    producers, consumers = (set(rows_named(name)) for name in pair)
    try:
        strategy = graphs(ops=rows, focus=Focus(share=1.0, edges=tuple((*pair, a) for a in arguments),
                                                scalars=tuple(constants)), min_nodes=2,
                          max_nodes=1 + max((_room_of(r) for r in producers), default=1),
                          mutations=mutations, special_values=False, random=True, constants=False)
    except strategies.InvalidArgument:  # an edge between rows this draw leaves out
        return []
    held, acted = [], []

    def tried(case) -> bool:  # True ends the draw
        at = [a for p, c, a in _edges_in(case.gm) if set(rows_named(p)) & producers and set(rows_named(c)) & consumers
              and a in arguments]
        if _calls(case.gm) != 2 or not at or not _live(case.gm):
            # not the edge alone (another edge cannot be why the pass acted), or the edge is dead (drawn
            # on constants alone, it reaches no output: a rewrite of it is dead-code removal)
            return False
        held.append(case)
        if acts(case):
            acted.extend(a for a in dict.fromkeys(at) if a not in acted)  # held at two: either may be why
        return bool(acted) or len(held) == budget

    budget = _EDGE_EXAMPLES * len(arguments)  # as many graphs for each argument as an edge had alone
    for run in range(_EDGE_RUNS):
        _stored_draw(("edge", pair, tuple(arguments), mutations, tuple(constants)), strategy, 2 * budget, run, tried)
        if acted or len(held) >= budget // 2:
            break
    return acted


def user_edges_acting(put, edges: list, *, ir: str, mutations: bool, device: str, timeout) -> list:
    """Of ``edges`` (``(producer, consumer, argument)`` of a user's op names, ``verify(ops=)``), those whose
    own graphs make the pass act: drawn in the search's IR (a post-grad pass matches
    ``auto_functionalized_v2`` nodes, which discovery's aten probes never hold), the producer feeding
    the consumer's argument of that name, up to ``_EDGE_EXAMPLES``
    graphs each, stopping at the first the pass changes. In a forked child where this process may fork
    (a pass that kills its process then confirms nothing), else here."""
    base = _cache_key(put, mutations)  # cached beside discovery's entry, with what the ops' graphs depend on
    key = None if base is None else hashlib.sha1(
        f"{base}|user-edges|{ir}|{device}|{edges}|{_user_ops_fingerprint(edges)}".encode()).hexdigest()[:20]
    if key is not None:
        try:
            return [tuple(e) for e in read_entry(key)["acting"] if len(e) == 3]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    probe = functools.partial(_user_edges, put, list(edges), ir, mutations, device, timeout)
    if not fork_is_safe():
        acting = probe()
    else:
        try:
            acting = run_forked(probe, None if timeout is None else PROBE_LIMIT_S)
        except ChildDied:
            return []  # the pass killed a prober: nothing confirmed, nothing remembered
    if key is not None:
        write_entry(key, {"acting": [list(e) for e in acting]})
    return acting


def _user_ops_fingerprint(edges) -> str:
    """What a user op's graphs depend on besides the pass: its schema, the source of the module that
    defined it (kernel and fake impl) and of its ``op_rule``, and which ``auto_functionalized`` form
    AOTAutograd emits (``torch._inductor.config.enable_auto_functionalized_v2``, which vLLM turns off)."""
    parts = []
    for name in sorted({n for edge in edges for n in edge}):
        for row in custom_rows(name):
            parts += [str(row.overload._schema), _source_digest(defining_function(row.overload)),
                      _source_digest(rule_of(row.overload))]
    inductor = sys.modules.get("torch._inductor.config")  # not imported: its default
    parts.append(str(getattr(inductor, "enable_auto_functionalized_v2", "default")))
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:16]


def _source_digest(fn) -> str:
    try:
        with open(inspect.getsourcefile(fn), "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()[:16]
    except (TypeError, OSError):
        return ""


def _user_edges(put, edges, ir, mutations, device, timeout) -> list:
    """Each pair's candidate arguments drawn together (``_user_edge_arguments``), the arguments at which
    one of its graphs made the pass act kept."""
    pairs: dict = {}
    for producer, consumer, argument in edges:
        pairs.setdefault((producer, consumer), []).append(argument)
    try:
        return [(*pair, a) for pair, arguments in pairs.items()
                for a in _user_edge_arguments(put, pair, arguments, ir, mutations, device, timeout)]
    finally:
        _STORE.flush()


def _user_edge_arguments(put, pair, arguments, ir, mutations, device, timeout) -> list:
    """The ``arguments`` of the consumer at which the producer made the pass act: up to
    ``_EDGE_EXAMPLES`` graphs holding one (of twice as many drawn) of the pair's ops drawn with an
    edge at each of them in turn (edge steps
    alone chain the two: a focus step feeds the producer's result to whichever operand fits), each
    graph holding one of them and no other edge between the two (an out buffer the op writes whole
    cannot be fed, and a graph without the edge confirms nothing), stopping at the first the pass changes: the arguments its edges
    are at."""
    producer, consumer = pair
    try:
        strategy = graphs(ops=[producer, consumer], focus=Focus(edges=tuple((*pair, a) for a in arguments), share=1.0),
                          max_nodes=6, ir=ir, mutations=mutations, special_values=False, device=device)
    except strategies.InvalidArgument:
        return []
    acted: list = []
    holding = [0]

    def tried(case) -> bool:  # True ends the draw
        between = [(p, c, a) for p, c, a in _edges_in(case.gm) if {p, c} <= set(pair)]
        held = [a for p, c, a in between if (p, c) == pair and a in arguments]
        # and no other edge between the two (the other way round, at another argument): an edge
        # drawn at every step chains them both ways, and that one may be why the pass acted
        if held and all((p, c) == pair and a in arguments for p, c, a in between):
            holding[0] += 1
            if _acts(put, case, timeout):
                acted.extend(dict.fromkeys(held))
        return bool(acted) or holding[0] == _EDGE_EXAMPLES

    # (the graphs do not depend on the pass: another pass over the same ops loads them, ``_stored_draw``;
    # drawing them was 5.8 of the 5.9 s of a fusion's edge probes, post-grad, on the 2-core Intel Xeon)
    what = ("user-edge", pair, tuple(arguments), ir, mutations, str(device), _user_ops_fingerprint([pair]))
    _stored_draw(what, strategy, 2 * _EDGE_EXAMPLES, until=tried)
    return acted


def _live(gm) -> bool:
    """Whether every call of ``gm`` reaches its output."""
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    reach, todo = set(), [out]
    while todo:
        n = todo.pop()
        if n not in reach:
            reach.add(n)
            todo += n.all_input_nodes
    return all(n in reach for n in gm.graph.nodes if n.op == "call_function")


def _calls(gm) -> int:
    return sum(n.op == "call_function" and n.target is not operator.getitem for n in gm.graph.nodes)


# --- memory: what this process discovered or read ------------------------------------------------

_MEMORY: dict = {}


def _load(key) -> Triggers | None:
    if key is None:
        return None
    if key in _MEMORY:
        return dataclasses.replace(_MEMORY[key], cached=True)
    try:
        found = Triggers.from_dict(read_entry(key))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    _MEMORY[key] = found
    return dataclasses.replace(found, cached=True)


def _store(key, found: Triggers) -> None:
    if key is None:
        return
    _MEMORY[key] = found
    write_entry(key, {k: v for k, v in found.to_dict().items() if k != "cached"})


__all__ = ["Triggers", "discover", "probe_cases", "user_edges_acting"]

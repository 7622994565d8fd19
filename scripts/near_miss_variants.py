"""An experiment for issue 56's last gap (buggy twins whose rewrite fired but that were not caught): would
checking near misses of the graphs a pass rewrote catch them? For a corpus cell ``NAME SEED``, the search of
the correct twin runs as ``scripts/matcher_corpus.py`` runs it, and each graph its rewrite changed (not dead
code alone) is kept with the nodes the rewrite removed. Then, outside the search, each kept graph gets
variants with one scalar argument of a removed node moved (an int one up or down; a dim to every other
dim of -4..3; an integral number to its other type where the schema takes a number; ``alpha=2`` where the
op takes one and the call has none); a variant eager refuses is dropped. Printed: the variants tried, those
on which ``conformance.check`` fails the buggy twin while the correct twin holds, and in how many of the
rewritten graphs one such variant exists; and on how many the correct twin fails (a variant a correct pass
fails is a false alarm, or a bug of the twin).

    FX_CONFORMANCE_CACHE=/tmp/cache .venv/bin/python scripts/near_miss_variants.py select-of-unsqueeze 1

Inputs are drawn from each placeholder's meta (normal values times 3, small integers), not the search's
special values: a count of the argument near misses only.
"""

from __future__ import annotations

import copy
import importlib
import os
import pathlib
import pickle
import sys
import tempfile
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main(name: str, seed: int) -> None:
    for path in (str(ROOT), str(ROOT / "examples")):
        if path not in sys.path:
            sys.path.insert(0, path)
    warnings.filterwarnings("ignore")
    import torch

    from conformance import check, verify
    from conformance.changes import what_changed
    from tests.passes.matchers import CORPUS
    from tests.passes.structures import STRUCTURES

    m = {**CORPUS, **STRUCTURES}[name]
    (gmod, gattr), (bmod, battr) = m.correct.split(":"), m.buggy.split(":")
    module = importlib.import_module(gmod)
    good, bad = getattr(module, gattr), getattr(importlib.import_module(bmod), battr)
    log = pathlib.Path(tempfile.mkdtemp()) / "rewritten.pkl"

    recording = [False]

    def kept(gm):  # the correct twin, keeping each graph it rewrote (the search runs it in a forked driver)
        before = copy.deepcopy(gm)
        out = good(gm)
        n, dead = what_changed(before, out)
        if n and not dead and recording[0]:
            names = {nd.name for nd in out.graph.nodes}
            gone = [nd.name for nd in before.graph.nodes if nd.op == "call_function" and nd.name not in names]
            inputs = [(tuple(nd.meta["val"].shape), nd.meta["val"].dtype) for nd in before.graph.nodes
                      if nd.op == "placeholder"]
            with open(log, "ab") as f:
                pickle.dump((pickle.dumps(before), gone, inputs), f)
        return out

    kept.__module__ = module.__name__  # discovery reads the twin's package, as for the twin itself
    setattr(module, gattr, kept)
    options = dict(ir=m.ir, graphs=m.graphs, ops=m.ops, seed=seed, device="cpu", shrink=False, repro_dir=None)
    verify(m.correct, max_examples=1, **options)  # discovery, cached: its probe graphs are not the search's
    recording[0] = True
    result = verify(m.correct, max_examples=200, **options)
    setattr(module, gattr, good)
    records = []
    if log.exists():
        with open(log, "rb") as f:
            while True:
                try:
                    records.append(pickle.load(f))
                except EOFError:
                    break
    tried = caught = graphs = flagged = 0
    for blob, gone, inputs in records:
        base = pickle.loads(blob)
        hit = False
        for who, where, value in _variants(base, gone):
            v = copy.deepcopy(base)
            node = next(n for n in v.graph.nodes if n.name == who)
            if where == "alpha":
                node.kwargs = {**node.kwargs, "alpha": value}
            else:
                node.args = tuple(value if i == where else a for i, a in enumerate(node.args))
            v.recompile()
            x = _inputs(torch, inputs)
            try:
                v(*x)
            except Exception:  # noqa: BLE001 - eager refuses the variant: no graph
                continue
            tried += 1
            try:
                held = check(good, v, x).ok
                if not held:
                    flagged += 1
                elif not check(bad, v, x).ok:
                    caught += 1
                    hit = True
            except Exception:  # noqa: BLE001 - a variant the harness cannot judge is no catch
                continue
        graphs += hit
    print(f"{name} seed {seed}: {result.fire_text}")
    print(f"{name} seed {seed}: {len(records)} rewritten graphs; {tried} variants run; the buggy twin failed and "
          f"the correct one held on {caught}, in {graphs} of the rewritten graphs; the correct twin failed on "
          f"{flagged}")


def _variants(gm, gone):
    for node in gm.graph.nodes:
        if node.name not in gone or node.op != "call_function":
            continue
        schema = getattr(node.target, "_schema", None)
        for i, a in enumerate(node.args):
            if isinstance(a, bool) or not isinstance(a, (int, float)):
                continue
            arg = schema.arguments[i] if schema is not None and i < len(schema.arguments) else None
            number = arg is not None and str(arg.type) in ("Scalar", "number")
            if isinstance(a, int):
                moved = [a + 1, a - 1] + ([float(a)] if number else [])
                if arg is not None and "dim" in arg.name:
                    moved += [d for d in range(-4, 4) if d not in (a, a + 1, a - 1)]
            else:
                moved = [int(a)] if number and float(a).is_integer() else []
            for value in moved:
                yield node.name, i, value
        if schema is not None and any(x.name == "alpha" for x in schema.arguments) and "alpha" not in node.kwargs:
            yield node.name, "alpha", 2


def _inputs(torch, specs) -> tuple:
    g = torch.Generator().manual_seed(0)
    out = []
    for shape, dtype in specs:
        if dtype.is_floating_point or dtype.is_complex:
            out.append((torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=g).bool())
        else:
            out.append(torch.randint(-5, 6, shape, generator=g).to(dtype))
    return tuple(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: near_miss_variants.py NAME SEED")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(sys.argv[1], int(sys.argv[2]))

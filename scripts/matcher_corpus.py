"""The matcher corpus (tests/passes/matchers.py, issue 56) measured: for each matcher, how often its
correct twin's rewrite fires (graphs changed by more than dead-code removal) in ``--max-examples``
graphs at each seed, whether it holds, and at which graph its buggy twin is caught. Printed as the
Markdown table of docs/fire-rates.md, and written as JSON with ``--json``.

    .venv/bin/python scripts/matcher_corpus.py --seeds 0 1 2 --jobs 2 --json /tmp/corpus.json

``--corpus structures`` measures tests/passes/structures.py's passes instead (issue 56 item 5);
``--near-misses K`` runs both twins with verify(near_misses=K).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _setup() -> None:
    for path in (str(ROOT), str(ROOT / "examples")):
        if path not in sys.path:
            sys.path.insert(0, path)


def _corpus(which: str) -> dict:
    if which == "structures":
        from tests.passes.structures import STRUCTURES

        return STRUCTURES
    from tests.passes.matchers import CORPUS

    return CORPUS


def run(name: str, seed: int, examples: int, which: str = "matchers", near_misses: int = 2) -> dict:
    """Both twins of ``name`` at ``seed``: the correct twin's counts and verdict, the buggy twin's catch
    (``near_misses``: verify()'s, the variants of each rewritten graph checked)."""
    _setup()
    warnings.filterwarnings("ignore")
    from conformance import verify

    m = _corpus(which)[name]
    options = dict(ir=m.ir, graphs=m.graphs, ops=m.ops, max_examples=examples, seed=seed, device="cpu",
                   shrink=False, repro_dir=None, near_misses=near_misses)
    t0 = time.monotonic()
    good = verify(m.correct, **options)
    t1 = time.monotonic()
    bad = verify(m.buggy, **options)
    first = bad.violations[0] if bad.violations else None
    return {"name": name, "seed": seed, "examples": good.examples, "changed": good.changed,
            "rewrites": good.rewrites, "dead_code_only": good.changed_dead_code_only, "ok": good.ok,
            "violations": [f"{v.property}: {v.headline}" for v in good.violations],
            "caught": not bad.ok, "caught_at": first.example if first else None,
            "caught_by": first.property if first else None, "buggy_examples": bad.examples,
            "seconds": [round(t1 - t0, 1), round(time.monotonic() - t1, 1)]}


def table(records: list, examples: int, which: str = "matchers") -> str:
    CORPUS = _corpus(which)
    seeds = sorted({r["seed"] for r in records})
    by = {(r["name"], r["seed"]): r for r in records}
    head = ("| matcher | shape of | correct twin: rewrites in " + str(examples) + " graphs, seeds "
            + ", ".join(map(str, seeds)) + " | buggy twin caught at graph (property) | what the bug gets wrong |")
    lines = [head, "|---|---|---|---|---|"]
    for name, m in CORPUS.items():
        cells = [by.get((name, s)) for s in seeds]
        if not any(cells):
            continue
        fired = ", ".join("-" if c is None else f"{c['rewrites']}" + ("" if c["ok"] else " NOT OK") for c in cells)
        caught = ", ".join("-" if c is None else (f"{c['caught_at']} ({c['caught_by']})" if c["caught"] else "missed")
                           for c in cells)
        lines.append(f"| {name} | {m.shape} | {fired} | {caught} | {m.bug} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-examples", type=int, default=200)
    parser.add_argument("--only", default=None, help="a substring of the matcher names")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument("--corpus", choices=("matchers", "structures"), default="matchers")
    parser.add_argument("--near-misses", type=int, default=2, help="verify()'s near_misses for both twins (its default, 2)")
    args = parser.parse_args(argv)
    _setup()
    names = [n for n in _corpus(args.corpus) if args.only is None or args.only in n]
    work = [(n, s) for n in names for s in args.seeds]
    records = []
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for record in pool.map(run, *zip(*work), [args.max_examples] * len(work), [args.corpus] * len(work),
                               [args.near_misses] * len(work)):
            records.append(record)
            print(json.dumps(record), file=sys.stderr, flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
    print(table(records, args.max_examples, args.corpus))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())

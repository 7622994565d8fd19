"""Which of torch's own passes keep graphs over symbolic sizes symbolic (issue 17).

For every row of ``conformance/suite/test_torch_passes.py``'s ``PASSES`` (torch-IR rows aside:
their graphs are modules): ``verify_row`` with ``dynamic=True``, so the graphs are drawn over
symbolic sizes (functional, "aten": what make_fx's symbolic trace gives) and the ``dynamic``
property is checked besides the others, the row's known findings accepted. Printed as Markdown:
the share of graphs the pass changed, whether it kept them symbolic, the prover's verdicts.

    .venv/bin/python scripts/dynamic_torch_passes.py --max-examples 30 --seed 0
"""

from __future__ import annotations

import argparse
import time
import warnings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="a substring of the pass names to run")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    from conformance.suite.test_torch_passes import PASSES, verify_row

    print("| pass | changed | dynamic | other properties | proofs (proved/refuted/unknown, ms) | s |")
    print("|---|---|---|---|---|---|")
    kept = judged = 0
    for name, row in PASSES.items():
        if row.ir == "torch" or (args.only and args.only not in name):
            continue
        t0 = time.perf_counter()
        try:
            r = verify_row(name, args.max_examples, args.seed, dynamic=True, ir="aten", graphs="functional",
                           seed_graphs=None, focus="none")
        except Exception as exc:  # noqa: BLE001 - a row that cannot run this way is reported, not fatal
            print(f"| {name} | - | not run: {type(exc).__name__}: {str(exc).splitlines()[0][:80]} | | | |")
            continue
        dyn = [v for v in r.violations if v.property == "dynamic"]
        other = [v for v in r.violations if v.property != "dynamic"]
        if r.changed:
            judged += 1
            kept += not dyn
        verdict = "kept" if not dyn else f"**specialised**: {dyn[0].headline[:140]}"
        if not r.changed:
            verdict = "never fired"
        p = (r.dynamic or {}).get("proofs", {})
        proofs = f"{p.get('proved', 0)}/{p.get('refuted', 0)}/{p.get('unknown', 0)}, {(r.dynamic or {}).get('prove_ms', 0):.0f}"
        others = "; ".join(sorted({f"{v.property}: {v.headline[:60]}" for v in other})) or "ok"
        print(f"| {name} | {r.changed}/{r.examples} | {verdict} | {others} | {proofs} | "
              f"{time.perf_counter() - t0:.1f} |")
    print(f"\n{kept} of {judged} passes that changed a graph kept every changed graph symbolic.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The table of torch's own passes verified in their IR (issue 16; docs/fire-rates.md).

For every row of ``conformance/suite/test_torch_passes.py``'s ``PASSES``: ``verify_row``, the call
the suite makes (IR, graph kind, pass arguments, context, contracts, seed programs, its known
findings accepted), with ``--max-examples`` graphs (a quarter in export) and ``--seed``, unshrunk.
Printed as Markdown: the pass, its IR and graph kind, its calling form, the share of graphs it
changed, and the verdict, with the known findings the search met by name.

    .venv/bin/python scripts/torch_passes_table.py --max-examples 100 --seed 0
"""

from __future__ import annotations

import argparse
import time
import warnings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="a substring of the pass names to run")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")

    from conformance import load_pass
    from conformance.suite.test_torch_passes import FINDINGS, PASSES, verify_row

    print("| pass | IR (graphs) | form | changed | verdict | s |")
    print("|---|---|---|---|---|---|")
    for name, row in PASSES.items():
        if args.only and args.only not in name:
            continue
        n = max(10, args.max_examples // 4) if row.ir == "export" else args.max_examples
        form = load_pass(row.target, pass_kwargs=row.pass_kwargs or None, context=row.context).form
        extras = [f"--pass-arg {k}={v!r}" for k, v in row.pass_kwargs.items()]
        extras += [f"--context {row.context.split(':')[-1]}"] if row.context else []
        extras += [f"--ensure {c}" for c in row.ensure] + (["seed programs"] if row.seeds else [])
        extras += ["--no-constants"] if not row.constants else []
        start = time.monotonic()
        result = verify_row(name, n, args.seed)
        seconds = time.monotonic() - start

        def finding(v) -> str:
            return next((k for k, f in FINDINGS.items() if name in f.passes and f.matches(v)), "by design")

        known = sorted({f"{v.property}: {finding(v)}" for v in result.known})
        if result.violations:
            verdict = "FAIL (" + "; ".join(f"{v.property}: unknown: {v.message.splitlines()[0][:80]}"
                                           for v in result.violations) + ")"
        elif result.vacuous:
            verdict = "VACUOUS" + (f" (known: {row.never_fires.split(':')[0]})" if row.never_fires else "")
        else:
            verdict = "OK"
        verdict += f"; known: {', '.join(known)}" if known else ""
        changed = result.changed - result.changed_dead_code_only
        dead = f" (+{result.changed_dead_code_only} dead code only)" if result.changed_dead_code_only else ""
        print(f"| {name} | {row.ir} ({row.graphs}) | {form}{', ' + ', '.join(extras) if extras else ''} | "
              f"{changed}/{result.examples}{dead} | {verdict} | {seconds:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

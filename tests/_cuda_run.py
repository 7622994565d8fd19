"""The pointwise table and golden tests on a CUDA device, in a process of their own.

Kernels choose their mode by device (``_runtime.mode_for``), so CPU and CUDA kernels share a
process; the CUDA cases still run in a process of their own, because a kernel that faults on the
GPU (an illegal address) leaves the CUDA context unusable for every later test in that process:
tests/test_pointwise_table.py and tests/test_pointwise_golden.py run them through ``run()``, a
subprocess ``python -m tests._cuda_run OUT.json table|golden NAME [NAME ...]`` with
``TRITON_INTERPRET`` removed from its environment (a user's setting would interpret every kernel). Each named table row (its whole special-value
grid, ``judge_row``) or golden graph (``judge_golden``) gives one record in OUT.json:
``{"name", "device", "cases", "modes", "failures"}``, where ``modes`` are the kernels' modes (a GPU
run must show only ``compiled``). The CPU cases call the same judges in the test process. Exit 2
with one line where it cannot run: an unknown name, ``TRITON_INTERPRET`` set, no CUDA device.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import torch

from conformance import check
from conformance.oracle import compare_outputs
from reference_lowering.pointwise import _runtime, lower_pointwise
from tests.graphs import build
from tests.pointwise_cases import GOLDEN, POINTWISE, SPECIALS, eager_ok, graph_of, graph_of_cases, grid_cases

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = ("table", "golden")


def judge_row(row, device: str) -> dict:
    """The record of one catalog row: every case of its special-value grid (tests/test_pointwise_table.py)
    with its tensors on ``device``, lowered and judged by ``check()`` against eager on that device.

    The cases of a dtype are the outputs of one graph, judged at once (a ``check()`` per case spent
    most of its 20 ms on what every check does: 48 s for the table's 2391 cases on the 2-core AMD
    EPYC, 16 s this way); where that graph fails, each case is judged alone, so the record lists the
    failing cases, as before (or the graph itself, where no case fails alone)."""
    modes, failures, cases = set(), [], 0

    def lower(gm, sample_inputs):
        lowered = lower_pointwise(gm, sample_inputs)
        modes.update(k.mode for k in lowered.meta["pointwise_kernels"])
        return lowered

    def judge(gm, inputs):
        # device= keeps the inputs where they are: check() moves them to its device, "cpu" by default
        return check(lower, gm, inputs, properties=["validity", "values"], ensure=["pointwise-kernels-only"],
                     specials=SPECIALS, device=device)

    for dtype in sorted(row.dtypes, key=str):
        moved: dict = {}  # a grid shared by several cases stays one tensor on the device

        def on_device(a):
            if not isinstance(a, torch.Tensor):
                return a
            if id(a) not in moved:
                moved[id(a)] = (a, a.to(device))  # the original kept alive: its id is not reused
            return moved[id(a)][1]

        group = []
        for args, kwargs in grid_cases(row, dtype):
            args = tuple(map(on_device, args))
            if eager_ok(row, args, kwargs):  # eager on this device refuses it (or its result is undefined)
                group.append((args, kwargs))
        cases += len(group)
        together = judge(*graph_of_cases(row, group)) if group else None
        if together is None or together.ok:
            continue
        alone = []
        for args, kwargs in group:
            verdict = judge(*graph_of(row, args, kwargs))
            if not verdict.ok:
                alone.append(f"{row.name} dtype={dtype} args={args} kwargs={kwargs}:\n" +
                             "\n".join(v.message for v in verdict.violations))
        failures += alone or [f"{row.name} dtype={dtype}, its {len(group)} cases as the outputs of one graph:\n" +
                              "\n".join(v.message for v in together.violations)]
    return {"name": row.name, "device": device, "cases": cases, "modes": sorted(modes), "failures": failures}


def judge_golden(name: str, device: str) -> dict:
    """The record of one golden graph (tests/test_pointwise_golden.py) lowered for ``device`` and run there
    against eager on that device."""
    body, make_inputs, dynamic = GOLDEN[name]
    inputs = tuple(t.to(device) for t in make_inputs())
    gm = build(len(inputs), body)
    lowered = lower_pointwise(gm, inputs, dynamic=dynamic)
    message = compare_outputs(gm, inputs, lowered(*inputs), f"{name} output")
    return {"name": name, "device": device, "cases": 1, "modes": sorted({k.mode for k in lowered.meta["pointwise_kernels"]}),
            "failures": [message] if message else []}


def failure_report(record: dict, shown: int = 3) -> str:
    """An assertion message for a record with failures: how many, and the first ``shown`` in full."""
    failures = record["failures"]
    more = f"\n... and {len(failures) - shown} more" if len(failures) > shown else ""
    return (f"{record['name']} on {record['device']}: {len(failures)} of {record['cases']} cases fail\n" +
            "\n".join(failures[:shown]) + more)


def spawn(out, suite: str, names, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m tests._cuda_run out suite names...`` in a subprocess without ``TRITON_INTERPRET``
    (``env``: variables to set there besides)."""
    child = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    child.update(PYTHONPATH=ROOT + os.pathsep + child.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-m", "tests._cuda_run", str(out), suite, *names], cwd=ROOT, env=child,
                          capture_output=True, text=True)


def run(suite: str, names, tmp_path) -> list:
    """The records of ``names`` (table rows or golden graphs, by ``suite``) run on CUDA in a process of
    their own; fails with the child's stderr where it could not run."""
    out = tmp_path / f"cuda-{suite}.json"
    proc = spawn(out, suite, names)
    assert proc.returncode == 0, f"python -m tests._cuda_run exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return json.loads(out.read_text())["records"]


@functools.lru_cache(maxsize=None)
def batch(suite: str) -> dict:
    """Every table row (or golden graph) of ``suite`` run on CUDA in one process of its own, once per
    test process, by name: a child per row would pay CUDA's and Triton's start-up 87 times."""
    out = pathlib.Path(tempfile.mkdtemp(prefix="fx-cuda-"))
    return {r["name"]: r for r in run(suite, sorted(_items(suite)), out)}


def _items(suite: str) -> dict:
    if suite == "table":
        return {row.name: row for row in POINTWISE}
    return {name: name for name in GOLDEN}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests._cuda_run", description="the pointwise table or golden "
                                "tests on CUDA, kernels compiled by Triton; a JSON record per name in OUT")
    p.add_argument("out")
    p.add_argument("suite", choices=SUITES)
    p.add_argument("names", nargs="+", help="table rows (aten.add.Tensor) or golden graphs (chain8)")
    args = p.parse_args(argv)
    items = _items(args.suite)
    unknown = [n for n in args.names if n not in items]
    if unknown:
        print(f"names={','.join(unknown)}, but should be {args.suite} names ({len(items)}, such as "
              f"{', '.join(sorted(items)[:2])}): see tests/test_pointwise_{args.suite}.py", file=sys.stderr)
        return 2
    if _runtime.interpreting():
        print("TRITON_INTERPRET=1 is set: kernels would be interpreted, not compiled for the GPU; run without it",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("needs a CUDA device: torch.cuda.is_available() is False here", file=sys.stderr)
        return 2
    judge = judge_row if args.suite == "table" else judge_golden
    records = [judge(items[n], "cuda") for n in args.names]
    with open(args.out, "w") as f:
        json.dump({"pid": os.getpid(), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "records": records}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

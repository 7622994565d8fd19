"""Learning a device's ``DeviceSupport`` table from the device: the probe, and its cache.

Each catalog row the device's dispatch key has a kernel for is drawn there at each dtype it lists,
until one call runs; a call that raises on the device where the same call runs on the CPU is a
refusal (``probe``). The probe draws as ``graphs()`` draws (``draw.aten_graphs``), with a table that
refuses nothing, and listens to the calls the builder runs (``report_calls``). The table is cached
per torch version, device name and catalog (``FX_CONFORMANCE_CACHE``, default
``~/.cache/fx-conformance``); on a GPU the probe runs in child processes (``probe_worker.py``), so a
call that kills its process refuses its row's dtype instead of killing the caller.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import threading
from dataclasses import replace

import torch

from .._build.device import _override, device_error, device_name, has_kernel, op_name, report_calls, signature
from .._catalog.ops import OPS
from .._catalog.vocabulary import ALL_DTYPES, BOOL, INPLACE, RANDOM
from . import draw
from .support import DeviceSupport, cpu_support, primary_dtype


# --- tables ------------------------------------------------------------------------------------------


_MEMORY: dict = {}
_LOCK = threading.Lock()


def support_for(device) -> DeviceSupport:
    """The table of ``device``: the catalog for the CPU; for another device, the cached probe or a
    new one (``probe``), made once per process, torch version, device name and catalog."""
    device = torch.device(device)
    if device.type == "cpu":
        return cpu_support()
    key = _cache_key(device)
    with _LOCK:
        if key in _MEMORY:
            return _MEMORY[key]
        path = cache_dir() / f"{key}.json"
        with _file_lock(path.with_suffix(".lock")):  # pytest-xdist workers wait for one probe, then read it
            try:
                found = DeviceSupport.from_json(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError):
                found = probe(device)
                _store(path, found)
        _MEMORY[key] = found
        return found


def drawing_support(device: torch.device) -> tuple:
    """``(run_device, support)`` for drawing graphs for ``device``: where the builder computes, and
    the table that narrows the catalog (a simulated device's recorded one, the probe's permissive
    one while it runs, else the device's own)."""
    override = _override(device)
    if override is not None:
        return override[1] or device, override[2]
    return device, support_for(device)


@contextlib.contextmanager
def _file_lock(path: pathlib.Path):
    """An exclusive lock on ``path`` between processes (none where the cache cannot be written)."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")  # noqa: SIM115 - held for the block
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        handle.close()  # releases the lock


def cache_dir() -> pathlib.Path:
    base = os.environ.get("FX_CONFORMANCE_CACHE")
    if base:
        return pathlib.Path(base) / "devices"
    return pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "fx-conformance" / "devices"


def _cache_key(device: torch.device) -> str:
    catalog = "|".join(f"{row.name}:{sorted(map(str, row.dtypes))}" for row in OPS)
    here = pathlib.Path(__file__).parent  # the probe's code, and the tables' and drawing's it runs
    probe_code = b"".join((here / name).read_bytes() for name in ("probe.py", "support.py", "draw.py"))
    digest = hashlib.sha1(catalog.encode() + probe_code).hexdigest()[:12]
    slug = "".join(c if c.isalnum() else "-" for c in f"{device.type}-{device_name(device)}")
    return f"{slug}-torch{torch.__version__}-{digest}"


def _store(path: pathlib.Path, found: DeviceSupport) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(found.to_json(), indent=1))
        os.replace(tmp, path)
    except OSError:  # a read-only home: the probe runs again in the next process
        pass


# --- the probe -----------------------------------------------------------------------------------------


def _recorder(log: list):
    """A listener for ``report_calls`` that appends each call the builder runs to ``log``, as
    (op name, signature, primary dtype, error or None, whether the CPU runs the call)."""

    def record(target, args, kwargs, error: str | None, out=None) -> None:
        if error is None and any(isinstance(t, torch.Tensor) and not t.numel() for t in _flat(args, kwargs)):
            return  # an empty operand may return before any kernel runs (a bool mm of [0, k]): no evidence
        cpu_runs = None
        if error is not None:  # refused here, or by any device? Only the former is the device's fact.
            try:
                moved_args, moved_kwargs = _to_cpu(args), _to_cpu(kwargs)
                target(*moved_args, **moved_kwargs)
                cpu_runs = True
            except Exception:  # noqa: BLE001 - the CPU refuses it too: a bad call, not a device's limit
                cpu_runs = False
        log.append((op_name(target), signature(args, kwargs), primary_dtype(args, kwargs, out, target), error,
                    cpu_runs))

    return record


def _flat(*objs):
    for obj in objs:
        if isinstance(obj, (tuple, list)):
            yield from _flat(*obj)
        elif isinstance(obj, dict):
            yield from _flat(*obj.values())
        else:
            yield obj


def _to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu")
    if isinstance(obj, torch.device):
        return torch.device("cpu")
    if isinstance(obj, tuple):
        return tuple(_to_cpu(o) for o in obj)
    if isinstance(obj, list):
        return [_to_cpu(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj


def probe(device, rows=None, *, examples: int = 12, isolate: bool | None = None,
          prelude: str | None = None, jobs: int | None = None) -> DeviceSupport:
    """Learn ``device``'s table from the device: each row (default: the catalog) whose op has a
    kernel for the device is drawn there, one dtype it lists at a time, until a call of it at that
    dtype runs or ``examples`` graphs were drawn. A dtype no call ran at, where one raised on the
    device and ran on the CPU, is refused for the row (``probe_item``); a call the device raised
    on where the CPU ran it is a refused call (unless the same signature ran too). Deterministic (derandomized draws).

    ``isolate`` (default: for any device but the CPU) probes in a child process, so that a call
    that kills its process (a SIGSEGV in a GPU library, a device-side assert that poisons the CUDA
    context, a hang) refuses its row's dtype instead of killing the caller: the child is started
    again after the (row, dtype) it died on (``_probe_isolated``), ``jobs`` children at a time
    (default: half the CPUs, at most 8; the catalog took ~3 min in one child on an H100 machine
    with torch 2.11, two SIGSEGVs included). Isolated rows are catalog rows
    at any of their dtypes (the child finds them by name); ``prelude`` (``pkg.mod:fn``) is called in each child first."""
    device = torch.device(device)
    rows = OPS if rows is None else tuple(rows)
    runs = [row for row in rows if has_kernel(row.overload, device.type)]
    items = [(row.name, str(dtype).removeprefix("torch.")) for row in runs for dtype in sorted(row.dtypes, key=str)]
    log: list = []
    refused_dtypes: dict = {}
    if device.type != "cpu" if isolate is None else isolate:
        catalog = {row.name: row for row in OPS}
        custom = [row.name for row in runs if row.name not in catalog or replace(row, dtypes=catalog[row.name].dtypes)
                  != catalog[row.name]]
        if custom:
            raise ValueError(f"an isolated probe finds its rows by name in the catalog (at any of their dtypes); "
                             f"these are not catalog rows: {custom}")
        jobs = jobs or max(1, min(8, (os.cpu_count() or 2) // 2))
        outcomes = _probe_children(device, items, examples, prelude, jobs)
    else:
        by_name = {row.name: row for row in runs}
        outcomes = (probe_item(device, by_name[name], dtype, examples) for name, dtype in items)
    for (name, dtype), (entries, refusal) in zip(items, outcomes):
        log.extend(entries)
        if refusal is not None:
            refused_dtypes.setdefault(name, {})[dtype] = refusal
    ran = {(op, sig) for op, sig, _, err, _ in log if err is None}
    refused_calls = {}
    for op, sig, _, err, cpu_runs in log:
        if err is not None and cpu_runs and (op, sig) not in ran:
            refused_calls.setdefault((op, sig), err)
    return DeviceSupport(device.type, device_name(device), torch.__version__, "probe",
                         refused_dtypes=refused_dtypes, refused_calls=refused_calls,
                         rows=frozenset(row.name for row in runs))


def probe_item(device: torch.device, row, dtype_name: str, examples: int) -> tuple:
    """``(log entries, refusal)`` of one row at one dtype: the calls the builder ran while drawing
    graphs of the row at the dtype on ``device``, and why the dtype is refused (None: a call ran)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable


    dtype = getattr(torch, dtype_name)
    drawn = dtype if dtype in ALL_DTYPES else torch.float32  # int8/uint8 come from quantize
    log: list = []

    class _Ran(Exception):
        pass

    permissive = DeviceSupport(device.type, device_name(device), torch.__version__, "probe")
    try:
        with report_calls(_recorder(log)):  # a table that refuses nothing: the device decides
            strategy = draw.aten_graphs(ops=[row], dtypes=st.sampled_from([drawn] + ([] if drawn in BOOL else [torch.bool])),
                                        mutations=row.category == INPLACE, random=row.category == RANDOM,
                                        max_nodes=3, device=device, run_device=device, support=permissive)
            body = given(strategy)(_stop_at_a_run(log, 0, row.name, dtype_name, _Ran))
            settings(max_examples=examples, derandomize=True, database=None, phases=(Phase.generate,),
                     deadline=None, verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck))(body)()
    except _Ran:
        return log, None
    except Unsatisfiable:  # nothing drawable at this dtype: refused below
        pass
    if any(op == row.name and err is None and dt == dtype_name for op, _, dt, err, _ in log):
        return log, None  # ran in a graph the strategy then rejected for another reason
    # Refused: a call the device raised on where the CPU runs it (or where there is no CPU to compare
    # with: the CPU itself, or an op with no CPU kernel, the CUDA attention overloads). A dtype no
    # call was drawn at, or whose calls the CPU refuses too (bad arguments), is not refused: every
    # node of a drawn graph runs on the device while it is drawn, so whatever the device does refuse
    # is still kept out, step by step (where.self and the integer scatter.src, whose drawing rules
    # rarely reach some dtypes in a dozen draws, were refused on the H100 before).
    compared = device.type != "cpu" and has_kernel(row.overload, "cpu")
    errors = [err for op, _, dt, err, cpu_runs in log
              if op == row.name and dt == dtype_name and err and (cpu_runs or not compared)]
    return log, errors[0] if errors else None


def _probe_children(device: torch.device, items: list, examples: int, prelude: str | None, jobs: int) -> list:
    """``_probe_isolated``'s outcomes of ``items``, in their order, from ``jobs`` children at a time
    (each takes whole rows, every ``jobs``-th one)."""
    from concurrent.futures import ThreadPoolExecutor

    order = {name: i for i, name in enumerate(dict.fromkeys(name for name, _ in items))}
    chunks = [chunk for j in range(jobs) if (chunk := [it for it in items if order[it[0]] % jobs == j])]
    if len(chunks) <= 1:
        return list(_probe_isolated(device, items, examples, prelude))
    with ThreadPoolExecutor(len(chunks)) as pool:
        done = list(pool.map(lambda chunk: list(_probe_isolated(device, chunk, examples, prelude)), chunks))
    outcome = {item: result for chunk, results in zip(chunks, done) for item, result in zip(chunk, results)}
    return [outcome[item] for item in items]


_ITEM_S = 120.0  # one (row, dtype) of an isolated probe; a child that takes longer is killed
_START_S = 300.0  # a child's start-up, to its first item


def _probe_isolated(device: torch.device, items: list, examples: int, prelude: str | None):
    """Yield ``probe_item``'s outcome of each item, computed in child processes
    (``python -m strategies._draw.probe_worker``): one child probes the items in order and reports each
    as a line of JSON; where it dies or hangs on one, that item is refused with how it died and a
    new child goes on from the next."""
    import queue
    import subprocess
    import sys
    import tempfile

    root = str(pathlib.Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    todo = list(items)
    while todo:
        argv = [sys.executable, "-m", "strategies._draw.probe_worker", str(device), str(examples), prelude or ""]
        with tempfile.TemporaryFile("w+") as err:
            child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                     env=env)
            child.stdin.write(json.dumps(todo))
            child.stdin.close()
            lines: queue.Queue = queue.Queue()
            reader = threading.Thread(target=_forward_lines, args=(child.stdout, lines), daemon=True)
            reader.start()
            started, finished = None, 0
            while True:
                try:  # the child's start-up (imports) is not an item's time
                    line = lines.get(timeout=_ITEM_S if started else _START_S)
                except queue.Empty:
                    child.kill()
                    child.wait()
                    how = f"did not finish within {_ITEM_S if started else _START_S:.0f} s (killed)"
                    break
                if line is None:  # the child is gone
                    code = child.wait()
                    how = _death(code, err)
                    break
                try:
                    msg = json.loads(line)
                except ValueError:  # something else the child printed
                    continue
                if not isinstance(msg, dict):
                    continue
                if "start" in msg:
                    started = tuple(msg["start"])
                    continue
                entries = [(op, tuple(sig), dt, e, cpu) for op, sig, dt, e, cpu in msg["log"]]
                todo.pop(0)
                started, finished = None, finished + 1
                yield entries, msg["refusal"]
            if started is None:  # ended between items (after a poisoned one), or before the first
                if not todo:
                    return
                if finished:
                    continue
                raise RuntimeError(f"the device probe's child process {how} before probing {todo[0]}")
            todo.pop(0)
            yield [], f"{started[0]} at {started[1]}: {how} while probing it on {device}"


def _forward_lines(stream, lines) -> None:
    """Each line of ``stream`` into the queue ``lines``, then None (the stream ended)."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def _death(code: int, err) -> str:
    import signal

    err.seek(0)
    last = next((line.strip() for line in reversed(err.read().splitlines())
                 if line.strip() and "Warning:" not in line), "")  # torch's C++ warnings say nothing of it
    how = f"killed its process ({signal.Signals(-code).name})" if code < 0 else f"ended its process (exit {code})"
    return f"{how}{': ' + last[:200] if last else ''}"


def serve_probe(device: str, examples: int, prelude: str) -> None:
    """The child of ``_probe_isolated``: probe the items read from stdin, each reported on stdout
    (a ``start`` line, then its outcome). A CUDA error after an item poisons the context: the item
    is refused with it and the process ends, for the parent to start a new one."""
    import importlib
    import sys

    if prelude:
        module, _, fn = prelude.partition(":")
        getattr(importlib.import_module(module), fn)()
    device = torch.device(device)
    rows = {row.name: row for row in OPS}
    for name, dtype in json.loads(sys.stdin.read()):
        print(json.dumps({"start": [name, dtype]}), flush=True)
        entries, refusal = probe_item(device, rows[name], dtype, examples)
        error = device_error(device)
        poisoned = f"{name} at {dtype}: a CUDA error after its calls ({error})" if error else None
        print(json.dumps({"log": [list(e) for e in entries], "refusal": poisoned or refusal}), flush=True)
        if poisoned:
            os._exit(3)


def _stop_at_a_run(log: list, start: int, row_name: str, dtype_name: str, stop: type):
    """A test body that stops the probe's draws once a call of the row at the dtype has run."""

    def body(case):
        if any(op == row_name and err is None and dt == dtype_name for op, _, dt, err, _ in log[start:]):
            raise stop

    return body


__all__ = ["cache_dir", "drawing_support", "probe", "support_for"]

"""Which device a graph is drawn for, and what that device runs.

A drawn graph runs in eager on the device it is drawn for: the builder computes every node there
(``GraphBuilder.run_device``), so whatever the device refuses (CUDA has no integer ``mm``, the CPU
no ``_scaled_dot_product_efficient_attention``) is rejected while the graph is drawn. On top of that
a ``DeviceSupport`` table says, per catalog row, the dtypes the device runs, and which operand dtype
combinations of a call it refused, so the generator does not waste its steps on them and a graph
drawn for a device holds only what that device runs:

- the CPU's table is the catalog itself (every listed dtype is measured on the CPU by
  tests/test_catalog.py), less the rows the dispatcher has no CPU kernel for;
- any other device's table is learned from the device (``probe``): each catalog row the device's
  dispatch key has a kernel for is drawn there at each dtype it lists, until one call runs; a
  call that raises on the device where the same call runs on the CPU is a refusal. The table is
  cached per torch version, device name and catalog (``FX_CONFORMANCE_CACHE``, default
  ``~/.cache/fx-conformance``) and never hard-coded from one GPU.

Factories carry ``device=`` as traced graphs do (``placed``), and a graph's random ops draw from
the generator of its device (``seeded``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pathlib
import threading
from dataclasses import dataclass, field, replace

import torch

from ._errors import InvalidArgument

SCHEMA = 1
_DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}
_COMPOSITE = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def op_name(target) -> str:
    """``aten.mm.default`` for an OpOverload (the catalog's row names); ``str`` of anything else."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return getattr(target, "__name__", str(target))
    namespace, packet = schema.name.split("::")
    return f"{namespace}.{packet}.{target._overloadname}"


def signature(args, kwargs) -> tuple:
    """The dtypes of a call's tensor operands, in argument order: what a device may refuse."""
    out = []

    def walk(obj):
        if isinstance(obj, torch.Tensor):
            out.append(str(obj.dtype).removeprefix("torch."))
        elif isinstance(obj, (tuple, list)):
            for o in obj:
                walk(o)
        elif isinstance(obj, dict):
            for o in obj.values():
                walk(o)

    walk(args)
    walk(kwargs)
    return tuple(out)


def primary_dtype(args, kwargs, out=None, target=None) -> str | None:
    """The dtype a catalog row's ``dtypes`` describe for this call: its first tensor operand's after
    the bool masks the row of ``target`` opens with (``where.self``'s condition), or for a factory
    (no tensor operand) its result's (``dtype=``, else the default dtype)."""
    sig = signature(tuple(args)[_leading_masks(target):], {})
    if sig:
        return sig[0]
    if isinstance(out, torch.Tensor):
        return str(out.dtype).removeprefix("torch.")
    dtype = kwargs.get("dtype") if isinstance(kwargs, dict) else None
    return str(dtype or torch.get_default_dtype()).removeprefix("torch.")


@functools.lru_cache(maxsize=None)
def _leading_masks(target) -> int:
    """How many bool mask operands open a call of ``target``'s catalog row (0 for any other)."""
    from ._catalog import MASK
    from ._ops import OPS

    row = next((r for r in OPS if r.overload is target), None)
    if row is None or row.draws_whole_call:
        return 0
    return next((i for i, kind in enumerate(row.args) if kind != MASK), 0)


def has_kernel(overload, device_type: str) -> bool:
    """Whether torch's dispatcher has a kernel of ``overload`` for ``device_type`` (or a composite
    one that runs anywhere). A CPU build has no CUDA kernels at all, so this decides CPU rows only
    there; a CUDA build answers for both."""
    key = _DISPATCH_KEYS.get(device_type)
    name = overload.name()  # aten::add.Tensor
    if key is None:
        return True
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, k) for k in (key, *_COMPOSITE))


@dataclass(frozen=True)
class DeviceSupport:
    """What one device runs, as refusals: ``refused_dtypes`` maps a row name to the dtypes (of the
    operand the row's dtypes describe) it never ran at, with the error; ``refused_calls`` maps an
    ``(op name, signature)`` to the error of a call the device refused where the CPU ran it (mixed
    dtypes: a float16 ``native_layer_norm`` with float32 weights). Rows absent run at every listed
    dtype. ``rows`` (when not None) are the only rows the device has kernels for."""

    device: str  # the device type: "cpu", "cuda"
    name: str  # "cpu", or the GPU's name: the cache key with the torch version
    torch_version: str
    source: str  # "catalog", "probe" or a recorded table's description
    refused_dtypes: dict = field(default_factory=dict)  # row name -> {dtype name: error}
    refused_calls: dict = field(default_factory=dict)  # (op name, signature) -> error
    rows: frozenset | None = None  # names of the rows the device has kernels for (None: every row)

    def runs_row(self, row) -> bool:
        return (self.rows is None or row.name in self.rows) and bool(self.dtypes_of(row))

    def dtypes_of(self, row) -> frozenset:
        refused = self.refused_dtypes.get(row.name, {})
        return frozenset(d for d in row.dtypes if str(d).removeprefix("torch.") not in refused)

    def narrow(self, rows) -> tuple:
        """``rows`` the device runs, each with only the dtypes it runs."""
        out = []
        for row in rows:
            if not self.runs_row(row):
                continue
            dtypes = self.dtypes_of(row)
            out.append(row if dtypes == row.dtypes else replace(row, dtypes=dtypes))
        return tuple(out)

    def refusal(self, target, args, kwargs) -> str | None:
        """Why the device does not run this call (None: it may)."""
        name = op_name(target)
        if self.refused_calls:  # the signature walk only where a refused call could match (the CPU has none)
            sig = signature(args, kwargs)
            if (name, sig) in self.refused_calls:
                return f"{self.device} refuses {name}{sig}: {self.refused_calls[name, sig]}"
        refused = self.refused_dtypes.get(name)
        if refused:
            dtype = primary_dtype(args, kwargs, target=target)
            if dtype in refused:
                return f"{self.device} refuses {name} on {dtype}: {refused[dtype]}"
        if self.rows is not None and name not in self.rows and name in _catalog_names():
            return f"{self.device} has no kernel for {name}"
        return None

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "device": self.device, "name": self.name, "torch": self.torch_version,
                "source": self.source, "refused_dtypes": self.refused_dtypes,
                "refused_calls": [{"op": op, "dtypes": list(sig), "error": err}
                                  for (op, sig), err in sorted(self.refused_calls.items())],
                "rows": None if self.rows is None else sorted(self.rows)}

    @classmethod
    def from_json(cls, data: dict) -> DeviceSupport:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema={data.get('schema')!r}, but should be {SCHEMA}")
        return cls(device=data["device"], name=data["name"], torch_version=data["torch"], source=data["source"],
                   refused_dtypes={k: dict(v) for k, v in data["refused_dtypes"].items()},
                   refused_calls={(c["op"], tuple(c["dtypes"])): c["error"] for c in data["refused_calls"]},
                   rows=None if data.get("rows") is None else frozenset(data["rows"]))


@functools.lru_cache(maxsize=1)
def _catalog_names() -> frozenset:
    from ._ops import OPS

    return frozenset(row.name for row in OPS)


# --- the device a strategy draws for -----------------------------------------------------------------


# (device type, run device or None for the device itself, table): what graphs drawn for that device
# type use instead of the device's own table, while ``simulated`` or the probe runs.
_OVERRIDE = threading.local()


@contextlib.contextmanager
def _overridden(device_type: str, run_device, support: DeviceSupport):
    outer = getattr(_OVERRIDE, "value", None)
    _OVERRIDE.value = (device_type, run_device, support)
    try:
        yield
    finally:
        _OVERRIDE.value = outer


def _override(device: torch.device):
    value = getattr(_OVERRIDE, "value", None)
    return value if value is not None and value[0] == device.type else None


def simulated(device: str, support: DeviceSupport):
    """Draw graphs "for ``device``" on the CPU with a recorded ``support`` table (tests on machines
    without that device): every node is computed on the CPU, the graph says ``device`` (factories),
    and the table alone keeps out what the device refuses. Not a way to run anything on it."""
    return _overridden(torch.device(device).type, torch.device("cpu"), support)


def check_device(device) -> torch.device:
    """``device`` as a ``torch.device``; InvalidArgument where it is not a device this machine has."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidArgument(f"device={device!r} is not a torch device; pass 'cpu', 'cuda' or 'cuda:N'") from None
    if _override(dev) is not None:
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidArgument(f"device={device!r}, but torch.cuda.is_available() is False on this machine "
                                  f"(torch {torch.__version__}); draw for device='cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InvalidArgument(f"device={device!r}, but this machine has {torch.cuda.device_count()} CUDA devices")
    elif dev.type != "cpu":
        raise InvalidArgument(f"device={device!r}: graphs are drawn for 'cpu' or 'cuda' devices")
    return dev


def drawing_support(device: torch.device) -> tuple:
    """``(run_device, support)`` for drawing graphs for ``device``: where the builder computes, and
    the table that narrows the catalog (a simulated device's recorded one, the probe's permissive
    one while it runs, else the device's own)."""
    override = _override(device)
    if override is not None:
        return override[1] or device, override[2]
    return device, support_for(device)


# --- tables ------------------------------------------------------------------------------------------

_MEMORY: dict = {}
_LOCK = threading.Lock()


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


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


@functools.lru_cache(maxsize=1)
def cpu_support() -> DeviceSupport:
    from ._ops import OPS

    return DeviceSupport("cpu", "cpu", torch.__version__, "catalog",
                         rows=frozenset(row.name for row in OPS if has_kernel(row.overload, "cpu")))


def cache_dir() -> pathlib.Path:
    base = os.environ.get("FX_CONFORMANCE_CACHE")
    if base:
        return pathlib.Path(base) / "devices"
    return pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "fx-conformance" / "devices"


def _cache_key(device: torch.device) -> str:
    from ._ops import OPS

    catalog = "|".join(f"{row.name}:{sorted(map(str, row.dtypes))}" for row in OPS)
    probe_code = pathlib.Path(__file__).read_bytes()
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

# While a probe runs, the builder appends (op name, signature, primary dtype, error or None, whether
# the CPU runs the call) here.
_PROBE = threading.local()


def record_attempt(target, args, kwargs, error: str | None, out=None) -> None:
    """Called by the builder for every call it runs (a no-op outside ``probe``)."""
    log = getattr(_PROBE, "log", None)
    if log is None:
        return
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
    log.append((op_name(target), signature(args, kwargs), primary_dtype(args, kwargs, out, target), error, cpu_runs))


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
    from ._ops import OPS

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

    from ._catalog import ALL_DTYPES, BOOL, INPLACE, RANDOM
    from ._graphs import graphs

    dtype = getattr(torch, dtype_name)
    drawn = dtype if dtype in ALL_DTYPES else torch.float32  # int8/uint8 come from quantize
    log: list = []

    class _Ran(Exception):
        pass

    outer = getattr(_PROBE, "log", None)
    _PROBE.log = log
    permissive = DeviceSupport(device.type, device_name(device), torch.__version__, "probe")
    try:
        with _overridden(device.type, None, permissive):  # no refusals yet: the device decides
            strategy = graphs(ops=[row], dtypes=st.sampled_from([drawn] + ([] if drawn in BOOL else [torch.bool])),
                              mutations=row.category == INPLACE, random=row.category == RANDOM,
                              max_nodes=3, device=device)
            body = given(strategy)(_stop_at_a_run(log, 0, row.name, dtype_name, _Ran))
            settings(max_examples=examples, derandomize=True, database=None, phases=(Phase.generate,),
                     deadline=None, verbosity=Verbosity.quiet, suppress_health_check=list(HealthCheck))(body)()
    except _Ran:
        return log, None
    except Unsatisfiable:  # nothing drawable at this dtype: refused below
        pass
    finally:
        _PROBE.log = outer
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
    (``python -m strategies._probe_worker``): one child probes the items in order and reports each
    as a line of JSON; where it dies or hangs on one, that item is refused with how it died and a
    new child goes on from the next."""
    import queue
    import subprocess
    import sys
    import tempfile

    root = str(pathlib.Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    todo = list(items)
    while todo:
        argv = [sys.executable, "-m", "strategies._probe_worker", str(device), str(examples), prelude or ""]
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

    from ._ops import OPS

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


def device_error(device: torch.device) -> str | None:
    """The asynchronous error ``device``'s kernels left (a CUDA error poisons the context: every
    later call fails), or None."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
    except Exception as exc:  # noqa: BLE001 - any error of the kernels launched so far
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return None


def _stop_at_a_run(log: list, start: int, row_name: str, dtype_name: str, stop: type):
    """A test body that stops the probe's draws once a call of the row at the dtype has run."""

    def body(case):
        if any(op == row_name and err is None and dt == dtype_name for op, _, dt, err, _ in log[start:]):
            raise stop

    return body



# --- factories and generators ------------------------------------------------------------------------


def placed(target, kwargs: dict, device: torch.device) -> dict:
    """``kwargs`` of a call of ``target`` with ``device=`` where a traced graph has it: always on a
    factory (an op with a ``device`` argument and no tensor operand: ``zeros``, ``full``,
    ``arange``, ``empty``), and rewritten where given on any other op (``_to_copy``)."""
    takes = _device_argument(target)
    if takes is None:
        return kwargs
    if takes == "factory" or kwargs.get("device") is not None:
        return {**kwargs, "device": device}
    return kwargs


@functools.lru_cache(maxsize=None)
def _device_argument(target) -> str | None:
    """None (no ``device`` argument), ``"factory"`` (one, and no tensor operand) or ``"op"``."""
    schema = getattr(target, "_schema", None)
    if schema is None or not any(a.name == "device" for a in schema.arguments):
        return None
    return "op" if any("Tensor" in str(a.type) for a in schema.arguments) else "factory"


def relocate(gm, device) -> None:
    """Point ``gm``'s calls at ``device`` in place: factories' ``device=`` (added where missing, as
    traced graphs have it) and any other op's ``device=`` where given. Constants are moved by
    ``gm.to(device)``; this is what ``to`` does not know about."""
    device = torch.device(device)
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function":
            kwargs = placed(node.target, dict(node.kwargs), device)
            if kwargs != dict(node.kwargs):
                node.kwargs = kwargs
                changed = True
    if changed:
        gm.recompile()


def device_of(tensors) -> torch.device:
    """The device of the first tensor among ``tensors`` (CPU when there is none)."""
    return next((t.device for t in tensors if isinstance(t, torch.Tensor)), torch.device("cpu"))


def _cuda_indices(device) -> list:
    device = torch.device(device)
    return [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []


def forked_rng(device):
    """The caller's generators (the CPU's and ``device``'s) as they were, whatever runs inside."""
    return torch.random.fork_rng(devices=_cuda_indices(device), device_type="cuda")


@contextlib.contextmanager
def seeded(device, seed: int):
    """Run with ``device``'s generator (and the CPU's) at ``seed``, restoring the caller's after."""
    indices = _cuda_indices(device)
    with torch.random.fork_rng(devices=indices, device_type="cuda"):
        torch.default_generator.manual_seed(seed)  # torch.manual_seed would seed every device, unrestored
        for i in indices:
            torch.cuda.default_generators[i].manual_seed(seed)
        yield


def rng_state(device) -> tuple:
    indices = _cuda_indices(device)
    return (torch.random.get_rng_state(), *(torch.cuda.get_rng_state(i) for i in indices))


def set_rng_state(device, state: tuple) -> None:
    torch.random.set_rng_state(state[0])
    for i, s in zip(_cuda_indices(device), state[1:]):
        torch.cuda.set_rng_state(s, i)


__all__ = ["DeviceSupport", "check_device", "has_kernel", "op_name", "placed", "probe", "relocate", "seeded",
           "signature", "simulated", "support_for"]

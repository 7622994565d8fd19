"""The on-disk cache of trigger discovery, shared by processes: its key, its files and the lock.

``_cache_key(put, mutations)`` changes when the pass's code (its file and its package's, by
content), the options it is called with, the generator (its catalog and code), discovery's own code,
Hypothesis or torch changes, and is None for a pass with no stable identity (a lambda). An entry is
one JSON file under ``cache_dir()`` (``FX_CONFORMANCE_CACHE``, default ``~/.cache/fx-conformance``),
read by ``read_entry`` and written whole by ``write_entry``; ``_discovering(key, limit)`` is held
while a key is discovered, so processes discovering one pass at once probe it once. What the entries
hold (``Triggers``) and the in-process memory of them stay in ``triggers.py``.

The probe graphs (the one-op graphs of every catalog row, the plain graphs discovery weighs a focus
on, and the graphs of a user's op edges) do not depend on the pass: one file beside the entries holds
them (``read_probe_graphs``, ``write_probe_graphs``), keyed on the generator, Hypothesis, torch and the
machine, so that a cold discovery of a new pass loads them (0.3 s) instead of drawing them (4 s on a
2-core Intel Xeon; a fusion's edge graphs, post-grad, 6 s).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import inspect
import json
import os
import pathlib
import pickle
import platform
import time
import types

import torch

import hypothesis
import strategies
from strategies import OPS

# Discovery's own code, hashed into every key: an edit to how it discovers invalidates what it found.
_DISCOVERY = ("triggers.py", "static_triggers.py", "trigger_cache.py")


def _contents(files) -> str:
    """A hash of the files' names and contents (not their times: a checkout or a copy keeps the key)."""
    digest = hashlib.sha1()
    for f in files:
        try:
            digest.update(f"{f.name}\0".encode() + f.read_bytes() + b"\0")
        except OSError:
            digest.update(f"{f.name}\0missing\0".encode())
    return digest.hexdigest()[:16]


def _generator_fingerprint() -> str:
    """The catalog's rows, the strategies package's files (what the probe graphs depend on) and
    discovery's modules (what discovery does), by content."""
    here = pathlib.Path(__file__).parent
    files = [*sorted(pathlib.Path(strategies.__file__).parent.rglob("*.py")), *(here / name for name in _DISCOVERY)]
    return hashlib.sha1(("|".join(row.name for row in OPS) + _contents(files)).encode()).hexdigest()[:12]


def _pass_sources(put) -> str:
    """The pass's code by content: its source file and the other modules of its package (the helpers it
    calls); a pass inside torch by its file's place in torch (torch's version is part of every key)."""
    try:
        obj = put.fn
        if not isinstance(obj, (types.FunctionType, types.MethodType, type)):
            obj = getattr(obj, "func", None) or type(obj)
        source = pathlib.Path(inspect.getsourcefile(obj) or "")
    except (TypeError, OSError):
        return "nosource"
    if not source.is_file():
        return "nosource"
    torch_dir = pathlib.Path(torch.__file__).parent
    if torch_dir in source.parents:
        return f"torch:{source.relative_to(torch_dir)}"
    package = source.parent if (source.parent / "__init__.py").is_file() else None
    files = sorted(package.rglob("*.py")) if package is not None else [source]
    return f"{source.name}:{_contents(files if len(files) <= 200 else [source])}"


def _named(obj) -> str:
    """A stable name of a context or settings factory (its import path where it has one)."""
    if obj is None:
        return ""
    if isinstance(obj, str):
        return obj
    return f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def _cache_key(put, mutations) -> str | None:
    """A key that changes when the pass's code (its file and its package's, by content), the options
    it is called with (``--pass-arg``, ``--context``, a settings factory, the calling form), the
    generator (its catalog and code), Hypothesis (which draws the probes) or torch changes; None when
    the pass has no stable identity (a lambda)."""
    ref = getattr(put, "reference", None)
    if not ref:
        return None
    options = repr((put.form, sorted((k, repr(v)) for k, v in (put.kwargs or {}).items()), _named(put.context),
                    _named(put.settings_factory)))
    text = (f"{ref}|{_pass_sources(put)}|{options}|{_generator_fingerprint()}|{hypothesis.__version__}|"
            f"{torch.__version__}|{mutations}")
    return hashlib.sha1(text.encode()).hexdigest()[:20]


def cache_dir() -> pathlib.Path:
    base = os.environ.get("FX_CONFORMANCE_CACHE")
    if base:
        return pathlib.Path(base) / "triggers"
    return pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "fx-conformance" / "triggers"


def read_entry(key: str) -> dict:
    """The entry stored under ``key`` (OSError where there is none, ValueError where it is not JSON)."""
    return json.loads((cache_dir() / f"{key}.json").read_text())


def write_entry(key: str, data: dict) -> None:
    """Store ``data`` under ``key``, whole (a reader never sees half a file); nothing where the cache
    cannot be written."""
    try:
        path = cache_dir() / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:  # a read-only home: discovery just runs again next time
        pass


@contextlib.contextmanager
def _discovering(key, limit):
    """Held while ``key`` is discovered: processes that discover one pass at once (pytest-xdist's
    workers each set up the plugin's fixture, parallel runs verify one pass) wait for the first and
    read its result instead of each probing the pass. A holder that takes longer than discovery's
    own limit is not waited for further."""
    fd = None
    if key is not None:
        try:
            cache_dir().mkdir(parents=True, exist_ok=True)
            fd = os.open(cache_dir() / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        except OSError:  # a read-only cache: no lock, as no cache
            fd = None
    try:
        if fd is not None:
            give_up = None if limit is None else time.monotonic() + limit
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if give_up is not None and time.monotonic() > give_up:
                        break
                    time.sleep(0.05)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock (a forked prober's inherited copy closes when it exits)


# --- the probe graphs: drawn once per generator, torch, Hypothesis and machine, for every pass ----------


@functools.lru_cache(maxsize=1)
def _machine() -> str:
    """What a drawn graph may depend on beyond the generator's code: the CPU (eager kernels decide which
    drawn calls are kept: an Intel and an AMD machine draw other graphs at one seed) and the kernels'
    capability (``ATEN_CPU_CAPABILITY``)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}|{torch.backends.cpu.get_cpu_capability()}"


def probe_graphs_path() -> pathlib.Path:
    """The file of the probe graphs this process would draw (its name changes with what they depend on)."""
    text = f"{_generator_fingerprint()}|{hypothesis.__version__}|{torch.__version__}|{_machine()}"
    return cache_dir() / f"probe-graphs-{hashlib.sha1(text.encode()).hexdigest()[:16]}.pickle"


def read_probe_graphs() -> dict:
    """``{key: [bytes, ...]}``: the stored probe graphs (``conformance.search._wire`` bytes), or ``{}``
    where there are none or the file cannot be read (they are drawn again)."""
    try:
        data = pickle.loads(probe_graphs_path().read_bytes())
    except Exception:  # noqa: BLE001 - a missing, truncated or foreign file: draw them again
        return {}
    return data if isinstance(data, dict) else {}


_PROBE_GRAPHS_BYTES = 32 << 20  # the file's size past which the graphs of other passes' probes are dropped


def write_probe_graphs(data: dict) -> None:
    """Store ``data`` (merged with what another process stored meanwhile), whole; nothing where the
    cache cannot be written."""
    try:
        path = probe_graphs_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        merged = {**read_probe_graphs(), **data}
        blob = pickle.dumps(merged, protocol=pickle.HIGHEST_PROTOCOL)
        if len(blob) > _PROBE_GRAPHS_BYTES:  # the graphs of many passes' probes: keep the catalog's and these
            blob = pickle.dumps({k: v for k, v in merged.items() if k[0] in ("row", "plain") or k in data},
                                protocol=pickle.HIGHEST_PROTOCOL)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, path)
    except OSError:
        pass


__all__ = ["cache_dir", "probe_graphs_path", "read_entry", "read_probe_graphs", "write_entry", "write_probe_graphs"]

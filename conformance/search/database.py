"""The example database a search shares (issue 37): what any run found, every later run replays first.

``verify(db=...)`` / ``--db`` names it: a directory (Hypothesis' ``DirectoryBasedExampleDatabase``),
``redis://host:port/N`` (its ``RedisExampleDatabase``: one server shared by many machines; also
``rediss://`` and ``unix:///path/to/socket``, as the redis client reads them), or several
of those comma-separated (``MultiplexedDatabase``: a local directory and a team's server, each
replayed, each written). ``db_readonly=True`` / ``--db-readonly`` wraps it in ``ReadOnlyDatabase``:
CI replays what the team found and writes nothing. Without ``db`` a search keeps no database, as
before.

Each search has its own key (``search_key``): the pass (its import path), and every option that
changes what a saved example draws or how it is judged: IR, graph kind, dynamic sizes, autograd,
sizes, special values, constants, the user's ops, higher-order ops, focus mode, seed programs, the
pass's arguments, and the device type. Not the seed: a failure found at one seed replays at every
other. The same pass under ``--ir post-grad`` and ``aten`` is two searches; a failure found on a
GPU machine replays on a GPU machine, and a search on another device counts it (``other_devices``)
and says so, without replaying it there.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse

from .._errors import UsageError

# the options a saved example's meaning depends on (the seed, budgets and reports are not among them)
_KEYED = ("graphs", "special_values", "constants", "ensure", "preserve", "properties", "signature", "signed_zeros",
          "specials", "focus", "seed_graphs", "sizes", "requires_grad", "dynamic", "ir", "hops", "ops",
          "pass_kwargs", "context", "settings_factory")
DEVICE_TYPES = ("cpu", "cuda")


def open_database(spec: str | None, readonly: bool = False):
    """The ``ExampleDatabase`` ``spec`` names (module docstring), or None for no spec; UsageError for a
    spec it cannot open."""
    if spec is None or spec == "":
        if readonly:
            raise UsageError("db_readonly=True needs db=PATH or redis://host:port/N: there is no database to read")
        return None
    from hypothesis.database import MultiplexedDatabase, ReadOnlyDatabase

    parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    dbs = [_one(p) for p in parts]
    db = dbs[0] if len(dbs) == 1 else MultiplexedDatabase(*dbs)
    return ReadOnlyDatabase(db) if readonly else db


def _one(spec: str):
    from hypothesis.database import DirectoryBasedExampleDatabase

    if "://" not in spec:
        return DirectoryBasedExampleDatabase(spec)
    scheme = urllib.parse.urlparse(spec).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise UsageError(f"db={spec!r}: a database is a directory or redis://host:port/N (rediss://, or "
                         f"unix:///path/to/socket), not {scheme}://")
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise UsageError(f"db={spec!r} needs the redis client: pip install 'fx-conformance[cluster]' "
                         f"(or pip install redis)") from None
    try:
        client = redis.Redis.from_url(spec, socket_connect_timeout=5)
    except ValueError as exc:
        raise UsageError(f"db={spec!r}: {exc}") from None
    try:
        client.ping()
    except redis.RedisError as exc:
        raise UsageError(f"db={spec!r}: no Redis server answers there ({type(exc).__name__}: {exc})") from None
    return RedisExampleDatabase(client, key_prefix=b"fx-conformance:")


def search_key(target: str, opts: dict, device: str) -> bytes:
    """The key of a search of ``target`` with ``opts`` (``resolve_options``'s) on ``device`` (a device
    type, "cpu" or "cuda")."""
    return key_of("search", target, device, {k: opts.get(k) for k in _KEYED})


def key_of(kind: str, target: str, device: str, keyed: dict) -> bytes:
    """A database key: ``kind`` (a key space), then a digest of the target, the device type and the
    options that key it (``keyed``: JSON-able, or keyed by their repr)."""
    text = json.dumps({"target": target, "device": device, **keyed}, sort_keys=True, default=repr)
    return f"fx-conformance.{kind}.".encode() + hashlib.sha256(text.encode()).hexdigest()[:32].encode()


def saved(db, key: bytes) -> int:
    """How many examples ``db`` holds under ``key``."""
    return sum(1 for _ in db.fetch(key)) if db is not None else 0


def other_devices(db, target: str, opts: dict, device: str) -> dict:
    """``{device type: examples saved}`` for the same search on the other device types (not replayed here)."""
    if db is None:
        return {}
    counts = {d: saved(db, search_key(target, opts, d)) for d in DEVICE_TYPES if d != device}
    return {d: n for d, n in counts.items() if n}

"""The search: ``verify()`` drives Hypothesis over generated graphs towards what the pass acts on.

- ``driver.py``: ``verify()``: setting a run up, the Hypothesis search and shrinking, parallel
  searches merged, the result and its reports; over ``options.py`` (its options checked),
  ``findings.py`` (what a search found: the smallest failing example per property, the graphs run;
  the result's counts and the repro scripts made of it) and ``progress.py`` (the reporter's events,
  the JSON report rewritten as the run goes);
- ``triggers.py``: trigger discovery (``discover()``: the ops whose small graphs the pass changes,
  weighed against plain graphs), over ``static_triggers.py`` (the ops and constants the pass's code
  names) and ``trigger_cache.py`` (the on-disk cache per pass and catalog, its key and its lock);
- ``focus.py``: turning ``focus=`` and ``seed_graphs=`` into the generator's ``strategies.Focus``;
- ``fire.py``: fire accounting (how many graphs the pass changed; a vacuous verdict);
- ``isolate.py`` / ``workers.py``: examples in forked children, and parallel searches;
- ``_spawn.py`` / ``_wire.py``: where this process may not fork (CUDA), examples in a worker process
  started by a fork server or spawned, and how a case and the pass travel to it.
"""

from .driver import verify

__all__ = ["verify"]

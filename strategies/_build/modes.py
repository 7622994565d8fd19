"""The thread's modes a graph may switch while it runs: grad mode and autocast.

A graph switches grad mode with ``_set_grad_enabled`` nodes and autocast with ``_enter_autocast`` /
``_exit_autocast`` nodes (the higher-order ops ``wrap_with_set_grad_enabled`` and
``wrap_with_autocast`` restore what they switched). Whoever runs a graph, draws one or traces one
keeps the modes it found (``modes_kept``): a graph that raises half-way, or a pass that dropped the
node that switches a mode back, must not leave the next run in another mode. ``current_modes`` is
what the checker compares after a run of the original and of the pass's result.
"""

from __future__ import annotations

import contextlib

import torch

AUTOCAST_DEVICES = ("cpu", "cuda")


def current_modes() -> tuple:
    """``(grad enabled, ((device type, autocast enabled, autocast dtype), ...))`` of this thread."""
    return (torch.is_grad_enabled(),
            tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES))


def restore_modes(saved: tuple) -> None:
    """Put back the modes ``current_modes()`` returned (autocast's cast cache cleared where it changed)."""
    grad, autocast = saved
    torch._C._set_grad_enabled(grad)
    if autocast != current_modes()[1]:
        for device, enabled, dtype in autocast:
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)
        torch.clear_autocast_cache()


@contextlib.contextmanager
def modes_kept():
    """Run the body; afterwards grad mode and autocast are what they were before it."""
    saved = current_modes()
    try:
        yield
    finally:
        restore_modes(saved)


def describe_modes(actual: tuple, expected: tuple) -> str | None:
    """How the modes after one run (``actual``) differ from those after another, or None."""
    if actual[0] != expected[0]:
        return f"grad mode after the run={actual[0]}, but should be {expected[0]} (a _set_grad_enabled node was " \
               f"dropped or changed)"
    for (device, on, dtype), (_, exp_on, exp_dtype) in zip(actual[1], expected[1]):
        if (on, on and dtype) != (exp_on, exp_on and exp_dtype):
            state = lambda e, d: f"on ({d})" if e else "off"  # noqa: E731
            return f"{device} autocast after the run={state(on, dtype)}, but should be {state(exp_on, exp_dtype)} " \
                   f"(an _exit_autocast node was dropped or changed)"
    return None

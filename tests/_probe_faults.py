"""Faults planted in the child process of an isolated device probe (``probe(..., prelude=...)``):
each replaces the builder's call of one op with one that kills or stalls the process, as a GPU
library's SIGSEGV or a hung kernel would."""

import os
import signal
import time

import torch

from strategies import _builder

_NEG = torch.ops.aten.neg.default


def _planted(effect):
    run = _builder._run

    def faulty(target, args, kwargs):
        if target is _NEG:
            effect()
        return run(target, args, kwargs)

    _builder._run = faulty


def segfault_on_neg():
    _planted(lambda: os.kill(os.getpid(), signal.SIGSEGV))


def hang_on_neg():
    _planted(lambda: time.sleep(3600))


def poison_after_neg():
    """As an illegal memory access in a kernel of neg would: the error shows after its calls, and
    the context is lost (the child refuses the item and ends itself)."""
    from strategies import _device

    ran = []
    _planted(lambda: ran.append(True))
    _device.device_error = lambda device: "an illegal memory access was encountered (planted)" if ran else None

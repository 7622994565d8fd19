"""Faults planted in the child process of an isolated device probe (``probe(..., prelude=...)``):
each replaces the builder's call of one op with one that kills or stalls the process, as a GPU
library's SIGSEGV or a hung kernel would."""

import os
import signal
import time

import torch

from strategies._build import eager

_NEG = torch.ops.aten.neg.default


def _planted(effect):
    run = eager._eager

    def faulty(target, args, kwargs):
        if target is _NEG:
            effect()
        return run(target, args, kwargs)

    eager._eager = faulty


def segfault_on_neg():
    _planted(lambda: os.kill(os.getpid(), signal.SIGSEGV))


def hang_on_neg():
    _planted(lambda: time.sleep(3600))


def poison_after_neg():
    """As an illegal memory access in a kernel of neg would: the error shows after its calls, and
    the context is lost (the child refuses the item and ends itself)."""
    from strategies._draw import probe as _probe

    ran = []
    _planted(lambda: ran.append(True))
    _probe.device_error = lambda device: "an illegal memory access was encountered (planted)" if ran else None

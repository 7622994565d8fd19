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

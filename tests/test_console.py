"""What a user sees on a terminal: a rich progress bar and a rich summary table; plain lines elsewhere."""

from __future__ import annotations

import io
import re

import torch

from conformance import verify
from conformance._console import ConsoleReporter

aten = torch.ops.aten


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _negate_abs(gm):
    for n in gm.graph.nodes:
        if n.target == aten.abs.default:
            n.target = aten.neg.default
    gm.recompile()
    return gm


def test_terminal_gets_a_progress_bar_and_a_table(tmp_path):
    out = _Terminal()
    result = verify(_negate_abs, max_examples=30, seed=0, repro_dir=str(tmp_path), reporter=ConsoleReporter(out))
    raw = out.getvalue()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert not result.ok
    assert "checking graphs" in text and "\x1b[" in raw  # the bar, drawn with terminal control codes
    assert "fx-conformance summary" in text and "┃ property" in text and "│ values    │" in text
    assert "VIOLATED" in text
    assert "values violated by a minimal graph" in text


def test_a_pipe_gets_plain_lines(tmp_path):
    out = io.StringIO()
    verify(lambda gm: gm, max_examples=8, seed=0, repro_dir=str(tmp_path), reporter=ConsoleReporter(out))
    text = out.getvalue()
    assert "\x1b[" not in text and "checking graphs" not in text
    assert "8/8 graphs checked" in text and "the pass changed 0 of 8 graphs (0%)" in text
    assert text.rstrip().splitlines()[-1].startswith("VACUOUS: the pass changed none of the 8 graphs")

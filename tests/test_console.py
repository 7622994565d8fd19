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
    # Drawn rich in abs, the op the bug rewrites, and unshrunk: the bar and the table are what is shown
    # here (caught at graph 4; discovery and shrinking took 7.9 s of CPU on a 2-core AMD EPYC, this 0.2 s)
    result = verify(_negate_abs, max_examples=30, seed=0, device="cpu", focus=["aten.abs.default"], shrink=False,
                    repro_dir=str(tmp_path), reporter=ConsoleReporter(out))
    raw = out.getvalue()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert not result.ok
    assert "checking graphs" in text and "\x1b[" in raw  # the bar, drawn with terminal control codes
    assert "fx-conformance summary" in text and "┃ property" in text and "│ values    │" in text
    assert "VIOLATED" in text
    assert "values violated by a graph (not shrunk" in text


def test_a_pipe_gets_plain_lines(tmp_path):
    out = io.StringIO()
    verify(lambda gm: gm, max_examples=8, seed=0, device="cpu", focus="none", repro_dir=str(tmp_path),
           reporter=ConsoleReporter(out))
    text = out.getvalue()
    assert "\x1b[" not in text and "checking graphs" not in text
    assert "8/8 graphs checked" in text and "the pass changed 0 of 8 graphs (0%)" in text
    assert text.rstrip().splitlines()[-1].startswith("VACUOUS: the pass changed none of the 8 graphs")
    assert "--graphs mutating" in text.splitlines()[-1]


def test_a_vacuous_run_on_mutating_graphs_is_not_told_to_draw_mutating_graphs(tmp_path):
    # the hint does not depend on focus: no discovery (6 s of CPU on mutating graphs, 2-core AMD EPYC)
    out = io.StringIO()
    verify(lambda gm: gm, max_examples=4, seed=0, graphs="mutating", device="cpu", focus="none",
           repro_dir=str(tmp_path), reporter=ConsoleReporter(out))
    last = out.getvalue().rstrip().splitlines()[-1]
    assert last.startswith("VACUOUS:") and "--focus" in last and "--graphs mutating" not in last


def test_after_a_finding_progress_counts_graphs_run_not_graphs_checked():
    """Hypothesis generates a few graphs after the first violation and then shrinks; the progress
    lines then say how many graphs ran, never "k/N graphs checked" for shrinking runs."""
    from conformance._result import Violation

    out = io.StringIO()
    reporter = ConsoleReporter(out, rich=False)
    reporter.start("m:p", 200, {"graphs": "functional", "special_values": True, "device": "cpu"})
    reporter.example(False, 1)
    reporter.found(Violation("values", "output[0]: 1 of 1 elements differ"))
    for done in range(2, 1201):
        reporter.example(done % 2 == 0, done)
    lines = out.getvalue().splitlines()
    assert [line for line in lines if "graphs checked" in line] == ["  1/200 graphs checked"]
    assert "  500 graphs run (shrinking)" in lines and "  1000 graphs run (shrinking)" in lines

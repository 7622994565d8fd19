"""tests/_cuda_run.py where no GPU is needed: its refusals (one line, exit 2), the subprocess it starts
(no TRITON_INTERPRET inherited), and the records its judges make, from real CPU runs."""

from __future__ import annotations

import json

import torch

from reference_lowering.pointwise import TRITON, _table, lower_pointwise
from tests import _cuda_run
from tests.pointwise_cases import POINTWISE


def test_unknown_names_exit_2_with_one_line_naming_them(tmp_path, capsys):
    for suite, name in (("table", "aten.nope.default"), ("golden", "no_such_graph")):
        assert _cuda_run.main([str(tmp_path / "out.json"), suite, name]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and name in err and f"tests/test_pointwise_{suite}.py" in err, err
    assert not (tmp_path / "out.json").exists()


def test_interpreter_mode_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _cuda_run.main([str(tmp_path / "out.json"), "golden", "add"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "TRITON_INTERPRET=1" in err, err


def test_the_subprocess_drops_triton_interpret_and_says_when_there_is_no_cuda_device(tmp_path, monkeypatch):
    """Started from a process in interpreter mode, the child gets past that check (it would exit with
    the TRITON_INTERPRET line) and stops at the device: CUDA_VISIBLE_DEVICES hides any GPU."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    proc = _cuda_run.spawn(tmp_path / "out.json", "golden", ["add"], env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == ["needs a CUDA device: torch.cuda.is_available() is False here"]


def test_a_row_record_is_complete_and_survives_json(tmp_path):
    row = next(r for r in POINTWISE if r.overload == torch.ops.aten.abs.default)
    record = _cuda_run.judge_row(row, "cpu")
    assert record == {"name": row.name, "device": "cpu", "cases": record["cases"], "modes": ["interpreter"],
                      "failures": []}
    assert record["cases"] == len(row.dtypes)  # abs: one tensor operand, so one case (a grid) per dtype
    assert json.loads(json.dumps(record)) == record
    golden = _cuda_run.judge_golden("add", "cpu")
    assert golden == {"name": "add", "device": "cpu", "cases": 1, "modes": ["interpreter"], "failures": []}


def test_a_planted_wrong_row_is_reported_with_its_cases(monkeypatch):
    op = torch.ops.aten.remainder.Tensor
    row = next(r for r in POINTWISE if r.overload == op)
    monkeypatch.setitem(TRITON, op, _table.Row(TRITON[op].promote, TRITON[op].kind,
                                               lambda o: f"{o.self} % {o.other}"))  # C's sign, not Python's
    record = _cuda_run.judge_row(row, "cpu")
    assert 0 < len(record["failures"]) <= record["cases"]
    report = _cuda_run.failure_report(record)
    assert report.startswith(f"{row.name} on cpu: {len(record['failures'])} of {record['cases']} cases fail\n")
    assert f"{row.name} dtype=torch." in report and " args=(tensor(" in report and "but should be" in report


def test_a_row_judged_right_alone_but_wrong_beside_its_other_cases_is_reported_as_their_graph(monkeypatch):
    """The cases of a dtype are judged as the outputs of one graph first: a lowering wrong only on a
    graph of several outputs fails the row, with that graph named, though no case fails alone."""
    def wrong_beside_others(gm, sample_inputs):
        lowered = lower_pointwise(gm, sample_inputs)
        out = lowered.graph.output_node()
        out.args = (tuple(reversed(out.args[0])),)  # the outputs in the wrong order: right for one output
        lowered.recompile()
        return lowered

    monkeypatch.setattr(_cuda_run, "lower_pointwise", wrong_beside_others)
    row = next(r for r in POINTWISE if r.overload == torch.ops.aten.add.Tensor)
    record = _cuda_run.judge_row(row, "cpu")
    assert record["cases"] > len(row.dtypes) and len(record["failures"]) == len(row.dtypes), record["failures"]
    assert all("cases as the outputs of one graph:\n" in f and "but should be" in f for f in record["failures"]), \
        record["failures"][0]
    assert _cuda_run.judge_row(next(r for r in POINTWISE if r.overload == torch.ops.aten.abs.default), "cpu")[
        "failures"] == []  # one case per dtype: a graph of one output, right

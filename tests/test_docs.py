"""Every code block in README.md and docs/*.md runs as written (tests/_doc_blocks.py says how each
kind of block is checked), the nightly results table is the committed report, and the checker
flags a planted wrong transcript, bad option, broken program and untagged fence."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from tests import _doc_blocks as docs
from tests._doc_blocks import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = {path: docs.read(path)[0] for path in DOCUMENTS}
TRANSCRIPTS = [(path, b) for path, blocks in BLOCKS.items() for b in blocks if b.kind == "transcript"]


def _name(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", DOCUMENTS, ids=_name)
def test_every_fence_says_what_it_holds(path):
    """No untagged fence, no unknown language, no directive astray: a new block cannot go unchecked."""
    _, problems = docs.read(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", DOCUMENTS, ids=_name)
def test_shell_commands_are_real(path, pytestconfig):
    """```bash blocks: each command parses by the program's own parser (make -n, argparse, pytest's)."""
    problems = [f"{b.where}: {command}: {p}" for b in BLOCKS[path] if b.kind == "commands"
                for command, _ in docs.commands(b.text, transcript=False)
                for p in docs.command_problems(command, pytest_parser=pytestconfig._parser)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path, block", TRANSCRIPTS, ids=[b.where for _, b in TRANSCRIPTS])
def test_transcript_is_what_the_commands_print(path, block, tmp_path, pytestconfig):
    """A transcript's commands parse, and (unless marked not rerun) print what it shows, times masked.
    The README's verify transcript is CPU draws (--device cpu) on torch 2.11-2.13: a CUDA machine
    draws other graphs. If the strategies or messages change on purpose, regenerate the block from
    the command's output (the failure shows it)."""
    cwd = docs.working_dir(BLOCKS[path], tmp_path / "doc")
    problems = docs.run_transcript(block, cwd, pytest_parser=pytestconfig._parser)
    assert not problems, "\n".join(problems)


def test_python_blocks_run_and_print_what_the_docs_show(tmp_path, pytestconfig):
    """Every document's Python, in a fresh process per document: files import, programs run and print
    the text block after them, and the targets of verify transcripts not rerun load with their options."""
    requests = {}
    for path, blocks in BLOCKS.items():
        request = docs.python_request(blocks, docs.working_dir(blocks, tmp_path / _name(path).replace("/", "_")))
        if request["steps"]:
            requests[_name(path)] = request
    results = docs.run_python(requests, tmp_path, profile=pytestconfig.getoption("hypothesis_profile", None))
    problems = [p for path, blocks in BLOCKS.items() for p in docs.python_problems(blocks, results.get(_name(path), []))]
    assert not problems, "\n".join(problems)
    ran = {step["where"] for steps in results.values() for step in steps}
    assert {b.where for blocks in BLOCKS.values() for b in blocks if b.kind in ("file", "program")} <= ran


def test_docs_hold_each_kind_of_block():
    """The docs' examples are where the README's were: a guard that the checks above are not vacuous."""
    kinds = {}
    for blocks in BLOCKS.values():
        for b in blocks:
            kinds.setdefault(b.kind, []).append(b.where)
    assert {"file", "program", "output", "transcript", "commands", "record"} <= set(kinds)
    rerun = [b for _, b in TRANSCRIPTS if not b.not_rerun]
    assert any("fx-conformance verify my_passes.py:canonicalize_sub" in b.text and not b.trimmed for b in rerun)
    assert sum(b.text.count("$ fx-conformance prove") for b in rerun) == 3
    printing = [b for blocks in BLOCKS.values() for b in blocks if b.kind == "program" and b.expected]
    for needle in ("@lowering_pass(index=0)", "functionalize(gm", "lower_pointwise(gm, inputs)"):
        assert any(needle in b.text for b in printing), needle
    assert any("from strategies import graphs" in b.text for blocks in BLOCKS.values() for b in blocks
               if b.kind == "program")


def test_every_option_is_documented():
    """The reference is complete: every option of every fx-conformance command and of the pytest
    plugin is named in README.md or docs/ (a new option needs its sentence)."""
    import argparse

    from conformance import pytest_plugin
    from conformance.cli import build_parser

    text = "\n".join(path.read_text() for path in DOCUMENTS)
    options = []
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command, parser in sub.choices.items():
        options += [(command, max(a.option_strings, key=len)) for a in parser._actions
                    if a.option_strings and not isinstance(a, argparse._HelpAction)]

    class Group:
        def getgroup(self, name):
            return self

        def addoption(self, *names, **_):
            options.append(("pytest", max(names, key=len)))

    pytest_plugin.pytest_addoption(Group())
    assert len(options) > 40
    missing = [f"{command} {option}" for command, option in options if not re.search(rf"`[^`]*{option}\b", text)]
    assert not missing, f"options no document names (in `code`): {missing}"


def test_nightly_results_are_the_committed_report():
    """The results table, the conformance counts and the copy bandwidth are the committed report.json's."""
    from conformance.nightly import summary_table

    text = (ROOT / "docs" / "running-at-scale.md").read_text()
    path = re.search(r"\]\(\.\./(reports/nightly/[\d-]+/report\.md)\)", text).group(1)
    report = json.loads((ROOT / path).with_name("report.json").read_text())
    assert summary_table(report) in text
    assert report["label"] and "CPU report" in report["label"]  # no GPU ran it: said in the report itself
    total = report["conformance"]["total"]
    assert (f"Conformance in the same run (profile `{report['conformance']['profile']}`): {total['passed']} passed, "
            f"{total['failed']} failed, {total['xfailed']} known") in text
    assert f"copy bandwidth {report['copy_gbps']:.1f} GB/s" in text
    for plot in re.findall(r"!\[[^\]]*\]\(\.\./(reports/nightly/[^)]+\.png)\)", text):
        assert (ROOT / plot).exists(), plot


def test_cli_usage_error_exits_2_with_one_line(capsys):
    """In-process: tests/test_cli_verify.py runs a usage error as a process (exit 2, one line, no traceback)."""
    from conformance.cli import main

    assert main(["run", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nope'" in err and err.strip().splitlines()[-1].startswith("fx-conformance run: error:")


# --- the checker can fail -------------------------------------------------------------------------

PLANTED = '''# planted

```
untagged
```

```ruby
puts 1
```

<!-- docs-check: sometimes -->
```text
$ fx-conformance prove "a + 1" "1 + a"
proved: a + 1 == 1 + a (1.0 ms)
```

```text
$ fx-conformance prove "CeilDiv(a, b)" "FloorDiv(a + b - 1, b)"
proved: CeilDiv(a, b) == FloorDiv(a + b - 1, b) (1.0 ms)
```

<!-- docs-check: trimmed -->
```text
$ fx-conformance prove "CeilDiv(a, b)" "FloorDiv(a + b - 1, b)"
refuted: CeilDiv(a, b) == FloorDiv(a + b - 1, b) (1.0 ms)
  lhs = 0
  counterexample: a=0, b=-2
```

```bash
fx-conformance verify my_passes.py:f --graphs sideways
make tset
make test WORKRES=2
pytest --fx-pass=my_passes.py:f --fx-specials loose
rm -rf /
```

```py
print(1 + 1)
```

```text
3
```

```py
import missing_module_of_the_docs
```
'''


def test_the_checker_flags_what_is_planted(tmp_path, pytestconfig):
    doc = tmp_path / "planted.md"
    doc.write_text(PLANTED)
    blocks, problems = docs.read(doc, "planted.md")
    assert [p.split(": ", 1)[0] for p in problems] == ["planted.md:3", "planted.md:7", "planted.md:11"]
    assert "no language" in problems[0] and "'ruby'" in problems[1] and "'sometimes'" in problems[2]

    transcripts = [b for b in blocks if b.kind == "transcript"]
    assert docs.run_transcript(transcripts[0], tmp_path) == []  # a true claim, correctly shown
    wrong = docs.run_transcript(transcripts[1], tmp_path)  # refuted, shown as proved
    assert len(wrong) == 2 and "+refuted: CeilDiv" in wrong[0] and "exit status=1, but should be 0" in wrong[1]
    out_of_order = docs.run_transcript(transcripts[2], tmp_path)
    assert len(out_of_order) == 1 and "'  counterexample: a=0, b=-2' is not in" in out_of_order[0]

    shell = [p for b in blocks if b.kind == "commands" for c, _ in docs.commands(b.text, transcript=False)
             for p in docs.command_problems(c, pytest_parser=pytestconfig._parser)]
    assert len(shell) == 5, shell
    assert "invalid choice: 'sideways'" in shell[0]
    assert "No rule to make target 'tset'" in shell[1]
    assert "'WORKRES'" in shell[2]
    assert "--fx-specials" in shell[3] and "loose" in shell[3]
    assert "'rm'" in shell[4]

    results = docs.run_python({"planted.md": docs.python_request(blocks, tmp_path)}, tmp_path, profile=None,
                              preload=False)
    found = docs.python_problems(blocks, results["planted.md"])
    assert len(found) == 2, found
    lines = PLANTED.splitlines()
    printing, importing = lines.index("print(1 + 1)"), lines.index("import missing_module_of_the_docs")
    assert found[0].startswith(f"planted.md:{printing}: the program prints other lines") and "-3\n+2" in found[0]
    assert found[1].startswith(f"planted.md:{importing}: the program raised") and "missing_module_of" in found[1]


def test_a_program_followed_by_a_record_is_not_compared(tmp_path):
    """Output is the text block right after a program; a paragraph between makes the text a record."""
    doc = tmp_path / "doc.md"
    doc.write_text("```py\nprint(2)\n```\n\nNot its output:\n\n```text\n3\n```\n")
    blocks, problems = docs.read(doc, "doc.md")
    assert problems == [] and [b.kind for b in blocks] == ["program", "record"] and blocks[0].expected is None

"""The README's example runs as written, and the CLI behaves as documented."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_example_runs():
    text = (ROOT / "README.md").read_text()
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert "from strategies import graphs" in example
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})


def test_cli_usage_error_exits_2_with_one_line():
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--profile", "nope"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert "invalid choice: 'nope'" in proc.stderr


def test_readme_registry_workflow_prints_what_the_readme_shows(capsys):
    """Decorate with index=0, dump shows it first, apply runs it, remove drops it: as documented."""
    text = (ROOT / "README.md").read_text()
    example, shown = re.search(r"```py\n([^`]*?@lowering_pass\(index=0\).*?)```\n\n```text\n(.*?)```", text, re.S).groups()
    from reference_lowering.passes import registry

    before = registry.lowering_passes()
    try:
        exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    finally:
        while registry.lowering_passes() != before and registry.lowering_passes()[0].__name__ == "sub_to_add_neg":
            registry.remove_lowering_pass(0)
    assert capsys.readouterr().out.strip() == shown.strip()
    assert registry.lowering_passes() == before


def test_readme_verify_transcript_is_what_the_command_prints(tmp_path):
    """The README's "verify a pass" block is real output: rerun its command on its pass file and
    compare line by line (only the wall time may differ). If the strategies or messages change
    on purpose, regenerate the block from this command's output. The command says --device cpu:
    the transcript is of CPU draws (a CUDA machine draws other graphs), on torch 2.11-2.13."""
    text = (ROOT / "README.md").read_text()
    source = re.search(r"```py\n(# my_passes\.py.*?)```", text, re.S).group(1)
    command, shown = re.search(r"```text\n\$ (fx-conformance verify [^\n]*)\n(.*?)```", text, re.S).groups()
    (tmp_path / "my_passes.py").write_text(source)
    args = command.split()[1:]
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr

    def timeless(s):
        return re.sub(r"\d+\.\d+ s;", "T s;", s).strip().splitlines()
    assert timeless(proc.stdout) == timeless(shown)
    assert (tmp_path / "reports" / "repro" / "repro_my_passes_canonicalize_sub_values.py").exists()


def test_readme_prove_transcript_is_what_the_commands_print(capsys):
    """The README's prove block: each command's output, line for line (only the times may differ);
    run by the CLI's main() in this process (the verify transcript above runs as a process)."""
    import shlex

    from conformance.cli import main

    text = (ROOT / "README.md").read_text()
    block = re.search(r"```text\n(\$ fx-conformance prove .*?)```", text, re.S).group(1)
    runs = re.findall(r"^\$ (fx-conformance prove .*)\n((?:[^$].*\n)*)", block, re.M)
    assert len(runs) == 3
    for command, shown in runs:
        capsys.readouterr()
        code = main(shlex.split(command)[1:])
        timeless = lambda s: re.sub(r"\(\d+\.\d ms\)", "(T ms)", s).strip()  # noqa: E731
        assert timeless(capsys.readouterr().out) == timeless(shown), command
        assert code == (1 if "refuted" in shown else 0)


def test_readme_functionalization_example_prints_what_the_readme_shows(capsys):
    text = (ROOT / "README.md").read_text()
    example, shown = re.search(r"```py\n([^`]*?from reference_lowering.functionalize import functionalize.*?)```\n\n"
                               r"```text\n(.*?)```", text, re.S).groups()
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.strip() == shown.strip()


def test_readme_pointwise_example_prints_what_the_readme_shows():
    """Run in a fresh process: the wrapper node's kernel_idx counts kernels registered before it."""
    text = (ROOT / "README.md").read_text()
    example, shown = re.search(r"```py\n(import torch\n[^`]*?lower_pointwise\(gm, inputs\).*?)```\n\n```text\n(.*?)```",
                               text, re.S).groups()
    proc = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == shown.strip()


def test_readme_nightly_table_is_the_committed_report():
    """The README's results table is rendered from the committed report.json, not typed."""
    import json

    from conformance.nightly import summary_table

    text = (ROOT / "README.md").read_text()
    path = re.search(r"`(reports/nightly/[\d-]+/report\.md)`", text).group(1)
    report = json.loads((ROOT / path).with_name("report.json").read_text())
    assert summary_table(report) in text
    assert report["label"] and "CPU report" in report["label"]  # no GPU ran it: said in the report itself
    plot = re.search(r"!\[[^\]]*\]\((reports/nightly/[^)]+\.png)\)", text).group(1)
    assert (ROOT / plot).exists()

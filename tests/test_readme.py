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

"""The Makefile's install: uv installs the project only beside a torch of the venv's own, pinned to it.

uv does not see a system torch (a venv made with ``--system-site-packages`` on a CUDA machine) and
would fetch one from PyPI beside it; there the Makefile's ``TORCH_PIN`` fails and pip installs instead.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _torch_pin_program() -> str:
    """The Python program of the Makefile's ``TORCH_PIN`` (its continuation lines joined)."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("export TORCH_PIN = "))
    return line.removeprefix("export TORCH_PIN = ")


def test_the_pin_names_the_venvs_own_torch_and_fails_for_one_outside_it(tmp_path):
    program = _torch_pin_program()
    ours = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    spec = importlib.util.find_spec("torch")
    if spec.origin.startswith(sys.prefix + "/"):  # this venv's torch: its exact version, local part included
        assert ours.returncode == 0 and ours.stdout == f"torch=={importlib.metadata.version('torch')}\n", ours
    else:  # a system torch (a CUDA machine's image): pip installs the project
        assert ours.returncode == 1 and not ours.stdout, ours
    # a torch found first on the path, outside the venv, is a torch uv would not see
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    outside = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                             env={"PYTHONPATH": str(tmp_path)})
    assert outside.returncode == 1 and not outside.stdout, outside

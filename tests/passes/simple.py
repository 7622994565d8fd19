"""Small passes for the campaign and database tests: a blatant planted bug and a noisy correct pass.

- ``add_to_sub``: planted; every ``add.Tensor`` becomes a ``sub.Tensor`` (wrong values wherever a
  graph adds two values that are not both zero);
- ``noisy_identity``: correct (changes nothing), and writes a line to the process's stderr on each
  call, as a pass whose library logs does.
"""

import os

import torch


def add_to_sub(gm):
    """Planted: ``add.Tensor`` -> ``sub.Tensor``."""
    for n in gm.graph.nodes:
        if n.target is torch.ops.aten.add.Tensor:
            n.target = torch.ops.aten.sub.Tensor
    gm.recompile()
    return gm


def noisy_identity(gm):
    """Correct, and writes to fd 2 on every call."""
    os.write(2, b"noise from the pass\n")
    return gm

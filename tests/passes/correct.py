"""Correct passes that torch does not ship as importable callables."""

import torch.fx as fx


def identity(gm: fx.GraphModule) -> fx.GraphModule:
    """Returns the graph unchanged: the baseline every property must accept."""
    return gm


def _cse_banning_random():
    from torch.fx.passes.dialect.common.cse_pass import CSEPass, get_CSE_banned_ops

    return CSEPass(banned_ops=get_CSE_banned_ops())


# torch's CSEPass as its module means it to be used: random and in-place ops banned from merging
# (``CSEPass()`` bans nothing, and merges random draws: tests/test_planted.py keeps that found).
cse_pass_banning_random = _cse_banning_random()

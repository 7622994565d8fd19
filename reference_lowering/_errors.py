"""The one error type of the reference_lowering layer."""


class LoweringError(Exception):
    """A graph (or a node of it) cannot be lowered; the message names the node, target and reason."""

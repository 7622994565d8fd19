"""The one error type of the strategies layer."""

from hypothesis.errors import InvalidArgument as _HypothesisInvalidArgument


class InvalidArgument(_HypothesisInvalidArgument):
    """A strategy was given an argument it cannot use.

    Subclasses Hypothesis' own ``InvalidArgument`` so code that already catches that keeps working.
    The message always quotes the offending ``name=value`` and says what was expected.
    """

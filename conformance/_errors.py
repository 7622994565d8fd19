"""The error types of the harness layer."""


class HarnessError(Exception):
    """The harness could not do what it was asked (not a property violation of the pass)."""


class UsageError(HarnessError):
    """Bad input from the user (a target, an option); the CLI turns it into one line and exit 2."""


class OriginalFailed(HarnessError):
    """The graph under test did not run as given (before any pass touched it): no verdict on the pass.

    A drawn graph ran on its device while it was drawn, so this is rare (a device fault, a kernel
    that fails now and then); the search draws another graph and counts it."""

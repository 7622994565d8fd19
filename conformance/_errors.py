"""The error types of the harness layer."""


class HarnessError(Exception):
    """The harness could not do what it was asked (not a property violation of the pass)."""


class UsageError(HarnessError):
    """Bad input from the user (a target, an option); the CLI turns it into one line and exit 2."""

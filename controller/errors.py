"""Errors that the command line reports as a message and an exit code,
never as a traceback (docs/operations.md, Command line: 2 usage or config error, 1 runtime)."""

from __future__ import annotations


class ExpectedError(Exception):
    """An error the user can act on; ``exit_code`` is what the CLI returns."""

    exit_code = 1


class UsageError(ExpectedError):
    exit_code = 2


class ConfigError(UsageError):
    """A bad configuration or profile; the message names the bad key."""


class RuntimeFailure(ExpectedError):
    exit_code = 1

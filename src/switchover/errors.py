"""User-facing errors: a message, a hint, and the exit code the CLI returns (never a traceback)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes shared by every command."""

    OK = 0
    FAILED = 1  # a gate, a regression check or a readiness check failed
    BAD_INPUT = 2  # the user gave something we cannot use
    UNREACHABLE = 3  # an endpoint could not be reached


INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug in switchover, not the user's input (the fuzz tests assert it never occurs)


class SwitchoverError(Exception):
    """An error meant for the user: printed as one line plus an optional hint."""

    exit_code: ExitCode = ExitCode.FAILED

    def __init__(self, message: str, hint: str | None = None, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class BadInput(SwitchoverError):
    """A file, flag or value the user supplied is invalid (exit 2)."""

    exit_code = ExitCode.BAD_INPUT


class Unreachable(SwitchoverError):
    """An endpoint could not be reached at all (exit 3)."""

    exit_code = ExitCode.UNREACHABLE


class CheckFailed(SwitchoverError):
    """A gate, regression or readiness check failed (exit 1)."""

    exit_code = ExitCode.FAILED

"""Errors a user can cause. Commands print the message on one line and exit with code 2."""

from __future__ import annotations

import sys


class UserError(Exception):
    """An error the user can fix: bad input, a missing or foreign file, a full disk."""


class ConfigError(UserError):
    """A config key or value is unknown, of the wrong type, or out of range."""


class RunFileError(UserError):
    """A run file is missing, truncated, corrupt, or lacks what was asked of it. `problem` is
    what is wrong; `fix`, when given, the usual remedy, which a caller with a better one (a
    sweep retrains its own runs) may leave out."""

    def __init__(self, problem: str, fix: str = ""):
        super().__init__(f"{problem}; {fix}" if fix else problem)
        self.problem, self.fix = problem, fix


class RunLockedError(UserError):
    """Another trainer holds the run file's lock (one writer per run file)."""


class DiskFullError(UserError):
    """The disk (or quota) is full; what was written so far is whole (docs/run-file.md, "Faults")."""


class ModelError(UserError):
    """A model given to the recording API (`headmovies.Recorder`) has no attention layer the
    adapters recognise, or a weights function returned weights of the wrong names or shapes."""


class EncodeError(UserError):
    """ffmpeg is missing, lacks an encoder, or failed on the frames."""


_SEEN: set[str] = set()


def warn(message: str) -> None:
    """One line on stderr, `warning: ...`: something the user should know, that stops nothing.
    Each message once per command (the CLI calls `forget_warnings` as a command starts)."""
    if message not in _SEEN:
        _SEEN.add(message)
        print(f"warning: {message}", file=sys.stderr)


def forget_warnings() -> None:
    _SEEN.clear()


def plural(count: int, noun: str) -> str:
    """'1 snapshot', '2 snapshots', '1,024 snapshots': a count and its noun, as messages print them."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")

"""Errors a user can cause. Commands print the message on one line and exit with code 2."""
from __future__ import annotations


class UserError(Exception):
    """An error the user can fix: bad input, a missing or foreign file, a full disk."""


class ConfigError(UserError):
    """A config key or value is unknown, of the wrong type, or out of range."""


class RunFileError(UserError):
    """A run file is missing, truncated, corrupt, or lacks what was asked of it."""


class EncodeError(UserError):
    """ffmpeg is missing, lacks an encoder, or failed on the frames."""

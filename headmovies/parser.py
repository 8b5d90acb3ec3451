"""The command-line parser of every `headmovies` command and script: usage errors as one line,
exit 2. A leaf: the standard library only, so that any layer's script may use it."""

from __future__ import annotations

import argparse
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """Usage errors as one line too (`error: headmovies orbits movie: argument --fps: ...`), exit 2;
    subcommand parsers inherit this class. Every `type=Path` argument refuses an empty path."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("type", Path, path_argument)  # every `type=Path` argument of every command
        self.set_defaults(_prog=self.prog)  # the deepest command given, for unrecognized arguments

    def error(self, message: str):
        self.exit(2, f"error: {self.prog}: {message} (see `{self.prog} --help`)\n")


def path_argument(text: str) -> Path:
    """A path argument; an empty one is refused (Path('') would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; give a file or folder name")
    return Path(text)

"""The `headmovies` command (also `python -m headmovies`).

Every command is one module of `headmovies/commands/`, listed in `COMMANDS` below (shared
commands such as `train`, then one per experiment family). Each defines NAME, HELP, optional
DESCRIPTION, `add_arguments(parser)` and `run(args) -> int`, and imports what it runs only
when it runs. Errors users can cause (`UserError`) print as
one line with exit code 2; Ctrl-C and SIGTERM unwind (temporary files removed) with 130.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

# With more threads than free cores, OpenMP threads that spin at barriers slowed these small
# models ~30x (measured); sleeping threads cost little. Set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from headmovies import disk
from headmovies.commands import figures, heads, induction, movie, orbits, ov_coherent, recover, sweep, train, view
from headmovies.errors import UserError, forget_warnings
from headmovies.parser import Parser
from headmovies.version import __version__

# The commands, in the order `headmovies --help` lists them: shared ones (those that render any
# run: movie, figures, view), then one per experiment family (a new family adds its module here).
COMMANDS = (recover, sweep, train, movie, figures, view, heads, induction, orbits, ov_coherent)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="headmovies",
        description="Train tiny attention-only transformers into HDF5 run files, and render movies, figures "
        "and reports of their heads' QK and OV circuits from those files alone.",
        epilog="Run `headmovies COMMAND --help` for a command's options. Docs: docs/ in the repository. "
        "Sources 000, 003 and 004 are the write-ups the experiments reproduce (docs/experiments.md); "
        "a seed is always a run's random seed, its config key `seed` (`--set seed=N`).",
    )
    parser.add_argument("--version", action="version", version=f"headmovies {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in COMMANDS:
        p = sub.add_parser(
            mod.NAME,
            help=mod.HELP,
            description=getattr(mod, "DESCRIPTION", mod.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _interrupt(signum, frame):
    """SIGTERM unwinds like Ctrl-C, so temporary outputs are removed and run files closed."""
    raise KeyboardInterrupt


@contextlib.contextmanager
def _no_empty_output_folder(out: object) -> Iterator[None]:
    """A command that fails (an exception, e.g. a damaged run file met halfway) removes the
    output folder `out` again when it created it and left it empty: bad input leaves no trace."""
    folder = Path(out) if isinstance(out, (str, os.PathLike)) else None
    new = folder is not None and not os.path.lexists(folder)
    try:
        yield
    except BaseException:
        if new and folder is not None and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        raise


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        parser = build_parser()  # imports every command: Ctrl-C may come here too
        args, extra = parser.parse_known_args(argv)
        if extra:  # named by the command they were given to
            parser.exit(
                2, f"error: {args._prog}: unrecognized arguments: {' '.join(extra)} (see `{args._prog} --help`)\n"
            )
        forget_warnings()
        with _no_empty_output_folder(getattr(args, "out", None)):
            return int(args._run(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `headmovies orbits check RUN | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # a full disk met where no writer expected it: still one line
        if not disk.is_full(exc):
            raise
        print(f"error: disk full: {str(exc).splitlines()[0][:300]}; free space and run it again", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

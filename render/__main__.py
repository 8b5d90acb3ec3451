"""`python -m render COMMAND ...`: movies, orbit reports and figures from a run file.

Each command is a module in `render/commands/` defining HELP, `add_arguments(parser)` and
`run(args) -> int`; it is found automatically. Errors users can cause (`runfile.UserError`)
are printed as one line with exit code 2.
"""
from __future__ import annotations

import argparse
import os
import signal
import importlib
import pkgutil
import sys

from runfile import UserError
from render import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m render",
                                     description="Render movies, figures and orbit reports from an HDF5 run "
                                                 "file (reads only the file, never the training code).")
    sub = parser.add_subparsers(dest="command", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{commands.__name__}.{info.name}")
        name = getattr(mod, "NAME", info.name)
        p = sub.add_parser(name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _interrupt(signum, frame):
    """SIGTERM unwinds like Ctrl-C, so temporary outputs are removed and run files closed."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:              # e.g. `python -m render orbits RUN | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())

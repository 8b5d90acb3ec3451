"""`headmovies movie RUN --out DIR`: the movie of any run, recorded or built-in (render/generic/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from headmovies.commands.any_run import PLANES, add_run_arguments, plane_options
from headmovies.render.core.movie_options import add_movie_arguments, movie_arguments

NAME = "movie"
HELP = "the movie of any run's heads (a recorded run too): MP4, WebM, GIF, poster PNG, HTML snippet"
DESCRIPTION = f"""\
Each frame one snapshot, each dot one head of any layer, with its trail; the axes rescale as
the run goes.

{PLANES}

docs/recording.md, "Rendering"."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    add_movie_arguments(p, fps=12.0)
    p.add_argument(
        "--view",
        choices=("scores", "axes"),
        help="scores: each head at its probe scores (previous-token, induction), one panel per layer (the default "
        "for a run with probe scores and no group); axes: the planes above",
    )


def run(args: argparse.Namespace) -> int:
    from headmovies.render.generic.movie import render_movie

    formats, fps, hold = movie_arguments(args)
    options = plane_options(args)
    result = render_movie(args.run, args.out, formats=formats, fps=fps, hold_s=hold, view=args.view, **options)
    print(f"{args.out}: {', '.join(p.name for p in result.paths.values())} ({result.frames} frames)")
    return 0

"""`headmovies ov-coherent report RUN [RUN ...] --out DIR`: the source-004 report from run files.
The viewer of one run is `headmovies view RUN` (commands/view.py); `ov-coherent view` remains as
a deprecated spelling of it."""

from __future__ import annotations

import argparse
from pathlib import Path

from headmovies.commands import view as view_command
from headmovies.commands.any_run import add_old_spelling
from headmovies.errors import UserError
from headmovies.render.core.movie_options import add_movie_arguments, movie_arguments
from headmovies.render.core.timeline import add_timeline_arguments, timeline_arguments

NAME = "ov-coherent"
HELP = "ov-coherent superposition (source 004): accuracy, QK orderings, ablations, figures, QK-plane movie"
DESCRIPTION = """\
Analyse the final snapshot of each ov-coherent RUN: exact read-off accuracy (overall and per
class), each head's QK preference ordering of the signal tokens 1-4, whether the first two
heads' orderings are opposite, attention by pair, OV tables, accuracy with each head ablated,
and how often hard (all-or-nothing) attention explains the model's predictions.

Writes into DIR: summary.md and summary.json (the table across runs), training.png,
orderings.png, and per run <name>/analysis.png and <name>/analysis.json; the QK-plane movie
<name>/qk_plane.{mp4,webm,gif,png,html} (needs 2 or more heads) over a timeline (accuracy;
the frame is held --event-hold seconds where the orderings come to stay opposite and where
the accuracy comes to stay at or above 99 %). docs/results/ov-coherent.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = sub.add_parser(
        "report",
        help="analyses, figures, table and QK-plane movie of ov-coherent runs",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="ov-coherent run files (.h5)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument(
        "--movie",
        choices=("first", "all", "none"),
        default="first",
        help="QK-plane movie for the first run with >= 2 heads, every such run, or none (default first)",
    )
    add_movie_arguments(p)
    add_timeline_arguments(p)
    p.add_argument(
        "--trail",
        type=float,
        default=None,
        metavar="EPOCHS",
        help="movie trails span this many epochs (here an epoch is one optimizer step on a fresh "
        "batch, as in the run file; default: a tenth of the run, at most 250)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(_action=report)
    add_old_spelling(sub, NAME, view_command)


def run(args: argparse.Namespace) -> int:
    return args._action(args)


def report(args: argparse.Namespace) -> int:
    from headmovies.render.ov_coherent.summary import summary_text, write_report

    formats, fps, hold = movie_arguments(args)
    event_hold = timeline_arguments(args)
    if args.trail is not None and args.trail < 0:
        raise UserError(f"--trail must be >= 0, got {args.trail}")
    rows = write_report(
        args.runs,
        args.out,
        args.movie,
        formats,
        fps,
        hold,
        args.trail,
        progress=not args.no_progress,
        event_hold_s=event_hold,
    )
    print(summary_text(rows), end="")
    print(f"wrote {args.out}/summary.md, summary.json, training.png and per-run analysis.{{png,json}}")
    return 0

"""`headmovies induction report|complete RUN ...`: the source-003 report from run files and
completions. The viewer of one run is `headmovies view RUN` (commands/view.py); `induction view`
remains as a deprecated spelling of it."""

from __future__ import annotations

import argparse
from pathlib import Path

from headmovies.commands import view as view_command
from headmovies.commands.any_run import add_old_spelling
from headmovies.errors import UserError
from headmovies.render.core.movie_options import add_movie_arguments, movie_arguments
from headmovies.render.core.timeline import add_timeline_arguments, timeline_arguments

NAME = "induction"
HELP = "induction heads (source 003): copying scores, attention, completions, K-composition, movie"
REPORT = """\
Analyse the last snapshot of each induction RUN (induction-1l, induction-smeared, induction-2l):
OV copying scores of every head, each layer's sum of heads and the direct path W_E W_U (both
Σλ/Σ|λ| and the source's mean Re(λ/|λ|)); each head's mean attention on fresh sequences;
greedy completions of the source's prompts; accuracy for block lengths 4-8; for two layers the
K-/Q-composition scores and the model with K-composition removed. Over training: copying scores
per snapshot and a movie of every head's mean attention over a timeline (held-out accuracy; the
frame is held --event-hold seconds where the accuracy comes to stay above 50 % and 90 %).

Writes into DIR/<run name>/: analysis.md, analysis.json, attention, copying, block_length,
training (and composition, attention_no_k_composition) as .png and .svg, and the movie
attention_movie.{mp4,webm,gif,png,html}; and DIR/summary.md, DIR/summary.json across the runs."""
MAX_SEQUENCES = 1_000_000  # fresh sequences held at once with their attention patterns (~2 GB)
COMPLETE = "Print each run's greedy completion of LETTERS to the context length (24); writes nothing."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "report",
        help="analyses, figures, tables and attention movies of induction runs",
        description=REPORT,
        formatter_class=fmt,
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="induction run files (.h5)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--no-movie", action="store_true", help="skip the attention movie")
    add_movie_arguments(p)
    add_timeline_arguments(p)
    p.add_argument(
        "--sequences",
        type=int,
        default=1024,
        metavar="N",
        help="fresh sequences for attention and accuracy (default 1024)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(_action=report)
    add_old_spelling(sub, NAME, view_command)
    p = sub.add_parser("complete", help="greedy completions of a prompt", description=COMPLETE, formatter_class=fmt)
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="induction run files (.h5)")
    p.add_argument("--prompt", required=True, metavar="LETTERS", help="capital letters A-Z, e.g. ABCDEF")
    p.set_defaults(_action=complete)


def run(args: argparse.Namespace) -> int:
    return args._action(args)


def report(args: argparse.Namespace) -> int:
    from headmovies.render.induction.summary import write_report

    if not 1 <= args.sequences <= MAX_SEQUENCES:
        raise UserError(f"--sequences must be in 1..{MAX_SEQUENCES}, got {args.sequences}")
    formats, fps, hold = movie_arguments(args)
    event_hold = timeline_arguments(args)
    results = write_report(
        args.runs,
        args.out,
        not args.no_movie,
        formats,
        fps,
        hold,
        args.sequences,
        progress=not args.no_progress,
        event_hold_s=event_hold,
    )
    print(f"{args.out}/summary.md: {len(results)} run{'' if len(results) == 1 else 's'}")
    return 0


def complete(args: argparse.Namespace) -> int:
    from headmovies.render.induction.summary import completions

    if not args.prompt:
        raise UserError("the prompt is empty; give letters such as --prompt ABCDEF")
    for line in completions(args.runs, args.prompt):
        print(line)
    return 0

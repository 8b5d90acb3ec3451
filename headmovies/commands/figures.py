"""`headmovies figures RUN [--out DIR]`: still figures of any run, in its family's look (orbits,
induction, ov-coherent, or generic for a recorded run; commands/any_run.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from headmovies.commands.any_run import (
    add_generic_arguments,
    add_run_argument,
    default_out,
    family_of,
    group,
    plane_options,
    refuse_others,
)
from headmovies.errors import UserError
from headmovies.render.core.outputs import FIGURE_FORMATS, check_out_dir

NAME = "figures"
HELP = "still figures of any run in its family's look (a recorded run too)"
DESCRIPTION = """\
Orbit runs (docs/movie.md, "Figures"): curves, panels (the movie's panels at the final epoch),
orbit_check, orbit_power, orbits_over_time and orbit_progress as .png and .svg, and the orbit
report orbits.json, orbits.txt. Induction and ov-coherent runs: the family's report of this one
run (analysis, figures, tables; no movie). Recorded runs (and --generic): metrics.png
(accuracies, losses), heads_final.png (every head's centred QK and OV circuits at the last
snapshot), with a cyclic group ov_frequencies.png (the heads' OV power per input frequency over
time) and summary.json (last metrics; key frequencies and their share over time; the first
epochs at which each accuracy reached 50 % and 90 %); docs/recording.md, "Rendering"."""
ONLY = {
    "panels": ("orbits",),
    "tol": ("orbits",),
    "dead_tol": ("orbits",),
    "formats": ("orbits", "generic"),
    "no_over_time": ("orbits",),
    "sequences": ("induction",),
    "group_order": ("generic",),
}


def add_tolerances(g) -> None:
    """--tol and --dead-tol of the orbit check (unset: None, the check's defaults)."""
    g.add_argument("--tol", type=float, help="relative match tolerance of the orbit check (default 0.02)")
    g.add_argument(
        "--dead-tol",
        type=float,
        help="a head whose centred OV norm is below this fraction of the largest head's is dead (default 0.01)",
    )


def tolerances(args: argparse.Namespace) -> dict:
    from headmovies.render.orbits.check import DEAD_TOL, TOL

    return {
        "tol": TOL if args.tol is None else args.tol,
        "dead_tol": DEAD_TOL if args.dead_tol is None else args.dead_tol,
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_argument(p)
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="output folder (created; default for data/a.h5: data/a/figures)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    g = group(p, ["orbits"])
    g.add_argument(
        "--panels",
        nargs="+",
        metavar="PANEL",
        help="the panels figure's planes: default, auto, source or CIRCUIT:U,V (as the movie's)",
    )
    add_tolerances(g)
    g.add_argument(
        "--no-over-time",
        action="store_true",
        help="skip orbits_over_time and orbit_progress (they run the orbit check on every snapshot)",
    )
    group(p, ["orbits", "generic"]).add_argument("--formats", help="png,svg or one of them (default both)")
    group(p, ["induction"]).add_argument(
        "--sequences", type=int, metavar="N", help="fresh sequences for attention and accuracy (default 1024)"
    )
    add_generic_arguments(p, planes=False)


def figure_formats(text: str) -> tuple[str, ...]:
    formats = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    if not formats or any(f not in FIGURE_FORMATS for f in formats):
        raise UserError(f"--formats must be png, svg or png,svg; got {text!r}")
    return formats


def run(args: argparse.Namespace) -> int:
    out = args.out if args.out is not None else default_out(args.run) / "figures"
    formats = figure_formats(args.formats) if args.formats is not None else FIGURE_FORMATS
    check_out_dir(out)
    family = family_of(args)
    refuse_others(args, family, ONLY)
    progress = not args.no_progress
    if family == "orbits":
        from headmovies.render.orbits.figures import make_figures

        paths = make_figures(
            args.run,
            out,
            args.panels,
            formats=formats,
            over_time=not args.no_over_time,
            progress=progress,
            **tolerances(args),
        )
        print("\n".join(map(str, paths)))
    elif family == "induction":
        from headmovies.render.induction.summary import write_report

        sequences = 1024 if args.sequences is None else args.sequences
        if not 1 <= sequences <= 1_000_000:
            raise UserError(f"--sequences must be in 1..1000000, got {sequences}")
        write_report([args.run], out, movie=False, sequences=sequences, progress=progress)
        print(f"{out}/summary.md")
    elif family == "ov-coherent":
        from headmovies.render.ov_coherent.summary import summary_text
        from headmovies.render.ov_coherent.summary import write_report as ov_report

        print(summary_text(ov_report([args.run], out, movie="none", progress=progress)), end="")
    else:
        from headmovies.render.generic.figures import render_figures

        paths = render_figures(args.run, out, plane_options(args)["group_order"], formats=formats)
        print(f"{out}: {', '.join(p.name for p in paths)}")
    return 0

"""`headmovies movie RUN --out DIR`: the movie of any run, in its family's look (orbits,
induction, ov-coherent, or generic for a recorded run; commands/any_run.py)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from headmovies.commands.any_run import (
    PLANES,
    add_generic_arguments,
    add_run_argument,
    add_view_argument,
    check_name,
    check_panel_words,
    default_out,
    family_of,
    group,
    plane_options,
    refuse_others,
)
from headmovies.errors import UserError
from headmovies.render.core.frame_layout import LAYOUTS, MIN_PANEL_PX, PANEL_PX
from headmovies.render.core.frame_states import TRAIL_EPOCHS
from headmovies.render.core.movie_options import add_movie_arguments, movie_arguments
from headmovies.render.core.timeline import add_timeline_arguments, timeline_arguments

NAME = "movie"
HELP = "the movie of any run in its family's look (a recorded run too): MP4, WebM, GIF, poster PNG, HTML snippet"
DESCRIPTION = f"""\
Each frame one snapshot. Writes DIR/NAME.{{mp4,webm,gif,png,html}} (those in --formats): H.264
MP4, VP9 WebM, looping GIF, poster PNG (the last frame) and an HTML snippet; files appear only
when complete. NAME: orbits, attention_movie (induction), qk_plane (ov-coherent) or movie.

{PLANES}

Orbit runs: one dot per head in each panel, trailing its last --trail epochs; a head takes its
orbit's colour from the snapshot at which the orbit is verified; the timeline strip holds the
frame --event-hold seconds at phase changes and verifications (docs/movie.md). Induction runs:
every head's mean attention pattern on --sequences fresh sequences. Ov-coherent runs: the
read-off QK scores of heads 1 and 2 in one plane."""
BASENAMES = {"orbits": "orbits", "induction": "attention_movie", "ov-coherent": "qk_plane", "generic": "movie"}
FPS = {"orbits": 24.0, "induction": 24.0, "ov-coherent": 24.0, "generic": 12.0}
# the options that serve some families only (dest -> families)
ONLY = {
    "panels": ("orbits", "generic"),
    "trail": ("orbits", "ov-coherent", "generic"),
    "event_hold": ("orbits", "induction", "ov-coherent"),
    "layout": ("orbits",),
    "panel_px": ("orbits",),
    "crf": ("orbits",),
    "no_timeline": ("orbits",),
    "no_orbit_colours": ("orbits",),
    "workers": ("orbits",),
    "sequences": ("induction",),
    "group_order": ("generic",),
    "basis": ("generic",),
    "view": ("generic", "induction"),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_argument(p)
    p.add_argument("--out", type=Path, metavar="DIR", help="output folder (created; default for data/a.h5: data/a)")
    add_movie_arguments(p, fps=None)
    p.add_argument("--name", default=None, help="file name stem of the outputs (default: the family's NAME)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    g = group(p, ["orbits", "generic"])
    g.add_argument(
        "--panels",
        nargs="+",
        metavar="PANEL",
        help="orbit runs: default (source 000's four planes if the run's orbits show in them, else chosen "
        "from the data), auto, source, or planes CIRCUIT:U,V such as qk:0,10 ov:10,-10; recorded runs: "
        "irrep planes such as qk:0,10 (needs a group)",
    )
    g = group(p, ["orbits", "ov-coherent", "generic"])
    g.add_argument(
        "--trail",
        type=float,
        metavar="EPOCHS",
        help=f"trail length in epochs (default: {TRAIL_EPOCHS:g} for orbit runs; else a tenth of the run, "
        f"at most {TRAIL_EPOCHS:g})",
    )
    add_timeline_arguments(group(p, ["orbits", "induction", "ov-coherent"]))
    g = group(p, ["orbits"])
    g.add_argument(
        "--layout",
        choices=LAYOUTS,
        help="wide: landscape, the timeline right of the panels (default); tall: portrait, the timeline under them",
    )
    g.add_argument(
        "--panel-px",
        type=int,
        metavar="PX",
        help=f"side of each square panel in pixels, {MIN_PANEL_PX} to 2000 "
        f"(default {PANEL_PX['wide']} wide, {PANEL_PX['tall']} tall)",
    )
    g.add_argument("--crf", type=int, help="H.264 quality, lower is better (default 20)")
    g.add_argument("--no-timeline", action="store_true", help="no timeline strip beside the panels")
    g.add_argument("--no-orbit-colours", action="store_true", help="draw every head in one colour")
    g.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes drawing frames while the encoder runs, 1 to 64 (default: one per core, at most 4; "
        "1 draws in the command's own process); the frames are the same",
    )
    g = group(p, ["induction"])
    g.add_argument(
        "--sequences", type=int, metavar="N", help="fresh sequences for the mean attention patterns (default 256)"
    )
    add_generic_arguments(p)
    add_view_argument(p)


def run(args: argparse.Namespace) -> int:
    if args.out is None:
        args.out = default_out(args.run)  # beside the run, as figures and view write theirs
    fps_given = args.fps is not None
    args.fps = args.fps if fps_given else 24.0  # the checks; a family may lower the default below
    formats, fps, hold = movie_arguments(args)  # before the run is read
    check_panel_words(args.panels)
    if args.name is not None:
        check_name(args.name)
    if args.trail is not None and (not math.isfinite(args.trail) or args.trail < 0):
        raise UserError(f"--trail must be a number of epochs >= 0, got {args.trail}")
    family = family_of(args)
    refuse_others(args, family, ONLY)
    if family == "induction" and args.view == "scores":
        family = "generic"  # the probe scores an induction run records, drawn as a recorded run's
    fps = fps if fps_given else FPS[family]
    name = args.name or BASENAMES[family]
    progress = not args.no_progress
    if family == "generic":
        from headmovies.render.generic.movie import render_movie

        result = render_movie(
            args.run,
            args.out,
            basename=name,
            formats=formats,
            fps=fps,
            hold_s=hold,
            trail_epochs=args.trail,
            view=args.view,
            progress=progress,
            **plane_options(args),
        )
        print(f"{args.out}: {', '.join(p.name for p in result.paths.values())} ({result.frames} frames)")
        return 0
    event_hold = timeline_arguments(args)
    if family == "orbits":
        return _orbits(args, formats, fps, hold, event_hold, name)
    from headmovies.runfile.reader import Run

    t0 = time.perf_counter()
    if family == "induction":
        from headmovies.render.induction import analysis
        from headmovies.render.induction.movie import make_movie as induction_movie
        from headmovies.render.induction.numpy_model import check_run

        sequences = 256 if args.sequences is None else args.sequences
        if not 1 <= sequences <= 1_000_000:
            raise UserError(f"--sequences must be in 1..1000000, got {sequences}")
        with Run(args.run) as r:
            check_run(r)
            analysed = analysis.analyse(r)  # the caption's accuracy, as the report's
            history = analysis.over_training(r, n_sequences=sequences, progress=progress)
            metrics, config = r.metrics(), r.config
        res = induction_movie(
            history,
            analysed,
            metrics,
            args.out,
            args.run.stem,
            formats,
            fps,
            hold,
            progress,
            config=config,
            event_hold_s=event_hold,
            n_sequences=sequences,
            basename=name,
        )
    else:
        from headmovies.render.ov_coherent.analysis import require_run
        from headmovies.render.ov_coherent.movie import make_movie as ov_movie

        with Run(args.run) as r:
            require_run(r)
            res = ov_movie(r, args.out, args.run.stem, formats, fps, hold, args.trail, progress, event_hold, name)
    _say(res, t0)
    return 0


def _say(result, t0: float) -> None:
    w, h = result.size
    print(f"{result.frames} frames, {w}x{h} px, {result.fps:g} fps, in {time.perf_counter() - t0:.1f} s:")
    for path in result.paths.values():
        print(f"  {path}  ({path.stat().st_size / 1e6:.2f} MB)")


def _orbits(args: argparse.Namespace, formats, fps: float, hold: float, event_hold: float, name: str) -> int:
    from headmovies.render.core.encode import Quality
    from headmovies.render.orbits.movie import make_movie

    layout = args.layout or "wide"
    panel_px = PANEL_PX[layout] if args.panel_px is None else args.panel_px
    if not MIN_PANEL_PX <= panel_px <= 2000:
        why = (
            f" (below {MIN_PANEL_PX} the text no longer fits; to show the movie smaller, give it a smaller width "
            "in the page)"
            if panel_px < MIN_PANEL_PX
            else ""
        )
        raise UserError(f"--panel-px must be in {MIN_PANEL_PX}..2000{why}, got {panel_px}")
    crf = Quality.mp4_crf if args.crf is None else args.crf
    if not 0 <= crf <= 51:
        raise UserError(f"--crf must be in 0..51 (H.264), got {crf}")
    if args.workers is not None and not 1 <= args.workers <= 64:
        raise UserError(f"--workers must be in 1..64, got {args.workers}")
    t0 = time.perf_counter()
    result = make_movie(
        args.run,
        args.out,
        panels=args.panels,
        formats=formats,
        fps=fps,
        hold_s=hold,
        basename=name,
        panel_px=panel_px,
        quality=Quality(mp4_crf=crf),
        trail_epochs=TRAIL_EPOCHS if args.trail is None else args.trail,
        progress=not args.no_progress,
        colour_orbits=not args.no_orbit_colours,
        event_hold_s=event_hold,
        timeline=not args.no_timeline,
        layout=layout,
        log=lambda s: print(s, file=sys.stderr),
        workers=args.workers,
    )
    _say(result, t0)
    return 0

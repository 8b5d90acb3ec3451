"""`headmovies orbits check|movie|figures RUN`: the orbit experiment's outputs (seed 000)."""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from headmovies.errors import UserError
from headmovies.render.core.encode import FORMATS, Quality, add_movie_arguments, movie_arguments
from headmovies.render.core.outputs import FIGURE_FORMATS
from headmovies.render.core.panels import TRAIL_EPOCHS
from headmovies.render.core.projections import parse_panel
from headmovies.render.orbits.check import DEAD_TOL, GAUGES, TOL

NAME = "orbits"
HELP = "orbit experiment (seed 000): orbit check, movie and figures of a run file"
DESCRIPTION = """\
Outputs of a run of the orbit experiment (or any run of a C_n-symmetric experiment), from the
run file alone:
  check    which heads form orbits of C_n at one snapshot, on the full QK and OV matrices
  movie    the movie: heads as trailing dots in irrep planes of their QK and OV circuits
  figures  still figures for posts (curves, final panels, orbit check, Fourier power)
Conventions: docs/math.md; what the movie shows: docs/movie.md."""

PANELS_HELP = ("default (the seed's four planes if the run's orbits show in them, else chosen from the data), "
               "auto, seed, or planes CIRCUIT:U,V such as qk:0,10 ov:10,-10")

CHECK = """\
For every shift s, each head's (T_s M_h T_s^-1, T_ms R_h T_s^-1) is matched to the nearest
head; a set of heads is a verified orbit when every shift sends each of its heads onto a head
of the set within --tol (relative Frobenius norm, QK and OV each). Heads with the same centred
QK circuit are merged (their OV summed); heads with negligible OV are dead and set apart.
Prints a short text, or JSON with --json. Definition: docs/math.md, "Orbit check"."""

MOVIE = f"""\
One frame per snapshot, one dot per head at its irrep coordinate X^(u,v) in each panel,
trailing its last 250 epochs; axes rescale smoothly to the largest radius in view; the last
frame is held ~2 s. Heads of one verified orbit share a colour (orbit check on the final
snapshot, run once and also used to choose the panels).

Panels are CIRCUIT:U,V with CIRCUIT qk (rotation frequency r = u+v) or ov (r = m*u+v, u the
output frequency); an orbit draws a regular polygon with n/gcd(r, n) vertices. --panels
default keeps the seed's four (qk:0,10 ov:10,-10 qk:0,6 ov:6,-6) when the orbits show in
them, else picks, for the two largest orbits, the planes where they carry the most power,
then fills up to four panels with the strongest QK planes of all live heads, each with an OV
plane of the same polygon order. auto always picks; seed always draws the seed's four.

Writes DIR/NAME.{{{','.join(FORMATS)}}} (those in --formats): H.264 MP4 (+faststart), VP9
WebM, looping GIF, poster PNG (last frame) and an HTML <video> snippet. Files appear only when
complete."""

FIGURES = """\
Writes into DIR:
  curves.{png,svg}            loss, accuracy and both equivariance errors over epochs
  panels.{png,svg}            the movie's panels at the final epoch (orbit colours, trails)
  orbit_check.{png,svg}       match error of every head under every shift (final snapshot)
  orbit_power.{png,svg}       Fourier power of each orbit's QK and OV circuits per (u, v)
  orbits_over_time.{png,svg}  heads in verified orbits at each snapshot
  orbit_progress.{png,svg}    each head's distance to an orbit over epochs, heads in orbits,
                              and when each orbit locks in
  orbits.json, orbits.txt     the orbit report of the final snapshot"""


def _tolerances(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tol", type=float, default=TOL, help=f"relative match tolerance (default {TOL})")
    p.add_argument("--dead-tol", type=float, default=DEAD_TOL,
                   help=f"a head whose centred OV norm is below this fraction of the largest head's is dead "
                        f"(default {DEAD_TOL})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    fmt = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("check", help="which heads form orbits of C_n at one snapshot", description=CHECK,
                       formatter_class=fmt)
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5), e.g. data/orbits.h5")
    p.add_argument("--epoch", type=int, help="snapshot epoch to check (default: the last snapshot)")
    _tolerances(p)
    p.add_argument("--gauge", choices=GAUGES, default="spec",
                   help="spec (default): centre QK rows and OV columns; bias: also remove each head's "
                        "key-independent OV part, which only enters the layer summed over heads")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    p.set_defaults(_action=check)

    p = sub.add_parser("movie", help="the orbit movie (MP4, WebM, GIF, poster, HTML snippet)", description=MOVIE,
                       formatter_class=fmt)
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--panels", nargs="+", metavar="PANEL", default=None, help=PANELS_HELP + " (default: default)")
    add_movie_arguments(p)
    p.add_argument("--name", default="orbits", help="file name stem of the outputs (default orbits)")
    p.add_argument("--panel-px", type=int, default=480, metavar="PX",
                   help="side of each square panel in pixels (default 480)")
    p.add_argument("--trail", type=float, default=TRAIL_EPOCHS, metavar="EPOCHS",
                   help=f"trail length in epochs (default {TRAIL_EPOCHS:g})")
    p.add_argument("--crf", type=int, default=Quality.mp4_crf,
                   help=f"H.264 quality, lower is better (default {Quality.mp4_crf})")
    p.add_argument("--no-orbit-colours", action="store_true", help="draw every head in one colour")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(_action=movie)

    p = sub.add_parser("figures", help="still figures for posts, PNG and SVG", description=FIGURES,
                       formatter_class=fmt)
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5), e.g. data/orbits.h5")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--panels", nargs="+", metavar="PANEL", default=None, help=PANELS_HELP + " (default: default)")
    _tolerances(p)
    p.add_argument("--formats", default=",".join(FIGURE_FORMATS), help="png,svg or one of them (default both)")
    p.add_argument("--no-over-time", action="store_true",
                   help="skip orbits_over_time and orbit_progress (they run the orbit check on every snapshot)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(_action=figures)


def run(args: argparse.Namespace) -> int:
    return args._action(args)


def check(args: argparse.Namespace) -> int:
    from headmovies.render.core.reader import Run
    from headmovies.render.orbits.check import run_report
    with Run(args.run) as r:
        report = run_report(r, args.epoch, args.tol, args.dead_tol, args.gauge)
        print(report.to_json() if args.json else f"{r.path}\n{report.text()}")
    return 0


def movie(args: argparse.Namespace) -> int:
    from headmovies.render.orbits.movie import make_movie
    panels = args.panels
    if panels and not {w.lower() for w in panels} & {"seed", "auto", "default"}:
        [parse_panel(p) for p in panels]                   # a bad plane fails before the run is opened
    formats, fps, hold = movie_arguments(args)
    if not 64 <= args.panel_px <= 2000:
        raise UserError(f"--panel-px must be in 64..2000, got {args.panel_px}")
    if not math.isfinite(args.trail) or args.trail < 0:
        raise UserError(f"--trail must be a number of epochs >= 0, got {args.trail}")
    if not 0 <= args.crf <= 51:
        raise UserError(f"--crf must be in 0..51 (H.264), got {args.crf}")
    if not args.name or "/" in args.name or args.name.startswith("."):
        raise UserError(f"--name must be a plain file name stem, got {args.name!r}")
    t0 = time.perf_counter()
    result = make_movie(args.run, args.out, panels=panels, formats=formats, fps=fps, hold_s=hold,
                        basename=args.name, panel_px=args.panel_px, quality=Quality(mp4_crf=args.crf),
                        trail_epochs=args.trail, progress=not args.no_progress,
                        colour_orbits=not args.no_orbit_colours)
    w, h = result.size
    print(f"{result.frames} frames, {w}x{h} px, {result.fps:g} fps, in {time.perf_counter() - t0:.1f} s:")
    for path in result.paths.values():
        print(f"  {path}  ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


def figures(args: argparse.Namespace) -> int:
    from headmovies.render.orbits.figures import make_figures
    formats = tuple(dict.fromkeys(f.strip().lower() for f in args.formats.split(",") if f.strip()))
    if not formats or any(f not in FIGURE_FORMATS for f in formats):
        raise UserError(f"--formats must be png, svg or png,svg; got {args.formats!r}")
    for path in make_figures(args.run, args.out, args.panels, args.tol, args.dead_tol, formats,
                             over_time=not args.no_over_time, progress=not args.no_progress):
        print(path)
    return 0

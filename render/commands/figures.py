"""`python -m render figures RUN --out DIR`: still figures of an orbit run for posts."""
from __future__ import annotations

import argparse
from pathlib import Path

from render.figures import FORMATS, make_figures
from render.orbits import DEAD_TOL, TOL

HELP = "still figures of an orbit run (curves, final panels, orbit check, Fourier power), PNG and SVG"
DESCRIPTION = HELP + """

From the run file alone (no retraining), writes into DIR:
  curves.{png,svg}            loss, accuracy and equivariance error over epochs
  panels.{png,svg}            the movie's panels at the final epoch (orbit colours, trails)
  orbit_check.{png,svg}       match error of every head under every shift (final snapshot)
  orbit_power.{png,svg}       Fourier power of each orbit's QK and OV circuits per (u, v)
  orbits_over_time.{png,svg}  heads in verified orbits at each snapshot
  orbits.json, orbits.txt     the orbit report of the final snapshot"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, help="run file (.h5) of a C_n-symmetric experiment, e.g. data/orbits.h5")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--panels", nargs="+", metavar="PANEL", default=None,
                   help="default (seed panels if the orbits live there, else auto), auto, seed, "
                        "or planes CIRCUIT:U,V such as qk:0,10 ov:10,-10")
    p.add_argument("--tol", type=float, default=TOL, help=f"orbit-check tolerance (default {TOL})")
    p.add_argument("--dead-tol", type=float, default=DEAD_TOL, help=f"dead-head threshold (default {DEAD_TOL})")
    p.add_argument("--formats", default=",".join(FORMATS), help="png,svg or one of them (default both)")
    p.add_argument("--no-over-time", action="store_true",
                   help="skip orbits_over_time (it runs the orbit check on every snapshot)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from runfile import UserError
    formats = tuple(dict.fromkeys(f.strip().lower() for f in args.formats.split(",") if f.strip()))
    if not formats or any(f not in FORMATS for f in formats):
        raise UserError(f"--formats must be png, svg or png,svg; got {args.formats!r}")
    paths = make_figures(args.run, args.out, args.panels, args.tol, args.dead_tol, formats,
                         over_time=not args.no_over_time, progress=not args.no_progress)
    for p in paths:
        print(p)
    return 0

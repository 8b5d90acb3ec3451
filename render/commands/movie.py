"""`python -m render movie RUN --out DIR`: the orbit movie (seed 000) of a run file."""
from __future__ import annotations

import time
from pathlib import Path

from render.encode import FORMATS, Quality, parse_formats
from render.movie import make_movie
from render.projections import SEED_PANELS, parse_panel
from runfile import UserError

HELP = "orbit movie (seed 000): heads as trailing dots in irrep planes of their QK/OV circuits"
DESCRIPTION = f"""\
Render the orbit movie of RUN (a run file of a C_n-symmetric experiment, e.g. orbits): one
frame per snapshot, one dot per head at its irrep coordinate X^(u,v) in each panel, trailing
its last 250 epochs; axes rescale smoothly to the largest radius in view; the last frame is
held ~2 s. Heads of one verified orbit share a colour (orbit check on the final snapshot).

Panels are CIRCUIT:U,V with CIRCUIT qk (rotation frequency r = u+v) or ov (r = m*u+v, u the
output frequency); an orbit draws a regular polygon with n/gcd(r, n) vertices. Default: the
seed's {' '.join(str(p) for p in SEED_PANELS)} (also: --panels seed). --panels auto picks,
for the two largest orbits, the planes where they carry the most power, then fills up to four
panels with the strongest QK planes of all live heads, each with an OV plane of the same
polygon order; --panels default (what `make movie` passes) keeps the seed's four when the
orbits show in them and picks automatically otherwise.

Writes DIR/NAME.{{{','.join(FORMATS)}}} (those in --formats): H.264 MP4 (+faststart), VP9
WebM, looping GIF, poster PNG (last frame) and an HTML <video> snippet. Files appear only when
complete."""


def add_arguments(parser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN", help="run file (.h5)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    parser.add_argument("--panels", nargs="+", metavar="CIRCUIT:U,V", default=None,
                        help="panels to draw, e.g. qk:0,10 ov:10,-10, or one of seed, auto, default "
                             "(default: the seed's four)")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help=f"comma-separated subset of {','.join(FORMATS)} (default: all)")
    parser.add_argument("--fps", type=float, default=24.0, help="frames per second (default 24)")
    parser.add_argument("--hold", type=float, default=2.0, metavar="S",
                        help="seconds the last frame is held before the loop restarts (default 2)")
    parser.add_argument("--name", default="orbits", help="file name stem of the outputs (default orbits)")
    parser.add_argument("--panel-px", type=int, default=480, metavar="PX",
                        help="side of each square panel in pixels (default 480)")
    parser.add_argument("--trail", type=float, default=250.0, metavar="EPOCHS",
                        help="trail length in epochs (default 250)")
    parser.add_argument("--crf", type=int, default=Quality.mp4_crf,
                        help=f"H.264 quality, lower is better (default {Quality.mp4_crf})")
    parser.add_argument("--no-orbit-colours", action="store_true",
                        help="draw every head in one colour (skip the orbit check)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    panels = args.panels
    if panels and not {w.lower() for w in panels} & {"seed", "auto", "default"}:
        panels = [parse_panel(p) for p in panels]          # a bad plane fails before the run is opened
    formats = parse_formats(args.formats)
    if args.fps <= 0 or args.hold < 0 or args.panel_px < 64 or args.trail < 0:
        raise UserError("--fps must be > 0, --hold >= 0, --trail >= 0 and --panel-px >= 64")
    if not 0 <= args.crf <= 51:
        raise UserError(f"--crf must be in 0..51 (H.264), got {args.crf}")
    if not args.name or "/" in args.name or args.name.startswith("."):
        raise UserError(f"--name must be a plain file name stem, got {args.name!r}")
    t0 = time.perf_counter()
    result = make_movie(args.run, args.out, panels=panels, formats=formats, fps=args.fps, hold_s=args.hold,
                        basename=args.name, panel_px=args.panel_px, quality=Quality(mp4_crf=args.crf),
                        trail_epochs=args.trail, progress=not args.no_progress,
                        colour_orbits=not args.no_orbit_colours)
    w, h = result.size
    print(f"{result.frames} frames, {w}x{h} px, {result.fps:g} fps, in {time.perf_counter() - t0:.1f} s:")
    for path in result.paths.values():
        print(f"  {path}  ({path.stat().st_size / 1e6:.2f} MB)")
    return 0

"""`headmovies view RUN [--out DIR]`: the viewer of any run, one self-contained HTML page, in
its family's look (orbits, induction, ov-coherent, or generic for a recorded run)."""

from __future__ import annotations

import argparse
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
from headmovies.commands.figures import add_tolerances, tolerances
from headmovies.errors import plural
from headmovies.render.core.outputs import check_out_dir

NAME = "view"
HELP = "the interactive viewer of any run in its family's look (a recorded run too): one HTML page"
DESCRIPTION = f"""\
Writes DIR/NAME.html (default viewer.html): play or scrub the snapshots, each head a dot with
its trail in each plane, a timeline of the logged metrics and the run's events, and a chosen
head's circuits at that epoch. No server, no network: open the file (file://). A recorded run
with probe scores and no group: each head at its previous-token and induction scores, one plane
per layer, as its movie (--view axes: the planes below; --view scores: an induction run's
scores in this look). Orbit runs: the movie's panels plus any plane chosen in the page, heads
coloured where the orbit check verifies them (docs/viewer.md). Induction and ov-coherent runs:
their family's planes (docs/viewer.md).

{PLANES}"""
ONLY = {
    "panels": ("orbits", "generic"),
    "tol": ("orbits",),
    "dead_tol": ("orbits",),
    "sequences": ("induction",),
    "group_order": ("generic",),
    "basis": ("generic",),
    "view": ("generic", "induction"),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_argument(p)
    p.add_argument("--out", type=Path, metavar="DIR", help="output folder (created; default for data/a.h5: data/a)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (only induction runs draw one)")
    p.add_argument("--name", help="file name stem of the page (default viewer)")
    g = group(p, ["orbits", "generic"])
    g.add_argument(
        "--panels",
        nargs="+",
        metavar="PANEL",
        help="orbit runs: default, auto, source or CIRCUIT:U,V (as the movie's); recorded runs: irrep planes",
    )
    add_tolerances(group(p, ["orbits"]))
    g = group(p, ["induction"])
    g.add_argument(
        "--sequences", type=int, metavar="N", help="fresh sequences for the attention patterns (default 256)"
    )
    add_generic_arguments(p)
    add_view_argument(p)


def run(args: argparse.Namespace) -> int:
    out = args.out if args.out is not None else default_out(args.run)
    check_panel_words(args.panels)
    if args.name is not None:
        check_name(args.name)
    check_out_dir(out)
    family = family_of(args)
    refuse_others(args, family, ONLY)
    if family == "induction" and args.view == "scores":
        family = "generic"  # the probe scores an induction run records, in the generic viewer
    name = args.name or "viewer"
    if family == "generic":
        from headmovies.render.generic.viewer import render_viewer

        print(render_viewer(args.run, out, view=args.view, name=name, **plane_options(args)))
        return 0
    if family == "orbits":
        from headmovies.render.orbits.viewer import MAX_MB, make_viewer

        result = make_viewer(args.run, out, panels=args.panels, name=name, **tolerances(args))
        mb = result.bytes / 1e6
        print(
            f"{result.path}  ({mb:.2f} MB, {plural(result.snapshots, 'snapshot')}, panels "
            f"{' '.join(map(str, result.panels))}, built in {result.seconds:.1f} s)"
            + (f"; larger than {MAX_MB:g} MB: browsers may be slow to open it" if mb > MAX_MB else "")
        )
        return 0
    if family == "induction":
        from headmovies.render.induction.viewer import N_SEQUENCES
        from headmovies.render.induction.viewer import make_viewer as induction_viewer

        sequences = N_SEQUENCES if args.sequences is None else args.sequences
        r = induction_viewer(args.run, out, sequences, name=name, progress=not args.no_progress)
    else:
        from headmovies.render.ov_coherent.viewer import make_viewer as ov_viewer

        r = ov_viewer(args.run, out, name=name)
    print(f"{r.path}: {r.snapshots} snapshots, {r.bytes / 1e6:.1f} MB, {r.seconds:.1f} s")
    return 0

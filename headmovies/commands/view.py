"""`headmovies view RUN --out DIR`: the viewer of any run, one self-contained HTML page."""

from __future__ import annotations

import argparse
from pathlib import Path

from headmovies.commands.any_run import PLANES, add_run_arguments, default_out, plane_options
from headmovies.render.core.outputs import check_out_dir

NAME = "view"
HELP = "the interactive viewer of any run (a recorded run too): one HTML page, per-head heatmaps"
DESCRIPTION = f"""\
Writes DIR/viewer.html: play or scrub the snapshots, each head a dot with its trail in each
plane, a timeline of the logged metrics, and a chosen head's centred QK and OV circuits as
heatmaps. No server, no network: open the file (file://).

{PLANES}

docs/recording.md, "Rendering"."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p)
    p.add_argument("--out", type=Path, metavar="DIR", help="output folder (created; default for data/a.h5: data/a)")


def run(args: argparse.Namespace) -> int:
    from headmovies.render.generic.viewer import render_viewer

    out = args.out if args.out is not None else default_out(args.run)
    check_out_dir(out)
    print(render_viewer(args.run, out, **plane_options(args)))
    return 0

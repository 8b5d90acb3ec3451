"""`headmovies figures RUN --out DIR`: still figures and summary.json of any run (render/generic/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from headmovies.commands.any_run import add_run_arguments, default_out, plane_options
from headmovies.render.core.outputs import check_out_dir

NAME = "figures"
HELP = "still figures of any run (a recorded run too): metrics, final heads' circuits, OV frequencies"
DESCRIPTION = """\
metrics.png (accuracies, losses), heads_final.png (every head's centred QK and OV circuits at the
last snapshot), with a cyclic group ov_frequencies.png (the heads' OV power per input frequency
over time) and summary.json (last metrics; key frequencies and their share over time; the first
epochs at which each accuracy reached 50 % and 90 %). docs/recording.md, "Rendering"."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p, planes=False)
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="output folder (created; default for data/a.h5: data/a/figures)"
    )


def run(args: argparse.Namespace) -> int:
    from headmovies.render.generic.figures import render_figures

    out = args.out if args.out is not None else default_out(args.run) / "figures"
    check_out_dir(out)
    options = plane_options(args)
    paths = render_figures(args.run, out, options["group_order"])
    print(f"{out}: {', '.join(p.name for p in paths)}")
    return 0

"""`python -m render orbits RUN`: check on the full QK and OV matrices whether the heads of one
snapshot fall into orbits of C_n (seed 000; definition in render/orbits.py and the README)."""
from __future__ import annotations

import argparse

from render.orbits import DEAD_TOL, GAUGES, TOL, run_report
from render.reader import Run

HELP = "check which heads form orbits of C_n (on the full QK/OV matrices) at one snapshot"
DESCRIPTION = HELP + """

For every shift s, each head's (T_s M_h T_s^-1, T_ms R_h T_s^-1) is matched to the nearest
head; a set of heads is a verified orbit when every shift sends each of its heads onto a head
of the set within --tol (relative Frobenius norm, QK and OV each). Heads with the same centred
QK circuit are merged (their OV summed); heads with negligible OV are dead and set apart.
Prints a short text, or JSON with --json."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run file (.h5) of a C_n-symmetric experiment, e.g. data/orbits.h5")
    p.add_argument("--epoch", type=int, help="snapshot epoch to check (default: the last snapshot)")
    p.add_argument("--tol", type=float, default=TOL, help=f"relative match tolerance (default {TOL})")
    p.add_argument("--dead-tol", type=float, default=DEAD_TOL,
                   help=f"a head whose centred OV norm is below this fraction of the largest head's is dead "
                        f"(default {DEAD_TOL})")
    p.add_argument("--gauge", choices=GAUGES, default="spec",
                   help="spec (default, SPEC §0): centre QK rows and OV columns; bias: also remove each "
                        "head's key-independent OV part, which only enters the layer summed over heads")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")


def run(args: argparse.Namespace) -> int:
    with Run(args.run) as r:
        report = run_report(r, args.epoch, args.tol, args.dead_tol, args.gauge)
        print(report.to_json() if args.json else f"{r.path}\n{report.text()}")
    return 0

"""One colour scheme for every picture of the orbit experiment (movie, stills, figures).

Heads of the same verified orbit share a colour: the largest orbit blue, the next orange, then
matplotlib's default cycle (as in source 000: 12 blue, 4 orange); live heads in no orbit grey;
dead heads (negligible OV circuit, docs/math.md "Orbit check") a lighter grey. Before an orbit
is verified its heads are grey like the rest: no frame shows what comes after its epoch.
"""

from __future__ import annotations

ORBIT_COLOURS = ("C0", "C1", "C2", "C3", "C4", "C5", "C6", "C8", "C9")  # C7 is grey: kept for "no orbit"
OTHER_COLOUR = "#a0a0a0"
DEAD_COLOUR = "#dcdcdc"
DEAD_EDGE = "#b4b4b4"  # the outline that keeps a small light-grey dead dot visible on white
ONE_COLOUR = "C0"
SHAPES = {1: "point", 2: "pair", 3: "triangle", 4: "square"}


def orbit_colour(i: int) -> str:
    """Colour of the i-th orbit (largest first)."""
    return ORBIT_COLOURS[i % len(ORBIT_COLOURS)]


def shape_name(k: int) -> str:
    """'pair', 'triangle', 'square', '12-gon' for a polygon of k vertices."""
    return SHAPES.get(k, f"{k}-gon")

"""The orbit check of every snapshot, drawn (`history.OrbitHistory`; the `orbits_over_time`
and `orbit_progress` figures).

    orbits_over_time  heads in verified orbits, by orbit size, at every snapshot
    orbit_progress    orbit formation as a progress measure: each live head's distance to the
                      nearest orbit structure (worst-shift match error, log) over epochs, heads
                      coloured by their final orbit, the tolerance marked; below, the heads in
                      verified orbits; each final orbit's lock-in epoch marked in both
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from headmovies.render.orbits.check import heads
from headmovies.render.orbits.colours import DEAD_COLOUR, DEAD_EDGE, OTHER_COLOUR, orbit_colour
from headmovies.render.orbits.history import OrbitHistory


def orbits_over_time(h: OrbitHistory) -> tuple[np.ndarray, dict[int, np.ndarray], np.ndarray]:
    """(epochs [T], {orbit size: heads in verified orbits of that size [T]}, dead heads [T]) from
    the orbit check of every snapshot."""
    return h.epochs, h.counts_by_size(), h.dead.sum(1)


def orbits_over_time_figure(
    epochs: np.ndarray, counts: dict[int, np.ndarray], dead: np.ndarray, n_heads: int, tol: float, title: str = ""
) -> Figure:
    """Heads in verified orbits, stacked by orbit size, over epochs; the dead heads (in no
    orbit) a separate line, not stacked on them."""
    fig = Figure(figsize=(7.0, 3.2), layout="constrained")
    ax = fig.subplots()
    base = np.zeros(len(epochs))
    for i, (k, c) in enumerate(counts.items()):
        ax.fill_between(
            epochs, base, base + c, step="post", alpha=0.8, lw=0, color=orbit_colour(i), label=f"in orbits of size {k}"
        )
        base = base + c
    if dead.any():
        ax.step(epochs, dead, where="post", color=DEAD_EDGE, lw=1.3, ls="--", label="dead heads (in no orbit)")
    ax.set_xlim(epochs[0], epochs[-1] if len(epochs) > 1 else epochs[0] + 1)
    ax.set_ylim(0, n_heads)
    ax.set_xlabel("epoch")
    ax.set_ylabel("heads")
    ax.grid(alpha=0.3, lw=0.5)
    if counts or dead.any():
        ax.legend(fontsize=8, frameon=False, loc="upper left")
    else:
        ax.text(
            0.5,
            0.5,
            "no verified orbit at any snapshot",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="#606060",
        )
    ax.set_title(
        title
        or f"heads in verified orbits (tolerance {tol:.0%}), by orbit size, at each snapshot"
        + ("; dead heads apart" if dead.any() else ""),
        fontsize=10,
    )
    return fig


def orbit_progress_figure(h: OrbitHistory, title: str = "") -> Figure:
    """Top: each head's worst-shift match error (`OrbitHistory.head_error`, log; a gap where
    the head is dead) over epochs, coloured by the verified orbit it ends in (largest first,
    as in the movie), grey if it ends in none, pale if it ends dead; the tolerance dashed.
    Bottom: heads in verified orbits at each snapshot. Dotted verticals: the epoch from which
    each final orbit is verified at every later snapshot (`OrbitHistory.locked_in`)."""
    from matplotlib.ticker import FuncFormatter

    T, H = h.head_error.shape
    final = h.orbits[-1] if h.orbits else []
    colour = [DEAD_COLOUR if h.dead[-1, k] else OTHER_COLOUR for k in range(H)]
    for i, (_, members, _) in enumerate(final):
        for k in members:
            colour[k] = orbit_colour(i)
    fig = Figure(figsize=(7.4, 5.6), layout="constrained")
    ax, ax2 = fig.subplots(2, 1, sharex=True, height_ratios=(2.2, 1))
    err = h.head_error
    finite = err[np.isfinite(err) & (err > 0)]
    order = (
        [k for k in range(H) if colour[k] == DEAD_COLOUR]
        + [k for k in range(H) if colour[k] == OTHER_COLOUR]
        + [k for _, members, _ in final for k in members]
    )  # orbit heads drawn last, on top
    for k in order:
        in_orbit = colour[k] not in (DEAD_COLOUR, OTHER_COLOUR)
        ax.plot(
            h.epochs,
            np.where(err[:, k] > 0, err[:, k], np.nan),
            color=colour[k],
            lw=1.3 if in_orbit else 0.8,
            alpha=1.0 if in_orbit else 0.8,
            zorder=3 if in_orbit else 2,
        )
    ax.axhline(h.tol, color="black", ls="--", lw=1.0, zorder=4)
    ax.set_yscale("log")
    if finite.size:
        ax.set_ylim(min(finite.min(), h.tol / 3) / 1.5, max(finite.max(), h.tol * 3) * 1.5)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:g} %"))
    ax.set_ylabel("worst-shift match error")
    ax.grid(alpha=0.3, which="major", lw=0.5)
    ax2.step(h.epochs, h.heads_in_orbits(), where="post", color="black", lw=1.3)
    ax2.set_ylim(0, H)
    ax2.set_ylabel("heads in orbits")
    ax2.set_xlabel("epoch")
    ax2.grid(alpha=0.3, lw=0.5)
    handles = []
    for i, (size, members, _worst) in enumerate(final):
        when = h.locked_in(members)
        for a in (ax, ax2):
            if when is not None:
                a.axvline(when, color=orbit_colour(i), ls=":", lw=1.4, zorder=1)
        locked = f"locked in at epoch {when:,}" if when is not None else "not locked in"
        handles.append(
            Line2D(
                [],
                [],
                color=orbit_colour(i),
                lw=1.5,
                label=f"orbit {i + 1} (size {size}, heads {', '.join(map(str, members))}): {locked}",
            )
        )
    n_none = sum(c == OTHER_COLOUR for c in colour)
    n_dead = sum(c == DEAD_COLOUR for c in colour)
    if n_none:
        handles.append(Line2D([], [], color=OTHER_COLOUR, lw=1.0, label=f"{heads(n_none)} in no orbit at the end"))
    if n_dead:
        handles.append(Line2D([], [], color=DEAD_COLOUR, lw=1.0, label=f"{heads(n_dead)} dead at the end"))
    handles.append(Line2D([], [], color="black", ls="--", lw=1.0, label=f"tolerance {h.tol:.0%}"))
    fig.legend(
        handles=handles, loc="outside lower center", ncols=2 if len(handles) > 3 else 1, frameon=False, fontsize=8
    )
    ax.set_xlim(h.epochs[0], h.epochs[-1] if T > 1 else h.epochs[0] + 1)
    ax.set_title(
        title or "orbit formation: each head's distance to the nearest orbit structure, and heads in verified orbits",
        fontsize=10,
    )
    return fig

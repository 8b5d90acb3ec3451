"""The orbit check of one snapshot, drawn (the `orbit_check` and `orbit_power` figures).

    orbit_check   relative match error of every head under every shift (log colour; the
                  tolerance marked), heads grouped by orbit
    orbit_power   Fourier power |X^(u, v)|^2 of each orbit's QK and OV circuits over all
                  frequency pairs (fraction of the orbit's total; the movie's planes boxed)

Source 000; docs/math.md ("The orbit check").
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from headmovies.errors import UserError
from headmovies.render.core.projections import Panel
from headmovies.render.orbits.check import Orbit, OrbitReport, format_error, heads
from headmovies.render.orbits.colours import DEAD_COLOUR, OTHER_COLOUR, orbit_colour
from headmovies.render.orbits.panel_choice import orbit_power, signed


def orbit_colours(report: OrbitReport) -> list:
    """Per head: its orbit's colour (largest orbit blue, next orange, ...), grey otherwise,
    light grey if dead (`colours`)."""
    colours = [OTHER_COLOUR] * report.n_heads
    for i, o in enumerate(report.orbits):
        for h in o.heads:
            colours[h] = orbit_colour(i)
    for h in report.dead:
        colours[h] = DEAD_COLOUR
    return colours


def head_order(report: OrbitReport) -> list[int]:
    """Heads grouped: each orbit in shift order (merged duplicates together), then heads in
    no orbit, then dead heads."""
    order = [h for o in report.orbits for unit in o.units for h in unit]
    return order + list(report.unassigned) + list(report.dead)


def orbit_check_figure(report: OrbitReport, title: str = "") -> Figure:
    """Heatmap of report.match_error [shift, head] (log colour: blue within tolerance, orange
    beyond), heads grouped by orbit under a strip of orbit colours; dead heads pale grey."""
    order = head_order(report)
    err = report.match_error[:, order]
    H, n = len(order), report.n
    fig = Figure(figsize=(max(6.0, 0.24 * H + 2.5), max(4.0, 0.2 * n + 1.8)), layout="constrained")
    ax = fig.subplots()
    rest = err[1:][np.isfinite(err[1:])]  # shift 0 always matches itself exactly
    lo = max(1e-6, min(report.tol / 100, rest.min() if rest.size else 1.0))
    hi = max(report.tol * 10, rest.max() if rest.size else 1.0)
    # two-tone log scale: blues within tolerance, oranges beyond it
    split = (np.log(report.tol) - np.log(lo)) / (np.log(hi) - np.log(lo))
    k = 256
    below = matplotlib.colormaps["Blues_r"](np.linspace(0.0, 0.75, max(1, round(k * split))))
    above = matplotlib.colormaps["Oranges"](np.linspace(0.35, 1.0, max(1, k - round(k * split))))
    cmap = ListedColormap(np.vstack([below, above])).with_extremes(bad=DEAD_COLOUR)
    masked = np.ma.masked_invalid(np.clip(err, lo, hi))
    im = ax.imshow(
        masked,
        aspect="auto",
        cmap=cmap,
        norm=LogNorm(lo, hi),
        interpolation="nearest",
        extent=(-0.5, H - 0.5, n - 0.5, -0.5),
    )
    colours = orbit_colours(report)
    for x, h in enumerate(order):
        ax.add_patch(Rectangle((x - 0.5, -1.6), 1, 0.9, color=colours[h], clip_on=False))
    ax.set_ylim(n - 0.5, -1.7)
    ax.set_xticks(range(H), [str(h) for h in order], fontsize=6, rotation=90)
    ax.set_yticks(range(0, n, max(1, n // 12)))
    ax.set_xlabel("head (grouped by orbit, each in shift order)")
    ax.set_ylabel("shift s")
    bounds = np.cumsum([len(o.heads) for o in report.orbits] + [len(report.unassigned)])
    for b in bounds[:-1] if len(report.dead) == 0 else bounds:
        ax.axvline(b - 0.5, color="white", lw=1.2)
    cb = fig.colorbar(im, ax=ax, shrink=0.9, pad=0.01)
    cb.ax.axhline(report.tol, color="black", lw=1.5)
    cb.set_label(f"relative error of the best match (blue: within the {report.tol:.0%} tolerance)")
    handles = [
        Line2D(
            [],
            [],
            ls="",
            marker="s",
            ms=8,
            color=orbit_colour(i),
            label=f"orbit {i + 1}: size {o.size}, stabiliser order {len(o.stabiliser)}, "
            f"worst {format_error(o.worst_error, report.tol)}",
        )
        for i, o in enumerate(report.orbits)
    ]
    if report.unassigned:
        handles.append(
            Line2D(
                [],
                [],
                ls="",
                marker="s",
                ms=8,
                color=OTHER_COLOUR,
                label=f"{heads(len(report.unassigned))} in no orbit",
            )
        )
    if report.dead:
        handles.append(
            Line2D([], [], ls="", marker="s", ms=8, color=DEAD_COLOUR, label=f"{heads(len(report.dead))} dead")
        )
    fig.legend(
        handles=handles, loc="outside lower center", ncols=min(3, max(1, len(handles))), frameon=False, fontsize=8
    )
    at = f" at epoch {report.epoch:,}" if report.epoch is not None else ""
    ax.set_title(title or f"orbit check{at}: C_{n}, outputs shift by {report.m}s", fontsize=10)
    return fig


def _centred_freqs(n: int) -> np.ndarray:
    """Frequencies in display order: -ceil(n/2)+1 .. n//2 (signed)."""
    return np.array(sorted({signed(f, n) for f in range(n)}))


def orbit_power_figure(
    report: OrbitReport, M: np.ndarray, R: np.ndarray, panels: Sequence[Panel] = (), title: str = ""
) -> Figure:
    """For each verified orbit (and the heads in no orbit): its power |X^(u,v)|^2 over
    frequency pairs for QK (u query, v key) and OV (u output, v input), as a fraction of the
    orbit's total, log colour; the movie's `panels` and their conjugates boxed."""
    n = report.n
    groups = [(f"orbit {i + 1} (size {o.size})", o, orbit_colour(i)) for i, o in enumerate(report.orbits)]
    if report.unassigned:
        groups.append(
            (
                f"{heads(len(report.unassigned))} in no orbit",
                Orbit([[h] for h in report.unassigned], [], float("nan")),
                OTHER_COLOUR,
            )
        )
    if not groups:
        raise UserError("every head is dead: no Fourier power to show")
    freqs = _centred_freqs(n)
    idx = freqs % n
    fig = Figure(figsize=(7.4, 3.3 * len(groups) + 0.4), layout="constrained")
    axes = fig.subplots(len(groups), 2, squeeze=False)
    norm = LogNorm(1e-4, 1)
    for row, (label, orbit, colour) in enumerate(groups):
        power = orbit_power(orbit, M, R)
        for col, circuit in enumerate(("qk", "ov")):
            ax = axes[row, col]
            P = power[circuit]
            frac = P / P.sum() if P.sum() > 0 else P
            img = frac[np.ix_(idx, idx)]
            im = ax.imshow(
                np.clip(img, 1e-4, 1),
                origin="lower",
                cmap="magma_r",
                norm=norm,
                extent=(freqs[0] - 0.5, freqs[-1] + 0.5, freqs[0] - 0.5, freqs[-1] + 0.5),
            )
            # where this orbit would draw its full polygon: order(r) == size
            if orbit.stabiliser:
                for p in panels:
                    if p.circuit != circuit:
                        continue
                    for u, v in ((p.u, p.v), (-p.u, -p.v)):
                        ax.add_patch(
                            Rectangle(
                                (signed(v, n) - 0.5, signed(u, n) - 0.5),
                                1,
                                1,
                                fill=False,
                                ec="#1f77b4" if (u, v) == (p.u, p.v) else "#9ecae1",
                                lw=1.3,
                            )
                        )
            top = np.unravel_index(np.argmax(img), img.shape)
            share = img[top]
            ax.set_title(
                f"{label}: {circuit.upper()}\nlargest {share:.1%} at (u,v)=({freqs[top[0]]},{freqs[top[1]]})",
                fontsize=9,
                color=colour if colour != OTHER_COLOUR else "#404040",
            )
            ax.set_xlabel("v (key frequency)" if circuit == "qk" else "v (input frequency)", fontsize=8)
            ax.set_ylabel("u (query frequency)" if circuit == "qk" else "u (output frequency)", fontsize=8)
            ticks = [f for f in freqs if f % max(1, n // 8) == 0]
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
            ax.tick_params(labelsize=7)
    fig.colorbar(im, ax=axes, shrink=0.6, label="fraction of the orbit's power")
    at = f" at epoch {report.epoch:,}" if report.epoch is not None else ""
    fig.suptitle(
        title
        or f"Fourier power |X^(u,v)|² of each orbit's merged QK and OV circuits{at}\n"
        f"(boxed: the movie's planes and their conjugates)",
        fontsize=10,
    )
    return fig

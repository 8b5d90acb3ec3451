"""The figures of a run over training (`figures` lists them): its logged curves (`curves_figure`),
and the orbit check (`history.OrbitHistory`: `orbits_over_time_figure`, `orbit_progress_figure`)
and orbit spectrum of every snapshot (`orbit_spectrum_figure`: `spectrum.orbit_spectrum` of each,
gathered by `stream.collect`). The spectrum has one panel per frequency omega of the final
snapshot's groups of two or more heads (at most MAX_PANELS, largest groups first): |mu_k| /
sum |rho_h| for k = 1 .. min(N_omega - 1, MAX_K) over epochs, log scale, with the group's heads
at each snapshot (its members may change as heads move between frequencies); a verified orbit
at omega has every curve at 0 (drawn at the floor). Source: docs/math.md, "Orbit spectrum".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from headmovies.errors import UserError
from headmovies.render.core.timeline import Event
from headmovies.render.orbits.check import heads
from headmovies.render.orbits.colours import DEAD_COLOUR, DEAD_EDGE, OTHER_COLOUR, orbit_colour
from headmovies.render.orbits.history import OrbitHistory
from headmovies.render.orbits.spectrum import FrequencyGroup

MARK_COLOUR = "#606060"

PRETTY = {
    "train_loss": "train cross-entropy",
    "heldout_loss": "held-out cross-entropy",
    "eq_loss": "equivariance loss",
    "train_acc": "train",
    "heldout_acc": "held-out",
    "eq_error_pooled": "pooled",
    "eq_error_worst_input": "worst input",
}
EQ_ERRORS = ("eq_error_pooled", "eq_error_worst_input")  # docs/math.md, "Equivariance loss and equivariance errors"


def _label(key: str) -> str:
    return PRETTY.get(key, key.replace("_", " "))


def _colour(key: str) -> str | None:
    """Train blue, held-out orange, equivariance green in every panel."""
    for prefix, colour in (("train", "C0"), ("heldout", "C1"), ("eq", "C2")):
        if key.startswith(prefix):
            return colour
    return None


def curves_figure(metrics: dict[str, np.ndarray], title: str = "", marks: Sequence[Event] = ()) -> Figure:
    """Loss and equivariance error (log y) and accuracy (%, linear) over epochs, each curve
    labelled with its final value. metrics: `Run.metrics()` ({'epoch': [K], name: [K]}).
    marks: changes of the training (`events.phase_marks`: the penalty on, phase 2), a dashed
    vertical in every panel, numbered; the figure's note under the panels says what each is."""
    epoch = metrics["epoch"]
    groups = [
        ("loss", [k for k in sorted(metrics) if k.endswith("loss")], True),
        ("accuracy", [k for k in sorted(metrics) if k.endswith("_acc")], False),
        ("equivariance error", [k for k in EQ_ERRORS if k in metrics], True),
    ]
    groups = [g for g in groups if g[1]]
    if not groups:
        raise UserError("the run logged no loss, accuracy or equivariance-error metrics to plot")
    fig = Figure(figsize=(4.2 * len(groups), 3.4), layout="constrained")
    for ax, (label, keys, log) in zip(fig.subplots(1, len(groups), squeeze=False)[0], groups):
        for k in keys:
            y = np.asarray(metrics[k], float)
            if log:
                ok = y > 0  # log axes cannot show 0
                ax.plot(
                    epoch[ok],
                    y[ok],
                    lw=1.5,
                    color=_colour(k),
                    ls="--" if k == "eq_error_worst_input" else "-",
                    label=f"{_label(k)} (final {y[-1]:.2g})",
                )
            else:
                ax.plot(epoch, 100 * y, lw=1.5, color=_colour(k), label=f"{_label(k)} (final {100 * y[-1]:.1f}%)")
        if log:
            ax.set_yscale("log")
        else:
            ax.set_ylim(-2, 102)
            ax.set_ylabel("%")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3, which="both" if log else "major", lw=0.5)
        for i, e in enumerate(marks):
            ax.axvline(e.epoch, color=MARK_COLOUR, ls="--", lw=1.0, zorder=1)
            ax.text(
                e.epoch, 1.0, f" {i + 1}", transform=ax.get_xaxis_transform(), va="top", fontsize=8, color=MARK_COLOUR
            )
        ax.legend(fontsize=8, frameon=False)
    if marks:
        fig.supxlabel(
            "   ".join(f"{i + 1}: epoch {e.epoch:,}, {e.label}" for i, e in enumerate(marks)),
            fontsize=8,
            color="#404040",
        )
    if title:
        fig.suptitle(title, fontsize=10, color="#404040")
    return fig


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


MAX_PANELS = 6
MAX_K = 6
FLOOR = 1e-4  # drawn floor of the log axis: moments below it are zero to the eye


def spectrum_series(
    groups: Sequence[Sequence[FrequencyGroup]], omega: int, k_max: int
) -> tuple[np.ndarray, np.ndarray]:
    """(spectrum [T, k_max] with NaN where the group is absent or has no such k, heads [T]) of
    the group at `omega` in each snapshot's groups."""
    spec = np.full((len(groups), k_max), np.nan)
    count = np.zeros(len(groups), int)
    for t, gs in enumerate(groups):
        for g in gs:
            if g.omega == omega:
                k = min(k_max, len(g.spectrum))
                spec[t, :k] = g.spectrum[:k]
                count[t] = len(g.heads)
    return spec, count


def orbit_spectrum_figure(epochs: np.ndarray, groups: Sequence[Sequence[FrequencyGroup]], title: str = "") -> Figure:
    """The figure from epochs int [T] and each snapshot's frequency groups (`stream.Collected.groups`)."""
    final = sorted((g for g in groups[-1] if len(g.heads) >= 2), key=lambda g: (-len(g.heads), g.omega))[:MAX_PANELS]
    cols = min(3, max(1, len(final)))
    rows = max(1, -(-len(final) // cols))
    fig = Figure(figsize=(3.8 * cols, 2.8 * rows + 0.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax in axes[len(final) :]:
        ax.set_axis_off()
    if not final:
        axes[0].set_axis_on()
        axes[0].text(0.5, 0.5, "no frequency group of two or more live heads", ha="center", va="center")
        axes[0].set_axis_off()
    for ax, g in zip(axes, final):
        k_max = min(g.order - 1, MAX_K)
        spec, count = spectrum_series(groups, g.omega, k_max)
        for k in range(k_max):
            ax.plot(epochs, np.maximum(spec[:, k], FLOOR), lw=1.2, color=orbit_colour(k), label=f"k = {k + 1}")
        ax.set_yscale("log")
        ax.set_ylim(FLOOR * 0.8, 1.2)
        ax.grid(alpha=0.3, lw=0.5)
        ax.set_xlabel("epoch")
        ax.set_ylabel("|μ̂_k| / Σ|ρ_h|")
        amplitudes = f"; score amplitude A {g.amplitude.min():.2f}–{g.amplitude.max():.2f}" if len(g.amplitude) else ""
        ax.set_title(
            f"ω = {g.omega} (orbit size {g.order}): {len(g.heads)} heads at the end\n"
            f"{count.min()}–{count.max()} heads over time{amplitudes}",
            fontsize=8,
        )
        ax.legend(fontsize=7, frameon=False, loc="lower left", ncol=2)
    fig.suptitle(
        title or "orbit spectrum of each frequency group over epochs (0 for every k on an exact orbit)", fontsize=10
    )
    return fig

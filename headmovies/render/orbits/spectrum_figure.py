"""The orbit spectrum over epochs (the `orbit_spectrum` figure; `spectrum.orbit_spectrum` of
every snapshot, gathered by `stream.collect`).

One panel per frequency omega of the final snapshot's groups of two or more heads (at most
MAX_PANELS, largest groups first): |mu_k| / sum |rho_h| for k = 1 .. min(N_omega - 1, MAX_K)
over epochs, log scale, with the group's heads at each snapshot (its members may change as
heads move between frequencies); a verified orbit at omega has every curve at 0 (drawn at the
floor). Source: docs/math.md, "Orbit spectrum".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from headmovies.render.orbits.colours import orbit_colour
from headmovies.render.orbits.spectrum import FrequencyGroup

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

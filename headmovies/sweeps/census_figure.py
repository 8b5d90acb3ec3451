"""The figure of the orbit census (census.{png,svg}, docs/sweeps.md), from the census rows of
runs trained to their last epoch: outcome shares per recipe, accuracy against equivariance
error per run, each orbit's lock-in epoch, and the early screen against its epoch.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from headmovies.sweeps.census_tables import by_recipe, complete_runs, screen_epochs_of, screen_stats, wilson_interval

if TYPE_CHECKING:
    from headmovies.sweeps.census_rows import Settings


def census_figure(rows: list[dict], settings: Settings):
    """Four panels: outcome shares per recipe (default gauge; bias gauge below); train accuracy
    against the pooled equivariance error per run; each verified orbit's lock-in epoch; and the
    early screen (heads keeping their omega, orbits whose group fitted) against the screen epoch."""
    from matplotlib.figure import Figure

    from headmovies.render.orbits.colours import orbit_colour

    rows = complete_runs(rows)
    groups = by_recipe(rows)
    names = list(groups)
    outcomes = [
        o for o, _ in Counter([r["outcome"] for r in rows] + [r["outcome_bias_gauge"] for r in rows]).most_common()
    ]
    outcomes = ["none"] + [o for o in outcomes if o != "none"] if "none" in outcomes else outcomes
    # one colour per orbit size in every panel; an outcome of one size takes that size's colour
    sizes = sorted({o["size"] for r in rows for o in r["orbits"] + r["orbits_bias_gauge"]}, reverse=True)
    size_colour = {k: orbit_colour(i) for i, k in enumerate(sizes)}
    combos = [o for o in outcomes if o != "none" and "+" in o]
    colour = {o: size_colour[int(o)] for o in outcomes if o != "none" and "+" not in o}
    colour.update({o: orbit_colour(len(sizes) + i) for i, o in enumerate(combos)})
    colour["none"] = "0.82"
    markers = "os^Dvp"
    fig = Figure(figsize=(12, 9.4), layout="constrained")
    (a, b), (c, d) = fig.subplots(2, 2)

    y = np.arange(len(names))[::-1]
    # thick bar: the default gauge (what the census counts); thin hatched bar below: bias gauge
    for key, dy, height, hatch, size in (("outcome", 0.14, 0.52, None, 8), ("outcome_bias_gauge", -0.3, 0.3, "///", 7)):
        left = np.zeros(len(names))
        for o in outcomes:
            share = np.array([sum(r[key] == o for r in groups[k]) / len(groups[k]) for k in names])
            bars = a.barh(
                y + dy,
                share,
                height=height,
                left=left,
                color=colour[o],
                edgecolor="white",
                hatch=hatch,
                label=o if key == "outcome" else None,
            )
            for bar, s, k in zip(bars, share, names):
                if s >= 0.04:
                    a.text(
                        bar.get_x() + bar.get_width() / 2,
                        bar.get_y() + bar.get_height() / 2,
                        str(sum(r[key] == o for r in groups[k])),
                        ha="center",
                        va="center",
                        fontsize=size,
                        bbox=dict(facecolor="white", edgecolor="none", pad=0.6, alpha=0.85) if hatch else None,
                    )
            left += share
        for yk, k in zip(y + dy + height / 2, names):  # on the bar's top edge, clear of the counts
            n_any = sum(r[key] != "none" for r in groups[k])
            lo, hi = wilson_interval(n_any, len(groups[k]))
            a.errorbar(
                [1 - n_any / len(groups[k])],
                [yk],
                xerr=[[hi - n_any / len(groups[k])], [n_any / len(groups[k]) - lo]],
                color="black",
                lw=1.2,
                capsize=2.5,
                zorder=4,
            )
    a.set_yticks(y, [f"{k}\n({len(groups[k])} seeds)" for k in names], fontsize=8)
    a.set_xlim(0, 1)
    a.set_xlabel("fraction of seeds (numbers: seeds)")
    a.set_title(
        "verified orbit structure at the last snapshot\n(lower, hatched bars: the same check in the bias gauge;"
        "\nwhiskers: 95 % interval of the share of seeds with any orbit)",
        fontsize=10,
        pad=14 + 15 * (1 + -(-len(outcomes) // 8)),
    )  # room for the legend's rows
    a.legend(
        title="orbit sizes",
        fontsize=8,
        title_fontsize=8,
        loc="lower left",
        bbox_to_anchor=(0, 1.0),
        ncol=min(len(outcomes), 8),
        frameon=False,
        columnspacing=1.0,
        handlelength=1.6,
    )

    for i, k in enumerate(names):
        rs = groups[k]
        for o in outcomes:
            sel = [r for r in rs if r["outcome"] == o and r["eq_error_pooled"] and r["train_acc"] is not None]
            if sel:
                b.scatter(
                    [r["eq_error_pooled"] for r in sel],
                    [100 * r["train_acc"] for r in sel],
                    marker=markers[i % len(markers)],
                    s=22 if o == "none" else 48,
                    color=colour[o],
                    edgecolor="0.3" if o != "none" else "none",
                    linewidth=0.5,
                    zorder=3 if o != "none" else 2,
                )
        b.scatter([], [], marker=markers[i % len(markers)], color="0.5", label=k)
    b.set_xscale("log")
    b.set_xlabel("equivariance error, pooled (last snapshot)")
    b.set_ylabel("train accuracy (%)")
    b.set_title("each run: accuracy against equivariance (colour: orbit sizes)")
    b.legend(fontsize=8, title="recipe (marker)", frameon=False)
    b.grid(alpha=0.3)

    for i, k in enumerate(names):
        rs = groups[k]
        starts = {r["phase2_start"] for r in rs if r["phase2_start"]}
        for s in starts:
            c.plot([s, s], [y[i] - 0.4, y[i] + 0.4], color="0.4", lw=1, ls="--")
        ends = {r["epochs"] for r in rs}
        for e in ends:
            c.plot([e, e], [y[i] - 0.4, y[i] + 0.4], color="0.2", lw=1.5)
        pts = [(o["locked_in"], o["size"]) for r in rs for o in r["orbits"] if o["locked_in"] is not None]
        if pts:
            rng = np.random.default_rng(i)
            ep = np.array([p[0] for p in pts], float)
            sz = np.array([p[1] for p in pts])
            jitter = rng.uniform(-0.3, 0.3, len(pts))
            for size in sorted(set(sz)):
                sel = sz == size
                c.scatter(
                    ep[sel],
                    y[i] + jitter[sel],
                    s=14 + 8 * size,
                    alpha=0.8,
                    color=size_colour[size],
                    edgecolor="0.2",
                    linewidth=0.4,
                )
    for size in sizes:
        c.scatter(
            [], [], s=14 + 8 * size, color=size_colour[size], edgecolor="0.2", linewidth=0.4, label=f"{size}-orbit"
        )
    c.plot([], [], color="0.4", ls="--", label="phase 2 starts")
    c.plot([], [], color="0.2", lw=1.5, label="last epoch")
    c.set_yticks(y, names, fontsize=8)
    c.set_xlabel("epoch")
    c.set_title("when each final orbit locks in (verified at every later snapshot)")
    c.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(sizes) + 2)
    if not sizes:
        c.text(0.5, 0.5, "no verified orbit", transform=c.transAxes, ha="center", va="center", color="0.4")
    c.grid(axis="x", alpha=0.3)

    for i, k in enumerate(names):
        rs = groups[k]
        eps = screen_epochs_of(rs)
        if not eps:
            continue
        stats = [screen_stats(rs, e) for e in eps]
        (line,) = d.plot(
            eps,
            [100 * (s["omega_kept"] or 0) for s in stats],
            marker=markers[i % len(markers)],
            label=f"{k}: heads keeping their ω",
        )
        orbits = max(s["orbits"] for s in stats)
        if orbits:  # few orbits make a coarse line: the label says how few
            d.plot(
                eps,
                [100 * (s["recall"] or 0) for s in stats],
                marker=markers[i % len(markers)],
                ls="--",
                color=line.get_color(),
                label=f"{k}: final orbits whose group fits (of {orbits})",
            )
    d.set_ylim(0, 102)
    d.set_xlabel("screen epoch")
    d.set_ylabel("%")
    d.set_title("early screen: frequency groups at an early epoch vs the end")
    if d.get_legend_handles_labels()[0]:
        d.legend(fontsize=6.5, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    else:
        d.text(
            0.5,
            0.5,
            "no snapshot at the screen epochs\n(--screen-epochs)",
            transform=d.transAxes,
            ha="center",
            va="center",
            color="0.4",
        )
    d.grid(alpha=0.3)
    return fig

"""Still figures of an orbit run for posts, from the run file alone (no retraining).

    curves        loss, accuracy and both equivariance errors (pooled, worst input) over epochs
                  (log scales where they fit)
    panels        the movie's panels at the final epoch (trails, orbit colours, legend)
    orbit_check   the orbit check as a picture: relative match error of every head under every
                  shift (log colour; the tolerance marked), heads grouped by orbit
    orbit_power   Fourier power |X^(u, v)|^2 of each orbit's QK and OV circuits over all
                  frequency pairs (fraction of the orbit's total; the movie's planes boxed)
    orbits_over_time  heads in verified orbits, by orbit size, at every snapshot
    orbit_progress    orbit formation as a progress measure: each live head's distance to the
                  nearest orbit structure (worst-shift match error, log) over epochs, heads
                  coloured by their final orbit, the tolerance marked; below, the heads in
                  verified orbits; each final orbit's lock-in epoch marked in both

Each is written as PNG and SVG, under a temporary name renamed when complete, together with
the orbit report (orbits.json, orbits.txt). Sources: seed 000; docs/math.md; docs/movie.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from headmovies.errors import UserError
from headmovies.render.core.outputs import FIGURE_FORMATS, prepare_out_dir, save_figure, write_text
from headmovies.render.core.panels import TRAIL_EPOCHS, PanelFigure, frame_states
from headmovies.render.core.projections import Panel
from headmovies.render.orbits.captions import AXIS_LABELS, header_text, metrics_caption
from headmovies.render.orbits.check import DEAD_TOL, TOL, Orbit, OrbitReport, format_error, group_of, heads
from headmovies.render.orbits.colours import DEAD_COLOUR, OTHER_COLOUR, orbit_colour
from headmovies.render.orbits.head_styles import OrbitLooks
from headmovies.render.orbits.history import OrbitHistory, SnapshotCheck
from headmovies.render.orbits.panel_choice import orbit_power, resolve_panels, signed
from headmovies.render.orbits.stream import RunInfo, collect, final_snapshot
from headmovies.runfile.reader import Run

NAMES = ("curves", "panels", "orbit_check", "orbit_power", "orbits_over_time", "orbit_progress")
PANELS_TRAIL = TRAIL_EPOCHS  # the panels still's trails (epochs), as the movie's default


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


# ---- curves ----

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


def curves_figure(metrics: dict[str, np.ndarray], title: str = "") -> Figure:
    """Loss and equivariance error (log y) and accuracy (%, linear) over epochs, each curve
    labelled with its final value. metrics: `Run.metrics()` ({'epoch': [K], name: [K]})."""
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
        ax.legend(fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10, color="#404040")
    return fig


# ---- orbit check picture ----


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


# ---- Fourier power per orbit ----


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


# ---- orbits over time ----


def orbits_over_time(h: OrbitHistory) -> tuple[np.ndarray, dict[int, np.ndarray], np.ndarray]:
    """(epochs [T], {orbit size: heads in verified orbits of that size [T]}, dead heads [T]) from
    the orbit check of every snapshot."""
    return h.epochs, h.counts_by_size(), h.dead.sum(1)


def orbits_over_time_figure(
    epochs: np.ndarray, counts: dict[int, np.ndarray], dead: np.ndarray, n_heads: int, tol: float, title: str = ""
) -> Figure:
    """Stacked heads in verified orbits by orbit size over epochs."""
    fig = Figure(figsize=(7.0, 3.2), layout="constrained")
    ax = fig.subplots()
    base = np.zeros(len(epochs))
    for i, (k, c) in enumerate(counts.items()):
        ax.fill_between(
            epochs, base, base + c, step="post", alpha=0.8, lw=0, color=orbit_colour(i), label=f"in orbits of size {k}"
        )
        base = base + c
    if dead.any():
        ax.fill_between(epochs, base, base + dead, step="post", color=DEAD_COLOUR, lw=0, label="dead")
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
    ax.set_title(title or f"heads in verified orbits (tolerance {tol:.0%}) at each snapshot", fontsize=10)
    return fig


# ---- orbit formation as a progress measure ----


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


# ---- panels at the final epoch ----


def trail_start(epochs: np.ndarray, trail_epochs: float) -> int:
    """Index of the first snapshot the final frame's trails need (epochs int [T])."""
    return max(0, int(np.searchsorted(epochs, epochs[-1] - trail_epochs, side="right")) - 1)


def panels_still(
    info: RunInfo,
    epochs: np.ndarray,
    coords: np.ndarray,
    panels: Sequence[Panel],
    report: OrbitReport,
    n: int,
    m: int,
    trail_epochs: float = TRAIL_EPOCHS,
    history: OrbitHistory | None = None,
) -> Figure:
    """The movie's last frame as a figure (same artists, colours and legend as the movie, no
    timeline), from the snapshots in the final trail window: epochs int [K] and coords complex
    [K, P, H] (`stream.collect`; earlier snapshots are ignored). With `history` (the orbit check
    of every snapshot) the legend dates each orbit ("verified since epoch E"); without it, the
    final snapshot's report alone says "verified at epoch E"."""
    first = trail_start(epochs, trail_epochs)
    states = list(
        frame_states(
            zip(epochs[first:], coords[first:]), trail_epochs=trail_epochs, caption=metrics_caption(info.metrics)
        )
    )
    complete = history is not None
    if history is None:
        history = OrbitHistory.of([int(epochs[-1])], [SnapshotCheck.of(report)], n, m, report.tol, report.dead_tol)
    looks = OrbitLooks(history, list(panels), states[-1].points, n, m, complete=complete)
    figure = PanelFigure(
        [p.title(n, m) for p in panels],
        looks.colours,
        looks.legend,
        header=header_text(info, n, m, report.n_heads, trail_epochs),
        blit=False,
        draw_order=looks.draw_order,
        trail_epochs=trail_epochs,
        notes=[p.note(n, m) for p in panels],
        axis_labels=AXIS_LABELS,
        outlines=looks.outlines,
        legend_cols=1,
    )
    states[-1].look = looks.look(len(history) - 1)
    figure.update(states[-1])
    return figure.fig


# ---- everything ----


def make_figures(
    run_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    panels: Sequence[str] | None = None,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
    formats: Sequence[str] = FIGURE_FORMATS,
    over_time: bool = True,
    progress: bool = True,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> list[Path]:
    """Write every figure of `run_path` into `out_dir` (created); returns the paths written.
    `panels`: as the movie's --panels (None: seed panels if the orbits live there, else auto).
    One pass over the snapshots (`stream.collect`): all of them with `over_time` (the orbit
    check of each), else only those of the final trail window."""
    paths: list[Path] = []
    with Run(run_path) as run:
        n, m = group_of(run)
        final = final_snapshot(run, tol, dead_tol)
        report, M, R = final.report, final.M, final.R
        assert report is not None and M is not None and R is not None  # group_of required all six weights
        chosen, note = resolve_panels(panels, report, M, R, n, m)
        out_dir = prepare_out_dir(out_dir)  # only now: bad input above leaves no folder behind
        log(f"{run.path}: {len(run)} snapshots; {note}: {' '.join(map(str, chosen))}")
        info = RunInfo.of(run)
        indices = None if over_time else np.arange(trail_start(info.epochs, PANELS_TRAIL), len(run))

        def bar(it):
            from tqdm import tqdm

            return tqdm(it, total=len(run), desc="orbit check per snapshot", unit="snapshot", dynamic_ncols=True)

        facts = collect(
            run,
            chosen,
            check=over_time,
            tol=tol,
            dead_tol=dead_tol,
            indices=indices,
            final=final,
            progress=bar if progress and over_time else None,
        )
        path = run.path
    name = f"{info.experiment} · {info.file}"
    paths.append(write_text(out_dir / "orbits.json", report.to_json() + "\n"))
    paths.append(write_text(out_dir / "orbits.txt", report.text() + "\n"))
    metrics = info.metrics
    if metrics.get("epoch") is not None and len(metrics["epoch"]):
        paths += save_figure(curves_figure(metrics, name), out_dir, "curves", formats)
    else:
        log(f"{path}: no metrics logged, no curves")
    history = facts.history
    if facts.coords is not None:  # chosen panels
        paths += save_figure(
            panels_still(info, facts.epochs, facts.coords, chosen, report, n, m, PANELS_TRAIL, history),
            out_dir,
            "panels",
            formats,
            dpi=100,
        )
    paths += save_figure(orbit_check_figure(report), out_dir, "orbit_check", formats)
    if report.orbits or report.unassigned:
        paths += save_figure(orbit_power_figure(report, M, R, chosen), out_dir, "orbit_power", formats)
    if history is not None:
        paths += save_figure(
            orbits_over_time_figure(*orbits_over_time(history), report.n_heads, tol),
            out_dir,
            "orbits_over_time",
            formats,
        )
        paths += save_figure(orbit_progress_figure(history), out_dir, "orbit_progress", formats)
    return paths

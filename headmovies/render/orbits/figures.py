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
    orbit_spectrum    each frequency group's orbit spectrum |mu_k| / sum |rho_h| over epochs
                  (0 on an exact orbit)

Each is written as PNG and SVG, under a temporary name renamed when complete, together with
the orbit report (orbits.json, orbits.txt). The final snapshot's figures are drawn in
`check_figures`, those over training in `history_figures`, the panels still here (from the
movie's `PanelFigure`); `make_figures` reads the run once and writes them all. Sources: source 000;
docs/math.md; docs/movie.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from headmovies.errors import plural
from headmovies.render.core.frame_states import TRAIL_EPOCHS, frame_states
from headmovies.render.core.outputs import FIGURE_FORMATS, prepare_out_dir, save_figure, write_text
from headmovies.render.core.panels import PanelFigure
from headmovies.render.core.projections import Panel
from headmovies.render.orbits.captions import AXIS_LABELS, header_text, metrics_caption
from headmovies.render.orbits.check import DEAD_TOL, TOL, OrbitReport
from headmovies.render.orbits.check_figures import orbit_check_figure, orbit_power_figure
from headmovies.render.orbits.check_run import group_of
from headmovies.render.orbits.events import phase_marks
from headmovies.render.orbits.head_styles import OrbitLooks
from headmovies.render.orbits.history import OrbitHistory, SnapshotCheck
from headmovies.render.orbits.history_figures import (
    curves_figure,
    orbit_progress_figure,
    orbit_spectrum_figure,
    orbits_over_time,
    orbits_over_time_figure,
)
from headmovies.render.orbits.panel_choice import resolve_panels
from headmovies.render.orbits.spectrum import panel_lines
from headmovies.render.orbits.stream import RunInfo, collect, final_snapshot
from headmovies.runfile.reader import Run

PANELS_TRAIL = TRAIL_EPOCHS  # the panels still's trails (epochs), as the movie's default


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
    states[-1].panel_text = panel_lines(report.groups, list(panels), n, m)
    figure.update(states[-1])
    return figure.fig


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
    `panels`: as the movie's --panels (None: source panels if the orbits live there, else auto).
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
        log(f"{run.path}: {plural(len(run), 'snapshot')}; {note}: {' '.join(map(str, chosen))}")
        info = RunInfo.of(run)
        indices = None if over_time else np.arange(trail_start(info.epochs, PANELS_TRAIL), len(run))

        def bar(it):
            from tqdm import tqdm

            return tqdm(
                it, total=len(run), desc="orbit check per snapshot", unit="snapshot", dynamic_ncols=True, disable=None
            )

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
        marks = phase_marks(info.config, metrics["epoch"])
        paths += save_figure(curves_figure(metrics, name, marks), out_dir, "curves", formats)
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
    if facts.groups is not None:
        paths += save_figure(orbit_spectrum_figure(facts.epochs, facts.groups), out_dir, "orbit_spectrum", formats)
    return paths

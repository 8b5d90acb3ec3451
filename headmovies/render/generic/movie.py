"""The movie of any run (`headmovies movie RUN --out DIR`; docs/recording.md, "Rendering"):
each frame one snapshot, each dot one head of any layer in the run's planes (`planes.py`:
irrep planes under a cyclic group, a user's basis, or principal axes fitted once), with its
trail and axes that rescale as the main movie's do (render/core/frame_states.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from headmovies.errors import plural
from headmovies.render.core.encode import EncodeResult, write_movie
from headmovies.render.core.frame_states import frame_states, trail_length
from headmovies.render.core.movie_options import FORMATS
from headmovies.render.core.panels import PanelFigure, head_colours
from headmovies.render.generic.heads import Heads, find_heads
from headmovies.render.generic.planes import Planes, planes_of
from headmovies.render.generic.score_space import ScoreMovie, score_view
from headmovies.runfile.reader import Run

MAX_LEGEND = 8  # heads named in the legend (more: one entry per layer, in its colours)


def legend_entries(heads: Heads, colours: np.ndarray) -> list[tuple[str, Any]]:
    """The legend: each head by name (up to MAX_LEGEND heads), else each layer ('layer 2 (16
    heads)') in the colour of its middle head, so that a run of any size has one."""
    if heads.total <= MAX_LEGEND:
        return [(label, colours[h]) for h, label in enumerate(heads.labels)]
    first = np.cumsum([0, *heads.n_heads])[:-1]
    return [(f"layer {layer} ({n} heads)", colours[first[layer] + n // 2]) for layer, n in enumerate(heads.n_heads)]


def metrics_caption(metrics: dict[str, np.ndarray]) -> Callable[[int], str]:
    """Per-epoch text: every logged metric at that epoch (accuracies in %; "" where none)."""
    index = {int(e): i for i, e in enumerate(metrics.get("epoch", []))}
    names = sorted(k for k in metrics if k != "epoch")

    def caption(epoch: int) -> str:
        i = index.get(int(epoch))
        parts = []
        if i is not None:
            for k in names:
                v = float(metrics[k][i])
                if np.isfinite(v):
                    parts.append(f"{k} {v:.1%}" if "acc" in k else f"{k} {v:.3g}")
        return "   ".join(parts)

    return caption


def header(run: Run, heads: Heads, planes: Planes) -> str:
    """Two lines: the run and its heads; how the planes were chosen."""
    attrs = run.attrs()
    what = attrs.get("adapter") or f"{run.experiment} run"
    group = f", tokens carry Z_{heads.group_order}" if heads.group_order else ""
    how = {
        "irrep": "irrep planes of the cyclic group (the frequencies with most power at the end)",
        "basis": "the user's basis",
        "pca": "principal axes fitted once on all snapshots",
    }[planes.kind]
    return f"{run.path.name}: {what}{group}\n{heads.total} heads drawn in {how}"


PLANE_WORDS = {"irrep": "irrep planes", "basis": "the planes of a basis", "pca": "principal-axis planes"}


class GenericMovie:
    """The movie's parts, built from an open run: heads, planes, figure and frames."""

    def __init__(
        self,
        run: Run,
        group_order: int | None = None,
        panels: list[str] | None = None,
        basis: dict[str, np.ndarray] | None = None,
        panel_px: int = 360,
        trail_epochs: float | None = None,
    ):
        self.run = run
        self.heads = find_heads(run, group_order)
        self.planes = planes_of(run, self.heads, panels, basis)
        self.trail_epochs = trail_length(run.epochs, trail_epochs)
        colours = head_colours(self.heads.n_heads)
        legend = legend_entries(self.heads, colours)
        self.figure_header = header(run, self.heads, self.planes)
        self.figure = PanelFigure(
            self.planes.titles,
            colours,
            legend,
            header=self.figure_header,
            panel_px=panel_px,
            trail_epochs=self.trail_epochs,
            notes=self.planes.notes,
            axis_labels=self.planes.axis_labels,
            legend_cols=4 if len(legend) > 3 else None,
        )
        self.caption = metrics_caption(run.metrics())

    def frames(self) -> Iterator[np.ndarray]:
        """RGBA uint8 frames, one per snapshot."""
        states = frame_states(
            zip(self.planes.epochs, self.planes.coords), trail_epochs=self.trail_epochs, caption=self.caption
        )
        for state in states:
            yield self.figure.render(state, rgba=True)


def render_movie(
    run_path: str | Path,
    out_dir: str | Path,
    *,
    basename: str = "movie",
    group_order: int | None = None,
    panels: list[str] | None = None,
    basis: dict[str, np.ndarray] | None = None,
    fps: float = 12.0,
    hold_s: float = 2.0,
    formats: tuple[str, ...] = FORMATS,
    trail_epochs: float | None = None,
    progress: bool = True,
    view: str | None = None,
) -> EncodeResult:
    """Render `run_path`'s movie into out_dir/basename.{mp4,webm,gif,png,html}: in score space
    (score_space.py) for a run with probe scores and no group, or with `view` 'scores'; else
    (or `view` 'axes') in the planes of planes.py. RunFileError for a run without attention
    weights; UserError for bad panels, basis or view; EncodeError when ffmpeg fails (nothing is
    left at a final path). `trail_epochs`: None for `frame_states.trail_length`'s rule."""
    with Run(run_path) as run:
        movie: GenericMovie | ScoreMovie
        trail = trail_length(run.epochs, trail_epochs)
        if score_view(run, view, group_order, panels, basis):
            movie = ScoreMovie(run, trail, caption=metrics_caption(run.metrics()))
            total, words = movie.total, ScoreMovie.words
        else:
            movie = GenericMovie(run, group_order, panels, basis, trail_epochs=trail)
            total, words = movie.heads.total, PLANE_WORDS[movie.planes.kind]
        print(f"{plural(len(run), 'snapshot')}, {plural(total, 'head')}, {words}", file=sys.stderr)
        try:
            return write_movie(
                movie.frames(),
                out_dir,
                basename,
                repeats=np.zeros(len(run.epochs), np.int64),  # no held events: the total for the bar
                fps=fps,
                hold_s=hold_s,
                formats=formats,
                caption=f"Heads of {run.path.name} ({total}) in {words}, "
                f"epochs {int(run.epochs[0]):,} to {int(run.epochs[-1]):,}",
                progress=progress,
            )
        finally:
            movie.figure.close()

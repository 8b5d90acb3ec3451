"""The movie in score space, for any run recorded with a probe (docs/recording.md, "Rendering"):
what each head does, not where its weights point.

One panel per layer; each head of the layer a dot at (previous-token score, induction score)
on the probe (run file /probe; TransformerLens's head detectors, train/head_scores.py), with its
trail (`render.core.frame_states`, the generic movie's trails) and its label L{layer}H{head}.
The axes are fixed once for the run (scores are fractions of attention: nothing rescales); a
dashed line marks 0.5, a perfect induction head's score on the repeated probe. Under the
panels, a strip of the loss (train_loss, else the first metric named *loss*, else the
in-context score) over the whole run with the frame's epoch marked; a legend of layer colours
(any number of heads: each dot carries its own label, and heads within LABEL_NEAR pixels of
each other share one, "L0H0,1,3", as the viewer's do). Every artist is made once and updated
per frame. The caption (top right) is the generic movie's: the metrics logged at the frame's
epoch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from headmovies.errors import UserError
from headmovies.render.core.frame_states import FrameState, frame_states
from headmovies.runfile.reader import Run

X_SCORE, Y_SCORE = "previous_token", "induction"
AXIS_WORDS = {X_SCORE: "previous-token score", Y_SCORE: "induction score"}
PER_ROW = 4  # panels per row
LAYER_MAPS = ("Blues", "Oranges", "Greens", "Reds", "Purples", "Greys")
LABEL_NEAR = 24  # px, two label heights: heads this close share one label (the viewer's scatter.js, LABEL_NEAR)


def label_groups(points: np.ndarray, near: float = LABEL_NEAR) -> list[list[int]]:
    """Indices of `points` [N, 2] (pixels) grouped for labelling: each point joins the first
    group whose first point lies within `near` px, else starts one; groups and members in order."""
    groups: list[list[int]] = []
    for i, p in enumerate(points):
        for g in groups:
            if np.hypot(*(points[g[0]] - p)) < near:
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


def join_labels(labels: list[str]) -> str:
    """["L0H0", "L0H2"] -> "L0H0,2" when the labels differ only in a trailing number, else
    joined by " · " (the viewer's joinLabels)."""
    pairs = [(m[1], m[2]) for m in (re.fullmatch(r"(.*?)(\d+)", s) for s in labels) if m is not None]
    if len(labels) > 1 and len(pairs) == len(labels) and all(prefix == pairs[0][0] for prefix, _ in pairs):
        return pairs[0][0] + ",".join(number for _, number in pairs)
    return " · ".join(labels)


def has_scores(run: Run) -> bool:
    """True when the run holds the probe's head scores (/probe)."""
    scores = run.head_scores()
    return X_SCORE in scores and Y_SCORE in scores


def score_coordinates(run: Run) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(epochs [T], coords complex [T, 1, N]: previous-token + i induction score of the N heads
    that exist (layer by layer), n_heads per layer). A layer's heads are those with finite scores."""
    scores = run.head_scores()
    x, y = scores[X_SCORE].astype(np.float64), scores[Y_SCORE].astype(np.float64)  # [T, L, H]
    alive = np.isfinite(x[0]) & np.isfinite(y[0])  # [L, H]: NaN pads layers with fewer heads
    n_heads = [int(alive[layer].sum()) for layer in range(alive.shape[0])]
    z = (np.nan_to_num(x) + 1j * np.nan_to_num(y))[:, alive]  # [T, N]
    return run.epochs.copy(), z[:, None, :], n_heads


def layer_colours(n_heads: list[int]) -> tuple[np.ndarray, list[tuple[float, float, float, float]]]:
    """(RGBA per head [N, 4], one RGBA per layer for the legend): a colour map per layer, its
    heads in shades of it; one layer: tab10/tab20 per head."""
    if len(n_heads) == 1:
        cmap = colormaps["tab10" if n_heads[0] <= 10 else "tab20"]
        return np.array([cmap(i % cmap.N) for i in range(n_heads[0])]), [cmap(0)]
    heads, layers = [], []
    for layer, n in enumerate(n_heads):
        cmap = colormaps[LAYER_MAPS[layer % len(LAYER_MAPS)]]
        heads += [cmap(0.45 + 0.5 * h / max(n - 1, 1)) for h in range(n)]
        layers.append(cmap(0.7))
    return np.array(heads), layers


def strip_metric(run: Run) -> tuple[str, np.ndarray, np.ndarray] | None:
    """(name, epochs [K], values [K]) of the strip: train_loss, else the first metric named
    *loss*, else the in-context score; finite values only; None when there is none."""
    metrics = run.metrics()
    names = [k for k in metrics if k != "epoch"]
    name = "train_loss" if "train_loss" in names else next((k for k in sorted(names) if "loss" in k), None)
    if name is not None:
        epochs, values = metrics["epoch"], metrics[name]
    else:
        ics = run.in_context_scores()
        if ics is None:
            return None
        name, epochs, values = "in-context score (nats)", run.epochs, ics.astype(np.float64)
    keep = np.isfinite(values)
    return (name, epochs[keep], values[keep]) if keep.sum() >= 1 else None


class ScoreFigure:
    """The score-space frame (module docstring), built once; `render(state)` gives one frame."""

    def __init__(
        self,
        n_heads: list[int],
        header: str,
        limits: tuple[float, float],
        strip: tuple[str, np.ndarray, np.ndarray] | None,
        panel_px: int = 300,
        dpi: int = 100,
    ):
        L = len(n_heads)
        cols, rows = min(L, PER_ROW), -(-L // PER_ROW)
        pad, top, strip_h, legend_h = 56, 78, 120 if strip else 0, 34
        width = cols * panel_px + (cols + 1) * pad
        height = top + rows * (panel_px + pad + 20) + strip_h + legend_h
        width, height = width + width % 2, height + height % 2  # even: H.264
        self.size = (width, height)
        self.fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi, facecolor="white")
        self.canvas = FigureCanvasAgg(self.fig)
        self.colours, legend = layer_colours(n_heads)
        self.first = np.cumsum([0, *n_heads])[:-1]
        self.n_heads = n_heads
        self.px_per_unit = np.array([panel_px / (limits[0] + 0.02), panel_px / (limits[1] + 0.02)])
        head = self.fig.text(pad / width, 1 - 12 / height, header, ha="left", va="top", fontsize=10, color="#606060")
        wide = head.get_window_extent(self.canvas.get_renderer()).width
        if wide > width - 2 * pad:  # shrink a long header to fit
            head.set_fontsize(10 * (width - 2 * pad) / wide)
        self.caption_text = self.fig.text(
            1 - pad / width, 1 - 48 / height, "", ha="right", va="top", fontsize=10, color="#404040"
        )
        self.epoch_text = self.fig.text(
            pad / width, 1 - 44 / height, "", ha="left", va="top", fontsize=15, weight="bold"
        )
        self.dots, self.trails, self.labels = [], [], []
        for layer, n in enumerate(n_heads):
            r, c = divmod(layer, PER_ROW)
            x0 = pad + c * (panel_px + pad)
            y0 = height - top - (r + 1) * (panel_px + pad + 20) + pad
            ax = self.fig.add_axes((x0 / width, y0 / height, panel_px / width, panel_px / height))
            ax.set_xlim(-0.02, limits[0])
            ax.set_ylim(-0.02, limits[1])
            ax.set_title(f"layer {layer} ({n} heads)", fontsize=11)
            ax.set_xlabel(AXIS_WORDS[X_SCORE], fontsize=9, color="#606060")
            ax.set_ylabel(AXIS_WORDS[Y_SCORE], fontsize=9, color="#606060")
            ax.tick_params(labelsize=8, colors="#606060")
            ax.axhline(0.5, color="#b0b0b0", lw=0.8, ls="--", zorder=0)
            ax.text(limits[0], 0.5, "perfect induction ", ha="right", va="bottom", fontsize=7, color="#909090")
            heads = range(self.first[layer], self.first[layer] + n)
            self.trails.append([ax.plot([], [], color=self.colours[h], lw=1.3, alpha=0.6)[0] for h in heads])
            self.dots.append(
                ax.scatter(np.zeros(n), np.zeros(n), s=36, c=self.colours[list(heads)], edgecolors="white", zorder=3)
            )
            self.labels.append(
                [ax.text(0, 0, f"L{layer}H{h - self.first[layer]}", fontsize=7, zorder=4) for h in heads]
            )
        self.marker = None
        if strip is not None:
            name, ep, values = strip
            ax = self.fig.add_axes(
                (pad / width, (legend_h + 28) / height, (width - 2 * pad) / width, (strip_h - 40) / height)
            )
            ax.plot(ep, values, color="#404040", lw=1.2)
            if values.min() > 0 and values.max() > 10 * values.min():
                ax.set_yscale("log")
            ax.set_ylabel(name, fontsize=8, color="#606060")
            ax.tick_params(labelsize=7, colors="#606060")
            span = max(ep.max() - ep.min(), 1)
            ax.set_xlim(ep.min(), ep.min() + 1.01 * span)  # room for the marker at the last epoch
            self.marker = ax.axvline(ep.min(), color="#d62728", lw=1.2)
        for layer, colour in enumerate(legend):
            x = (pad + layer * 130) / width
            self.fig.text(x, 12 / height, "●", color=colour, fontsize=12, va="bottom")
            words = f"layer {layer}" if L > 1 else "heads of layer 0 (a colour each)"
            self.fig.text(x + 16 / width, 14 / height, words, fontsize=9, va="bottom")

    def render(self, state: FrameState, rgba: bool = True) -> np.ndarray:
        """RGBA uint8 [height, width, 4] of the frame showing `state` (coords [1, N] complex)."""
        z, trail = state.points[0], state.trail[:, 0]  # [N], [K, N]
        self.epoch_text.set_text(f"epoch {state.epoch:,}")
        self.caption_text.set_text(state.caption)
        for layer, n in enumerate(self.n_heads):
            heads = np.arange(self.first[layer], self.first[layer] + n)
            self.dots[layer].set_offsets(np.c_[z[heads].real, z[heads].imag])
            for line, h in zip(self.trails[layer], heads, strict=True):
                line.set_data(trail[:, h].real, trail[:, h].imag)
            px = np.c_[z[heads].real, z[heads].imag] * self.px_per_unit
            for label in self.labels[layer]:
                label.set_visible(False)
            for g in label_groups(px):
                label, h = self.labels[layer][g[0]], heads[g[0]]
                label.set_text(join_labels([f"L{layer}H{i}" for i in g]))
                label.set_position((z[h].real + 0.01, z[h].imag + 0.01))
                label.set_visible(True)
        if self.marker is not None:
            self.marker.set_xdata([state.epoch, state.epoch])
        self.canvas.draw()
        return np.asarray(self.canvas.buffer_rgba()).copy()

    def close(self) -> None:
        self.fig.clear()


class ScoreMovie:
    """The movie's parts for a run with probe scores: coordinates, figure and frames."""

    words = "score space"

    def __init__(self, run: Run, trail_epochs: float, panel_px: int = 300, caption: Callable[[int], str] | None = None):
        self.epochs, self.coords, n_heads = score_coordinates(run)
        self.total = sum(n_heads)
        self.trail_epochs, self.caption = trail_epochs, caption
        top = (float(self.coords.real.max()), float(self.coords.imag.max()))
        limits = (max(0.5, 1.08 * top[0]), max(0.6, 1.08 * top[1]))
        attrs = run.attrs()
        what = attrs.get("adapter") or f"{run.experiment} run"
        header = f"{run.path.name}: {what}; each head at its probe scores (TransformerLens's head detectors)"
        self.figure = ScoreFigure(n_heads, header, limits, strip_metric(run), panel_px)

    def frames(self) -> Iterator[np.ndarray]:
        """RGBA uint8 frames, one per snapshot."""
        states = frame_states(zip(self.epochs, self.coords), trail_epochs=self.trail_epochs, caption=self.caption)
        for state in states:
            yield self.figure.render(state)


VIEWS = ("scores", "axes")  # `headmovies movie --view`: score space, or the planes of planes.py


def score_view(run: Run, view: str | None, group_order: int | None, panels: list[str] | None, basis: object) -> bool:
    """Whether the movie is drawn in score space: `view` 'scores' (UserError without probe
    scores), 'axes' (never), None (when the run has scores and no group, panels or basis is
    asked for, from the call or the run's `group_order`)."""
    if view not in (None, *VIEWS):
        raise UserError(f"--view must be one of {', '.join(VIEWS)}, got {view!r}")
    if view == "axes":
        return False
    if view == "scores":
        if not has_scores(run):
            raise UserError(f"{run.path} holds no probe scores (recorded without a probe): use --view axes")
        return True
    grouped = group_order is not None or "group_order" in run.attrs() or run.n is not None
    return has_scores(run) and not grouped and not panels and basis is None

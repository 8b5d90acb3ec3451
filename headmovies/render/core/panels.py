"""Trailing-dot panels on rescaling axes: the frames of the orbit movie (source 000; docs/movie.md).

Each panel is one irrep plane (circuit, u, v); each head is a dot at (Re X^, Im X^) trailing
its last `trail_epochs` epochs, fading with age. Axes are square, symmetric about the origin
(a thin cross marks it), and rescale every frame to the largest radius in view, trails
included (`render.core.frame_states`: the `FrameState` of each frame, its points, trail and
axis limits).

`PanelFigure` creates the figure and every artist once. Per frame it updates offsets, trail
segments (`render.core.trails`), limits and texts and, as the axes carry no ticks, restores a
cached background and redraws only the moving artists (blitting), then returns the RGB pixels
of the canvas buffer. `blit=False` draws the same artists the ordinary way (for comparison).
A frame's `Look` (optional) restyles the heads (colour, outline, size), switches polygon
outlines on or off and rewrites the legend: the orbit movie shows each orbit only from the
snapshot at which it is verified. An optional timeline strip (`render.core.timeline`) sits
under the panels. `head_colours` is every family's rule for one colour per head.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_rgba, to_rgba_array
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text

from headmovies.render.core.frame_layout import MIN_PANEL_PX, frame_layout, grid_shape
from headmovies.render.core.frame_states import TRAIL_EPOCHS, FrameState, Look
from headmovies.render.core.text_cache import CachedTextCanvas
from headmovies.render.core.timeline import Epochs, Timeline, strip_px
from headmovies.render.core.timeline_strip import TimelineStrip
from headmovies.render.core.trails import TrailCollection

if TYPE_CHECKING:
    from matplotlib.typing import ColorType

CORNER = 0.015  # the bottom corners' texts (axes span, panel lines) this far in, in axes fractions
__all__ = ["MIN_PANEL_PX", "PanelFigure", "grid_shape", "head_colours"]


def head_colours(n_heads: Sequence[int]) -> np.ndarray:
    """RGBA [sum(n_heads), 4], one colour per head, layer by layer (`n_heads`: heads per layer):
    tab10 by head within one layer (tab20 past 10 heads); shades of one colour map per layer
    with several layers."""
    if len(n_heads) == 1:
        cmap = colormaps["tab10" if n_heads[0] <= 10 else "tab20"]
        return np.array([cmap(i % cmap.N) for i in range(n_heads[0])])
    maps = ["Blues", "Oranges", "Greens", "Reds", "Purples", "Greys"]
    out = []
    for layer, n in enumerate(n_heads):
        cmap = colormaps[maps[layer % len(maps)]]
        out += [cmap(0.45 + 0.5 * h / max(n - 1, 1)) for h in range(n)]
    return np.array(out)


class PanelFigure:
    """The figure of a trailing-dot movie, built once; `render(state)` gives one frame.

    titles:      one title per panel (P)
    colours:     per head, anything matplotlib takes as a colour list (H)
    legend:      [(label, colour)] shown under the panels (may be empty); a frame's `Look`
                 may rewrite each entry (label and marker), never add one
    header:      a static line at the top (run, experiment); a second static line may follow
                 after a newline
    panel_px:    side of each square panel in pixels; the frame size is fixed by the layout
                 and always even (`self.size` = (width, height))
    draw_order:  head indices in drawing order (later ones on top); default 0..H-1
    blit:        True redraws only the moving artists over a cached background; False draws
                 the whole figure each frame (the ordinary way, e.g. for FuncAnimation)
    notes:       per panel, a smaller line under its title (what a shift does there)
    axis_labels: (x, y) labels of every panel's axes, e.g. ("real part", "imaginary part")
    outlines:    outline groups [(panel, heads, colour)]: a closed line through the heads'
                 dots in angular order (an orbit's regular polygon), drawn when a frame's
                 `Look.outlines[g]` is on
    timeline:    a `Timeline` drawn as a strip under the panels (`snapshot_epochs`: the
                 movie's snapshots, for the event banner)
    legend_cols: columns of the legend (default: 1 for up to 3 entries, else 2; 2 in the wide layout)
    layout:      'tall' (panels, strip, legend stacked) or 'wide' (the strip in a column right of
                 the panels; `render.core.frame_layout`)
    """

    def __init__(
        self,
        titles: Sequence[str],
        colours,
        legend: Sequence[tuple[str, ColorType]] = (),
        header: str = "",
        panel_px: int = 480,
        dpi: int = 100,
        blit: bool = True,
        draw_order: Sequence[int] | None = None,
        trail_epochs: float = TRAIL_EPOCHS,
        notes: Sequence[str] = (),
        axis_labels: tuple[str, str] | None = None,
        outlines: Sequence[tuple[int, Sequence[int], ColorType]] = (),
        timeline: Timeline | None = None,
        snapshot_epochs: Epochs = (),
        legend_cols: int | None = None,
        layout: str = "tall",
    ):
        self.blit = blit
        self.trail_epochs = float(trail_epochs)
        self.colours = to_rgba_array(colours)  # [H, 4]
        n_heads = len(self.colours)
        self.order = np.arange(n_heads) if draw_order is None else np.asarray(draw_order)
        if sorted(self.order.tolist()) != list(range(n_heads)):
            raise ValueError("draw_order must be a permutation of the heads")
        self.layout = lay = frame_layout(
            layout,
            len(titles),
            panel_px,
            header_lines=header.count("\n") + 1 if header else 1,
            note_lines=max((n.count("\n") + 1 for n in notes), default=0),
            axis_labels=axis_labels is not None,
            legend_entries=len(legend),
            legend_cols=legend_cols,
            strip_px=strip_px(timeline) if timeline is not None else None,
            legend_chars=max((len(label) for label, _ in legend), default=0),
        )
        fs = self.fs = lay.fs
        pad, header_lines, note_lines = lay.pad, lay.header_lines, max((n.count("\n") + 1 for n in notes), default=0)
        width, height = self.size = lay.size
        self.fig = Figure(figsize=(width / dpi, height / dpi), dpi=dpi, facecolor="white")
        self.canvas = CachedTextCanvas(self.fig)  # same pixels as FigureCanvasAgg, text drawn faster
        if self.canvas.get_width_height() != (width, height):
            raise RuntimeError(f"figure is {self.canvas.get_width_height()} px, expected {(width, height)}")

        anim: dict[str, Any] = dict(animated=blit)
        self.axes, self.scatters, self.trails, self.scales = [], [], [], []
        self.panel_texts: list[Text] = []
        for i, title in enumerate(titles):
            x0, y0 = lay.panels[i]
            ax = self.fig.add_axes((x0 / width, y0 / height, panel_px / width, panel_px / height))
            ax.set_xlim(-1, 1)
            ax.set_ylim(-1, 1)
            ax.set_box_aspect(1)  # square box + equal x/y limits = equal aspect
            ax.set_xticks([])
            ax.set_yticks([])
            for spine in ax.spines.values():
                spine.set_color("#b0b0b0")
            ax.axhline(0, color="#c8c8c8", lw=0.6, zorder=0)  # thin cross at origin
            ax.axvline(0, color="#c8c8c8", lw=0.6, zorder=0)
            if notes:
                ax.text(
                    0.5,
                    1 + (10 + 15 * note_lines) * fs / panel_px,
                    title,
                    transform=ax.transAxes,
                    ha="center",
                    va="bottom",
                    fontsize=11 * fs,
                )
                ax.text(
                    0.5,
                    1 + 6 * fs / panel_px,
                    notes[i],
                    transform=ax.transAxes,
                    ha="center",
                    va="bottom",
                    fontsize=9 * fs,
                    color="#505050",
                    linespacing=1.25,
                )
            else:
                ax.set_title(title, fontsize=11 * fs, pad=7 * fs)
            if axis_labels:
                ax.set_xlabel(axis_labels[0], fontsize=8.5 * fs, color="#606060", labelpad=3 * fs)
                ax.set_ylabel(axis_labels[1], fontsize=8.5 * fs, color="#606060", labelpad=3 * fs)
            lc = TrailCollection(self.colours[self.order], linewidths=1.4 * fs, capstyle="butt", zorder=2, **anim)
            ax.add_collection(lc)
            sc = ax.scatter(
                np.zeros(n_heads),
                np.zeros(n_heads),
                s=30 * fs,
                c=self.colours[self.order],
                edgecolors="white",
                linewidths=0.5 * fs,
                zorder=3,
                **anim,
            )
            tx = ax.text(
                1 - CORNER,
                CORNER,
                "",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=8 * fs,
                color="#808080",
                zorder=4,
                **anim,
            )
            lines = ax.text(
                CORNER,
                CORNER,
                "",
                transform=ax.transAxes,
                ha="left",
                va="bottom",
                fontsize=8 * fs,
                color="#606060",
                linespacing=1.3,
                zorder=2.8,  # over trails and outlines, under the dots: its box never fades a head
                bbox=dict(facecolor="white", alpha=0.7, edgecolor="none", pad=1.5 * fs),
                **anim,
            )
            self.axes.append(ax)
            self.trails.append(lc)
            self.scatters.append(sc)
            self.scales.append(tx)
            self.panel_texts.append(lines)
        self.outline_groups = [(int(p), np.asarray(h, int)) for p, h, _ in outlines]
        self.outline_lines = []
        for p, _heads, colour in outlines:
            line = Line2D([], [], color=colour, lw=1.3 * fs, alpha=0.75, zorder=2.5, visible=False, **anim)
            self.axes[p].add_line(line)
            self.outline_lines.append(line)
        if header:
            head = self.fig.text(
                pad / width,
                1 - 12 * fs / height,
                header,
                ha="left",
                va="top",
                fontsize=10 * fs,
                color="#606060",
                linespacing=1.35,
            )
            wide = head.get_window_extent(self.canvas.get_renderer()).width
            if wide > width - 2 * pad:  # shrink a long header to fit
                head.set_fontsize(10 * fs * (width - 2 * pad) / wide)
        top_row = 1 - (16 * header_lines + 20) * fs / height
        self.epoch_text = self.fig.text(
            pad / width, top_row, "", ha="left", va="top", fontsize=15 * fs, weight="bold", **anim
        )
        self.caption_text = self.fig.text(
            1 - pad / width,
            top_row - 4 * fs / height,
            "",
            ha="right",
            va="top",
            fontsize=10 * fs,
            color="#404040",
            **anim,
        )
        self.strip = None
        if timeline is not None and lay.strip is not None:
            self.strip = TimelineStrip(
                self.fig,
                lay.strip,
                timeline,
                snapshot_epochs,
                animated=blit,
                fontsize=9 * fs,
            )
        # the legend: fixed slots (a marker and a text each), rewritten by a frame's Look
        self.legend_markers, self.legend_texts = [], []
        legend_cols = lay.legend_cols
        slot_w = lay.legend_w / legend_cols
        for j, (label, col) in enumerate(legend):
            row, c = j // legend_cols, j % legend_cols
            x = lay.legend_x + c * slot_w
            y = lay.legend_top - (14 + 22 * row) * fs
            mk = Line2D(
                [(x + 8 * fs) / width],
                [y / height],
                transform=self.fig.transFigure,
                ls="",
                marker="o",
                ms=7 * fs,
                mfc=col,
                mec="white",
                **anim,
            )
            self.fig.add_artist(mk)
            tx = self.fig.text(
                (x + 20 * fs) / width, y / height, label, ha="left", va="center", fontsize=10 * fs, **anim
            )
            self.legend_markers.append(mk)
            self.legend_texts.append(tx)
        self._background: Any = None  # the canvas regions saved for blitting (BufferRegion)
        self._static: Any = None
        self._background_key: tuple | None = None
        self._drawn_once = blit
        if blit:
            self.canvas.draw()  # static parts only
            self._static = self.canvas.copy_from_bbox(self.fig.bbox)

    def apply_look(self, look: Look) -> None:
        """Restyle heads, outlines and legend from `look` (see `Look`)."""
        order = self.order
        for sc, tr in zip(self.scatters, self.trails):
            # matplotlib's stubs leave out per-item arrays (RGBA [H, 4], widths [H])
            sc.set_facecolor(look.face[order])  # type: ignore[arg-type]
            sc.set_edgecolor(look.edge[order])  # type: ignore[arg-type]
            sc.set_sizes(look.size[order] * self.fs)
            sc.set_linewidth(look.linewidth[order] * self.fs)  # type: ignore[arg-type]
            tr.set_colours(look.trail[order])
        for line, on in zip(self.outline_lines, look.outlines):
            line.set_visible(bool(on))
        for mk, tx, (label, face, edge, size) in zip(self.legend_markers, self.legend_texts, look.legend):
            tx.set_text(label)
            mk.set_markerfacecolor(face)
            mk.set_markeredgecolor(edge)
            mk.set_markersize(math.sqrt(size * self.fs) * 1.1)

    def update(self, state: FrameState) -> list:
        """Set every moving artist from `state`; returns them (FuncAnimation's update contract)."""
        order = self.order
        if state.look is not None:
            self.apply_look(state.look)
        fade = np.clip(1.0 - state.trail_age / max(self.trail_epochs, 1e-9), 0.0, 1.0)  # [K]
        seg_alpha = 0.9 * 0.5 * (fade[:-1] + fade[1:])  # [K-1]
        for p, ax in enumerate(self.axes):
            lim = float(state.limits[p])
            ax.set_xlim(-lim, lim)
            ax.set_ylim(-lim, lim)
            pts = state.points[p, order]
            self.scatters[p].set_offsets(np.column_stack([pts.real, pts.imag]))
            tr = state.trail[:, p, order]  # [K, H]
            self.trails[p].set_trail(np.stack([tr.real, tr.imag], -1), seg_alpha)  # [K, H, 2]
            self.scales[p].set_text(f"axes span ±{lim:.3g}")
            self.panel_texts[p].set_text(state.panel_text[p] if state.panel_text else "")
            self._clear_of_scale(p)
        for (p, heads), line in zip(self.outline_groups, self.outline_lines):
            if line.get_visible():
                z = state.points[p, heads]
                z = z[np.argsort(np.angle(z), kind="stable")]
                z = np.append(z, z[:1])  # closed
                line.set_data(z.real, z.imag)
        self.epoch_text.set_text(f"epoch {state.epoch:,}")
        self.caption_text.set_text(state.caption)
        fast = [
            *self.trails,
            *self.outline_lines,
            *self.panel_texts,  # drawn in this order when blitting, as zorder orders a full draw
            *self.scatters,
            *self.scales,
            self.epoch_text,
            self.caption_text,
        ]
        slow = [*self.legend_markers, *self.legend_texts]
        if self.strip is not None:
            self.strip.update(state.epoch)
            fast += self.strip.fast
            slow += self.strip.slow
        self._fast, self._slow = fast, slow
        return fast + slow

    def _slow_key(self) -> tuple:
        """What the slowly changing artists (legend, event labels, banner) show now."""
        key: list[tuple] = []
        for a in self._slow:
            if isinstance(a, Line2D):
                key.append(
                    (
                        to_rgba(a.get_markerfacecolor()),
                        to_rgba(a.get_markeredgecolor()),
                        a.get_markersize(),
                        a.get_alpha(),
                        a.get_visible(),
                    )
                )
            elif isinstance(a, Text):
                key.append((a.get_text(), a.get_alpha(), to_rgba(a.get_color()), a.get_visible()))
            else:
                raise TypeError(f"a slowly changing artist is a marker, a line or a text, got {a!r}")
        return tuple(key)

    def render(self, state: FrameState, rgba: bool = False, copy: bool = True) -> np.ndarray:
        """The frame as uint8 RGB [height, width, 3] (a copy of the canvas buffer); with
        `rgba`, [height, width, 4] (a plain memory copy, ~5x cheaper than dropping alpha, which
        the encoder does for free); with `rgba` and not `copy`, the canvas buffer itself (valid
        until the next frame is drawn).

        Blitting: text is the costly part of a frame (~8 ms per line), so the artists that
        change only at a few frames (legend, event labels and banner) are drawn into the cached
        background, which is redrawn when they change; the rest is drawn over it each frame."""
        self.update(state)
        if self.blit:
            key = self._slow_key()
            if key != self._background_key:
                self.canvas.restore_region(self._static)
                for a in self._slow:
                    (a.axes or self.fig).draw_artist(a)
                self._background = self.canvas.copy_from_bbox(self.fig.bbox)
                self._background_key = key
            self.canvas.restore_region(self._background)
            for a in self._fast:
                (a.axes or self.fig).draw_artist(a)
        else:
            self.canvas.draw()
        buf = np.asarray(self.canvas.buffer_rgba())
        return (buf.copy() if copy else buf) if rgba else np.array(buf[..., :3])

    def _clear_of_scale(self, p: int) -> None:
        """Panel p's bottom-left lines at the bottom, or lifted by the axes span's height where
        their last line would reach the axes span at the bottom right (a long line, e.g. a
        spectrum at k <= 3 and k >= 4, next to a long span such as '±0.000912')."""
        lines, scale = self.panel_texts[p], self.scales[p]
        lines.set_y(CORNER)
        if not lines.get_text():
            return
        r = self.canvas.get_renderer()
        pad = 1.5 * self.fs * self.fig.dpi / 72  # the lines' box pad, in pixels
        span = scale.get_window_extent(r)
        if lines.get_window_extent(r).x1 + 2 * pad > span.x0:
            lines.set_y(CORNER + (span.height + 2 * pad) / self.axes[p].bbox.height)

    def smallest_text_px(self) -> float:
        """The height in pixels (font size at this dpi) of the smallest text the frame shows:
        tick labels, notes, the strip's labels, each panel's axes span and bottom-left lines
        (counted before any frame has set them; the figure is drawn once if it was not)."""
        if not self._drawn_once:
            self.canvas.draw()
            self._drawn_once = True
        per_frame = {id(t) for t in [*self.legend_texts, self.caption_text, *self.scales, *self.panel_texts]}
        sizes = [
            float(t.get_fontsize())
            for t in self.fig.findobj(Text)
            if t.get_visible() and (t.get_text() or id(t) in per_frame)
        ]
        return float(min(sizes)) * self.fig.dpi / 72

    def close(self) -> None:
        self.fig.clear()

"""The timeline strip's artists (docs/movie.md, "Timeline"): `TimelineStrip` draws a `Timeline`
(`render.core.timeline`) in a box of a figure once; `update(epoch)` moves the cursor, the veil
and the event banner and returns those artists (for blitting)."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator
from matplotlib.transforms import blended_transform_factory

from headmovies.render.core.timeline import (
    BANNER_FRAMES,
    FUTURE_ALPHA,
    Epochs,
    Timeline,
    event_snapshots,
    split_axes,
)


def _fmt_epoch(x: float, pos=None) -> str:
    """Tick labels '0', '2,000', ...; the first one says the unit: 'epoch 0'."""
    return f"epoch {x:,.0f}" if pos == 0 else f"{x:,.0f}"


class TimelineStrip:
    """The strip's artists in `fig` (created once), in the pixel box (x0, y0, width, height)
    of the figure (origin bottom left), `height` about STRIP_PX. From the top: a banner line
    (the current event's sentence), up to three rows of event labels (placed so that they do
    not overlap), the axes (the curves, event marks, cursor) with epoch ticks below.

    snapshot_epochs [T]: the movie's snapshots; an event's sentence shows from the snapshot of
    the event for `banner_frames` snapshots. animated: the moving artists are animated (the
    figure blits them over a cached background).
    """

    def __init__(
        self,
        fig,
        box: tuple[float, float, float, float],
        timeline: Timeline,
        snapshot_epochs: Epochs = (),
        animated: bool = True,
        banner_frames: int = BANNER_FRAMES,
        fontsize: float = 9.0,
    ):
        self.timeline = tl = timeline
        W, H = fig.bbox.width, fig.bbox.height
        x0, y0, w, h = box
        k = fontsize / 9.0  # pixel margins follow the text size
        label_px, ticks_px = 16 * k, 22 * k
        # the banner wraps to the strip's width (a narrow strip: up to three lines)
        self.banner_chars = max(30, int(w / ((fontsize + 1.5) * 100 / 72 * 0.62)))
        banner_px = 22 * k * (1 if w >= 900 else 3)
        axes_h = max(24.0 * k, h - banner_px - 3 * label_px - ticks_px)
        if split_axes(tl):  # the left curves above, the right ones below, a gap between
            gap = 12 * k
            low_h = 0.45 * (axes_h - gap)
            self.low: Any = fig.add_axes((x0 / W, (y0 + ticks_px) / H, w / W, low_h / H))
            top_y, top_h = y0 + ticks_px + low_h + gap, axes_h - low_h - gap
            self.ax = ax = fig.add_axes((x0 / W, top_y / H, w / W, top_h / H), sharex=self.low)
            ax.tick_params(axis="x", labelbottom=False)
            self.axes = [ax, self.low]
        else:
            self.low = None
            self.ax = ax = fig.add_axes((x0 / W, (y0 + ticks_px) / H, w / W, axes_h / H))
            self.axes = [ax]
        ax.set_xlim(tl.start, tl.end)
        for a in self.axes:
            a.xaxis.set_major_locator(
                MaxNLocator(nbins=max(3, min(10, int(w / 85))), steps=[1, 2, 2.5, 5, 10], integer=True)
            )
            a.xaxis.set_major_formatter(FuncFormatter(_fmt_epoch))
            a.tick_params(labelsize=fontsize - 1, length=3, color="#909090", labelcolor="#505050")
            for side in ("top", "right"):
                a.spines[side].set_visible(False)
            for side in ("left", "bottom"):
                a.spines[side].set_color("#b0b0b0")
        self._draw_curves(ax, tl, fontsize, self.low)
        self.steps = bool(tl.curves) and all(c.step for c in tl.curves if c.axis != "right") and self.low is not None
        # event marks and their labels, in rows that do not overlap
        bt = blended_transform_factory(ax.transData, ax.transAxes)
        renderer = fig.canvas.get_renderer()
        placed: list[tuple[int, float, float, float]] = []  # (row, left, right, leader x) in pixels
        px_per_epoch = w / (tl.end - tl.start)
        self.labels = []
        self.leaders = []
        for e in tl.events:
            for a in self.axes:
                a.axvline(
                    e.epoch,
                    color=e.colour,
                    lw=1.2 if not e.phase else 1.0,
                    ls="--" if e.phase else "-",
                    alpha=0.9,
                    zorder=6.5 if e.phase else 3,  # planned changes show through the veil, results not
                )
            x = x0 + (e.epoch - tl.start) * px_per_epoch
            t = fig.text(
                0,
                0,
                e.label,
                fontsize=fontsize - 0.5,
                color=e.colour,
                va="bottom",
                weight="normal" if e.phase else "bold",
                animated=animated,
                zorder=4,
                bbox=dict(boxstyle="square,pad=0.05", facecolor="white", edgecolor="none"),
            )
            # (the white box: a leader that cannot avoid a lower label, in small frames, passes behind it)
            tw = t.get_window_extent(renderer).width
            left = x - 2 if x + tw + 2 <= x0 + w + 40 * k else x - tw + 2  # flip left near the right edge
            row = next(
                (
                    r
                    for strict in (True, False)
                    for r in range(3)  # else: only no overlap
                    if self._free(placed, r, left, left + tw, x, 6 * k, strict)
                ),
                2,
            )
            placed.append((row, left, left + tw, x))
            ly = y0 + ticks_px + axes_h + 2 * k + row * label_px
            t.set_position((left / W, ly / H))
            self.labels.append(t)
            # a thin leader from the axes top to the label row
            leader = Line2D(
                [x / W, x / W],
                [(y0 + ticks_px + axes_h) / H, (ly + 2) / H],
                color=e.colour,
                lw=0.6,
                alpha=0.6,
                ls="--" if e.phase else "-",
                animated=animated,
            )
            fig.add_artist(leader)
            self.leaders.append(leader)
        anim: dict[str, Any] = dict(animated=animated)
        top = y0 + ticks_px + axes_h + 3 * label_px + 2 * k
        # the veil hides everything after the cursor in the axes (curves, results' marks): a frame
        # shows nothing that happens after its epoch; planned changes (phases, the schedule)
        # stay, their labels pale
        self.veils, self.cursors = [], []
        for a in self.axes:
            bt = blended_transform_factory(a.transData, a.transAxes)
            veil = Rectangle(
                (tl.end, 0.0),
                0.0,
                1.0,
                transform=bt,
                facecolor="white",
                edgecolor="none",
                alpha=1.0,
                clip_on=False,
                zorder=6,
                **anim,
            )
            a.add_patch(veil)
            cursor = Line2D(
                [tl.start, tl.start],
                [0.0, 1.0],
                transform=bt,
                color="#202020",
                lw=max(1.5, 1.6 * k),
                clip_on=False,
                zorder=7,
                **anim,
            )
            a.add_line(cursor)
            self.veils.append(veil)
            self.cursors.append(cursor)
        self.veil, self.cursor = self.veils[0], self.cursors[0]
        self.banner = fig.text(
            x0 / W,
            (top + 4 * k) / H,
            "",
            fontsize=fontsize + 1.5,
            va="bottom",
            ha="left",
            weight="bold",
            color="#202020",
            **anim,
        )
        self.fast = [*self.veils, *self.cursors]  # change every frame
        self.slow = [self.banner, *self.labels, *self.leaders]  # change at a few frames (events)
        self.epochs = np.asarray(snapshot_epochs, np.int64)
        self._banner_from = []  # (first snapshot, last snapshot, event)
        for e, i in zip(tl.events, event_snapshots(self.epochs, tl.events)):
            if i is not None:
                self._banner_from.append((i, i + banner_frames - 1, e))

    @staticmethod
    def _free(placed, row: int, left: float, right: float, x: float, gap: float, strict: bool = True) -> bool:
        """Whether a label [left, right] in `row` with its leader at x (rising from the axes) keeps
        clear of the placed labels: no overlap in its row, and (`strict`) its leader through no
        lower label and no higher label's leader through it."""
        for r, l0, r0, x0 in placed:
            if r == row and left < r0 + gap and l0 < right + gap:
                return False
            if not strict:
                continue
            if r < row and l0 - 2 <= x <= r0 + 2:
                return False
            if r > row and left - 2 <= x0 <= right + 2:
                return False
        return True

    @staticmethod
    def _draw_curves(ax, tl: Timeline, fontsize: float, low=None) -> None:
        """The left curves in `ax`; the right ones in `low` (split axes) or else in a twin of
        `ax` with its scale on the right."""
        right = [c for c in tl.curves if c.axis == "right"]
        left = [c for c in tl.curves if c.axis != "right"]
        base = None
        for c in left:
            x, y = np.asarray(c.epochs, float), np.asarray(c.values, float)
            lo = base if (c.stack and base is not None and len(base) == len(y)) else np.zeros_like(y)
            if c.fill:
                ax.fill_between(
                    x, lo, lo + y, step="post" if c.step else None, color=c.colour, alpha=0.75, lw=0, label=c.label
                )
            else:
                ax.plot(
                    x, lo + y, color=c.colour, lw=1.3, drawstyle="steps-post" if c.step else "default", label=c.label
                )
            base = lo + y if c.stack else base
        if tl.left_lim:
            ax.set_ylim(*tl.left_lim)
        if not left:
            ax.set_yticks([])
        ax.set_ylabel(
            tl.left_label, fontsize=fontsize - (1 if low is not None else 1.5), color="#505050", linespacing=1.0
        )
        if left:
            ax.yaxis.set_major_locator(MaxNLocator(3, integer=True))
        if right:
            if low is not None:
                rax = low
            else:
                rax = ax.twinx()
                rax.set_zorder(ax.get_zorder() - 1)  # the left axes (cursor, veil) stay on top
                ax.patch.set_visible(False)
            for c in right:
                x, y = np.asarray(c.epochs, float), np.asarray(c.values, float)
                ok = y > 0 if tl.right_log else np.isfinite(y)
                rax.plot(x[ok], y[ok], color=c.colour, lw=0.9, label=c.label)
            if tl.right_log:
                rax.set_yscale("log")
                rax.yaxis.set_major_locator(LogLocator(numticks=3))
                rax.yaxis.set_minor_locator(NullLocator())
            if low is not None:  # its own axes: the scale on the left, like the curves above
                rax.set_ylabel(tl.right_label, fontsize=fontsize - 1, color="#505050", linespacing=1.0)
                rax.tick_params(axis="y", labelsize=fontsize - 1, length=2)
            else:
                rax.set_ylabel(tl.right_label, fontsize=fontsize - 1.5, color=right[0].colour)
                rax.tick_params(labelsize=fontsize - 1, length=2, colors=right[0].colour)
                for side in ("top", "left"):
                    rax.spines[side].set_visible(False)
                rax.spines["right"].set_color("#b0b0b0")
                rax.spines["bottom"].set_visible(False)
        ax.tick_params(axis="y", labelsize=fontsize - 1, length=2)

    def cursor_x(self) -> float:
        """The cursor's epoch (data x)."""
        return float(np.asarray(self.cursor.get_xdata())[0])

    def update(self, epoch: int) -> list:
        """Move the cursor and the veil to `epoch`, show the sentence of the current event, dim
        the labels of later planned events (phases, the schedule) and hide those of later results
        (an orbit's verification); returns the moving artists (`fast` + `slow`)."""
        tl = self.timeline
        x = float(min(max(epoch, tl.start), tl.end))
        i = int(np.searchsorted(self.epochs, epoch, side="right")) - 1 if len(self.epochs) else -1
        # a step curve's value at this snapshot holds until the next one: shown up to there
        held = float(self.epochs[i + 1]) if 0 <= i < len(self.epochs) - 1 and self.epochs[i] == epoch else x
        for a, cursor, veil in zip(self.axes, self.cursors, self.veils):
            v = min(max(held, x), tl.end) if a is self.ax and self.steps else x
            cursor.set_xdata([x, x])
            veil.set_x(v)
            # a little past the end too: a band's edge there is not left as an antialiased sliver
            veil.set_width(0.0 if v >= tl.end else tl.end - v + 0.01 * (tl.end - tl.start))
        current = [e for first, last, e in self._banner_from if first <= i <= last]
        if current:
            e = current[-1]
            self.banner.set_text(textwrap.fill(e.text or e.label, self.banner_chars))
            self.banner.set_color("#202020" if e.phase else e.colour)
        else:
            self.banner.set_text("")
        for e, t, leader in zip(tl.events, self.labels, self.leaders):
            past = e.epoch <= epoch
            t.set_alpha(1.0 if past else FUTURE_ALPHA)
            leader.set_alpha(0.6 if past else 0.6 * FUTURE_ALPHA)
            t.set_visible(past or e.phase)  # a result is not shown before it happens
            leader.set_visible(past or e.phase)
        return self.fast + self.slow

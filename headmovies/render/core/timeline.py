"""The timeline strip under a movie, and the frames held at its key events (docs/movie.md, "Timeline").

A movie shows one frame per snapshot, so its clock runs in snapshots, not epochs (the
schedule snapshots every 25 epochs, then every 100). The strip puts the movie back on the
epoch axis: epochs on a linear axis, a cursor at the frame's epoch, a mark for each event
(the schedule switch, phase changes, results such as an orbit's verification) and one or two
small curves of a progress measure. What lies after the cursor is veiled, so the strip shows
what is known at that epoch in full and the rest pale.

- `Timeline` (with `Event`s and `Curve`s) says what the strip shows; each experiment builds
  its own.
- `TimelineStrip` creates the strip's artists once in a given figure; `update(epoch)` moves
  the cursor, the veil and the event banner and returns those artists (for blitting).
- `hold_frames` says how often each snapshot's frame is repeated: `hold_s` seconds at every
  event marked `hold`, so a key event gets screen time even where it spans a few snapshots.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator
from matplotlib.transforms import blended_transform_factory

from headmovies.errors import UserError

EVENT_HOLD_S = 1.0  # seconds each held event stays on screen
BANNER_FRAMES = 24  # the event's sentence stays this many snapshots after its own
PHASE_COLOUR = "#707070"
FUTURE_ALPHA = 0.3  # labels of events after the cursor
STRIP_PX = 170  # height of the strip in pixels (banner, label rows, axes, tick labels)
Epochs = Sequence[int] | np.ndarray  # snapshot epochs: a list, or an int array [T]


@dataclass(frozen=True)
class Event:
    """A moment on the timeline.

    epoch:  where it happens (epochs)
    label:  a few words on the strip, e.g. "4-orbit verified"
    text:   one sentence shown above the strip while the event is current (default: "epoch E:
            " and `words` if given, else label)
    colour: its mark's colour (results in their own colour, phases grey)
    phase:  True for a change of the training itself (schedule, phase): a dashed mark;
            False for a result seen in the weights: a solid mark
    hold:   the movie holds its frame at this event (`hold_frames`)
    words:  what happens, undated (e.g. "heads 12–15 form a verified 4-orbit"), for texts that
            say the epoch their own way (a caption, the viewer's page)
    """

    epoch: int
    label: str
    text: str = ""
    colour: str = PHASE_COLOUR
    phase: bool = True
    hold: bool = True
    words: str = ""

    def __post_init__(self):
        if not self.text and self.words:
            object.__setattr__(self, "text", f"epoch {self.epoch:,}: {self.words}")


@dataclass(frozen=True)
class Curve:
    """A progress measure drawn in the strip: values [K] at epochs [K]. `axis` "left" or
    "right" (the right axis may be logarithmic); `step` draws a step curve (a count that
    changes at snapshots); `fill` fills it down to 0; stacked fills are drawn in order on top
    of each other when `stack` is set."""

    epochs: np.ndarray
    values: np.ndarray
    label: str
    colour: str = "#404040"
    axis: str = "left"
    step: bool = False
    fill: bool = False
    stack: bool = False


@dataclass
class Timeline:
    """What a movie's timeline strip shows: epochs start..end, events, curves, axis labels."""

    start: int
    end: int
    events: list[Event] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    left_label: str = ""
    left_lim: tuple[float, float] | None = None
    right_label: str = ""
    right_log: bool = False

    def __post_init__(self):
        self.events = sorted((e for e in self.events if self.start <= e.epoch <= self.end), key=lambda e: e.epoch)
        if self.end <= self.start:
            self.end = self.start + 1  # a single snapshot: any width


def strip_px(timeline: Timeline) -> int:
    """The strip's height in the tall layout at full text size (pixels)."""
    return STRIP_PX


def schedule_events(config: dict, epochs: Epochs | None = None) -> list[Event]:
    """The snapshot schedule's switch as an event, from a run's config (`train.config.TrainConfig`
    keys early_every, switch_epoch, late_every, epochs): from there one frame spans late_every
    epochs instead of early_every. [] when the schedule has no switch inside the run. Not held:
    nothing happens to the weights there."""
    try:
        early, late, switch = int(config["early_every"]), int(config["late_every"]), int(config["switch_epoch"])
    except (KeyError, TypeError, ValueError):
        return []
    last = int(epochs[-1]) if epochs is not None and len(epochs) else int(config.get("epochs", 0))
    if early == late or not 0 < switch < last:
        return []
    return [
        Event(
            switch,
            f"1 frame = {late} epochs",
            hold=False,
            words=f"snapshots every {late} epochs from here (every {early} before)",
        )
    ]


def first_lasting(epochs: np.ndarray, ok: np.ndarray) -> int | None:
    """The first epoch from which `ok` [T] holds at every later snapshot, or None if it does
    not hold at the last one (a result that lasts, e.g. accuracy reached and kept)."""
    ok = np.asarray(ok, bool)
    if not len(ok) or not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    return int(epochs[bad[-1] + 1]) if len(bad) else int(epochs[0])


def event_snapshots(epochs: Epochs, events: Sequence[Event]) -> list[int | None]:
    """Per event, the index of the first snapshot at or after its epoch (None if after the last)."""
    epochs = np.asarray(epochs)
    out = []
    for e in events:
        i = int(np.searchsorted(epochs, e.epoch, side="left"))
        out.append(i if i < len(epochs) else None)
    return out


def hold_frames(epochs: Epochs, events: Sequence[Event], fps: float, hold_s: float = EVENT_HOLD_S) -> np.ndarray:
    """int [T]: extra copies of each snapshot's frame. The frame of the first snapshot at or
    after each held event is repeated round(hold_s * fps) times more (once per snapshot, however
    many events it has)."""
    extra = np.zeros(len(epochs), np.int64)
    n = int(round(hold_s * fps))
    for e, i in zip(events, event_snapshots(epochs, events)):
        if e.hold and i is not None:
            extra[i] = n
    return extra


def add_timeline_arguments(parser, hold_s: float = EVENT_HOLD_S) -> None:
    """--event-hold S: the option every movie with a timeline shares."""
    parser.add_argument(
        "--event-hold",
        type=float,
        default=hold_s,
        metavar="S",
        help=f"seconds the movie holds its frame at each key event on the timeline (default {hold_s:g}; 0: no holds)",
    )


def timeline_arguments(args) -> float:
    """--event-hold from parsed arguments; UserError (one line) unless a finite number in [0, 10]."""
    hold = args.event_hold
    if not math.isfinite(hold) or not 0 <= hold <= 10:
        raise UserError(f"--event-hold must be a number of seconds in [0, 10], got {hold}")
    return hold


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
        label_px, banner_px, ticks_px = 16 * k, 22 * k, 22 * k
        axes_h = max(24.0 * k, h - banner_px - 3 * label_px - ticks_px)
        self.ax = ax = fig.add_axes((x0 / W, (y0 + ticks_px) / H, w / W, axes_h / H))
        ax.set_xlim(tl.start, tl.end)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=10, steps=[1, 2, 2.5, 5, 10], integer=True))
        ax.xaxis.set_major_formatter(FuncFormatter(_fmt_epoch))
        ax.tick_params(labelsize=fontsize - 1, length=3, color="#909090", labelcolor="#505050")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        for side in ("left", "bottom"):
            ax.spines[side].set_color("#b0b0b0")
        self._draw_curves(ax, tl, fontsize)
        # event marks and their labels, in rows that do not overlap
        bt = blended_transform_factory(ax.transData, ax.transAxes)
        renderer = fig.canvas.get_renderer()
        placed: list[tuple[int, float, float, float]] = []  # (row, left, right, leader x) in pixels
        px_per_epoch = w / (tl.end - tl.start)
        self.labels = []
        for e in tl.events:
            ax.axvline(
                e.epoch,
                color=e.colour,
                lw=1.2 if not e.phase else 1.0,
                ls="--" if e.phase else "-",
                alpha=0.9,
                zorder=3,
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
            fig.add_artist(
                Line2D(
                    [x / W, x / W],
                    [(y0 + ticks_px + axes_h) / H, (ly + 2) / H],
                    color=e.colour,
                    lw=0.6,
                    alpha=0.6,
                    ls="--" if e.phase else "-",
                )
            )
        anim: dict[str, Any] = dict(animated=animated)
        top = y0 + ticks_px + axes_h + 3 * label_px + 2 * k
        # the veil over everything after the cursor in the axes; labels of later events are pale
        self.veil = Rectangle(
            (tl.end, 0.0),
            0.0,
            1.0,
            transform=bt,
            facecolor="white",
            edgecolor="none",
            alpha=0.72,
            clip_on=False,
            zorder=6,
            **anim,
        )
        ax.add_patch(self.veil)
        self.cursor = Line2D(
            [tl.start, tl.start],
            [0.0, 1.0],
            transform=bt,
            color="#202020",
            lw=max(1.5, 1.6 * k),
            clip_on=False,
            zorder=7,
            **anim,
        )
        ax.add_line(self.cursor)
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
        self.fast = [self.veil, self.cursor]  # change every frame
        self.slow = [self.banner, *self.labels]  # change at a few frames (events)
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
    def _draw_curves(ax, tl: Timeline, fontsize: float) -> None:
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
        ax.set_ylabel(tl.left_label, fontsize=fontsize - 1.5, color="#505050", linespacing=1.0)
        if left:
            ax.yaxis.set_major_locator(MaxNLocator(3, integer=True))
        if right:
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
            rax.set_ylabel(tl.right_label, fontsize=fontsize - 1.5, color=right[0].colour)
            rax.tick_params(labelsize=fontsize - 2, length=2, colors=right[0].colour)
            for side in ("top", "left"):
                rax.spines[side].set_visible(False)
            rax.spines["right"].set_color("#b0b0b0")
            rax.spines["bottom"].set_visible(False)
        ax.tick_params(axis="y", labelsize=fontsize - 2, length=2)

    def cursor_x(self) -> float:
        """The cursor's epoch (data x)."""
        return float(np.asarray(self.cursor.get_xdata())[0])

    def update(self, epoch: int) -> list:
        """Move the cursor and the veil to `epoch`, show the sentence of the current event and
        dim the labels of later events; returns the moving artists (`fast` + `slow`)."""
        tl = self.timeline
        x = float(min(max(epoch, tl.start), tl.end))
        self.cursor.set_xdata([x, x])
        self.veil.set_x(x)
        self.veil.set_width(tl.end - x)
        i = int(np.searchsorted(self.epochs, epoch, side="right")) - 1 if len(self.epochs) else -1
        current = [e for first, last, e in self._banner_from if first <= i <= last]
        if current:
            e = current[-1]
            self.banner.set_text(e.text or e.label)
            self.banner.set_color("#202020" if e.phase else e.colour)
        else:
            self.banner.set_text("")
        for e, t in zip(tl.events, self.labels):
            t.set_alpha(1.0 if e.epoch <= epoch else FUTURE_ALPHA)
        return self.fast + self.slow

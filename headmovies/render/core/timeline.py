"""The timeline strip under a movie, and the frames held at its key events (docs/movie.md, "Timeline").

A movie shows one frame per snapshot, so its clock runs in snapshots, not epochs (the
schedule snapshots every 25 epochs, then every 100). The strip puts the movie back on the
epoch axis: epochs on a linear axis, a cursor at the frame's epoch, a mark for each event
(the schedule switch, phase changes, results such as an orbit's verification) and one or two
small curves of a progress measure. What lies after the cursor is veiled, so the strip shows
what is known at that epoch in full and the rest pale.

- `Timeline` (with `Event`s and `Curve`s) says what the strip shows; each experiment builds
  its own.
- `TimelineStrip` (`render.core.timeline_strip`) creates the strip's artists once in a given
  figure; `update(epoch)` moves the cursor, the veil and the event banner and returns those
  artists (for blitting).
- `hold_frames` says how often each snapshot's frame is repeated: `hold_s` seconds at every
  event marked `hold`, so a key event gets screen time even where it spans a few snapshots.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from headmovies.errors import UserError

EVENT_HOLD_S = 1.0  # seconds each held event stays on screen
BANNER_FRAMES = 24  # the event's sentence stays this many snapshots after its own
PHASE_COLOUR = "#707070"
FUTURE_ALPHA = 0.3  # labels of events after the cursor
STRIP_PX = 170  # height of the strip in pixels (banner, label rows, axes, tick labels)
SPLIT_EXTRA_PX = 110  # the second axes of a split strip (`split_axes`): about 50 px each, and a gap
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


def split_axes(timeline: Timeline) -> bool:
    """Whether the strip draws its left and right curves in two axes, one above the other (it
    has both): each keeps its own height and scale, and no curve hides behind another's fill."""
    sides = {c.axis == "right" for c in timeline.curves}
    return sides == {True, False}


def strip_px(timeline: Timeline) -> int:
    """The strip's height in the tall layout at full text size (pixels): STRIP_PX, and
    SPLIT_EXTRA_PX more for two axes (`split_axes`)."""
    return STRIP_PX + (SPLIT_EXTRA_PX if split_axes(timeline) else 0)


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


def accuracy_timeline(
    epochs: np.ndarray,
    metrics: dict,
    config: dict,
    *,
    key: str,
    words: str,
    marks: Sequence[float],
    colour: str,
    left_label: str,
    events: Sequence[Event] = (),
) -> Timeline:
    """The strip of a run whose story is an accuracy: the schedule switch (`schedule_events`),
    `events`, the logged metric `key` in % (a curve named `words`) and, for each of `marks`,
    the epoch from which it stays at or above it (`first_lasting`); epochs [S] of the snapshots."""
    events = [*schedule_events(config, epochs), *events]
    curves = []
    if key in metrics and len(metrics[key]):
        me, acc = np.asarray(metrics["epoch"]), np.asarray(metrics[key], float)
        curves.append(Curve(me, 100 * acc, words, colour))
        for mark in marks:
            e = first_lasting(me, acc >= mark)
            if e is not None:
                text = f"epoch {e:,}: {words} reaches {mark:.0%} and stays there"
                events.append(Event(e, f"accuracy ≥ {mark:.0%}", text, colour=colour, phase=False))
    return Timeline(int(epochs[0]), int(epochs[-1]), events, curves, left_label=left_label, left_lim=(0, 100))


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
    """--event-hold S: the option every movie with a timeline shares (unset: None, read as
    `hold_s` by `timeline_arguments`)."""
    parser.add_argument(
        "--event-hold",
        type=float,
        metavar="S",
        help=f"seconds the movie holds its frame at each key event on the timeline (default {hold_s:g}; 0: no holds)",
    )


def timeline_arguments(args) -> float:
    """--event-hold from parsed arguments (EVENT_HOLD_S when not given); UserError (one line)
    unless a finite number in [0, 10]."""
    hold = EVENT_HOLD_S if args.event_hold is None else args.event_hold
    if not math.isfinite(hold) or not 0 <= hold <= 10:
        raise UserError(f"--event-hold must be a number of seconds in [0, 10], got {hold}")
    return hold

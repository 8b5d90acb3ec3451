"""The frame states of a trailing-dot movie (docs/movie.md): what each frame of the panels
shows, from a stream of irrep coordinates.

`frame_states(coords)` turns (epoch, coordinates [P, H]) pairs into `FrameState`s: each
head's point, its trail of the last `trail_epochs` epochs (counted in epochs, not frames: the
snapshot schedule is not uniform; `trail_length()` is the one rule for its length) with each
point's age, and the axis half-widths, which follow the largest radius in view (trails
included), eased so that they never jitter and never cut a dot off. Every trailing-dot movie
(orbit, generic, ov-coherent) uses these two rules. It keeps only the trail window and a
look-ahead of `lookahead` frames, so memory does not grow with the run. A `Look` restyles the
heads of one frame (`PanelFigure` draws both; the orbit movie's looks come from `render.orbits.head_styles`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

TRAIL_EPOCHS = 250  # source 000: "each dot trails its last 250 epochs"
# the axes' rule (`frame_states`; the viewer page gets these in its payload)
LOOKAHEAD = 8  # frames the axes look ahead
EASE = 0.25  # share of the way (in log scale) to the radius ahead covered per frame
MARGIN = 1.12  # half-width over the eased radius
FLOOR = 1e-30  # radii below this count as 0 on the log scale


def trail_length(epochs: np.ndarray, asked: float | None = None) -> float:
    """The trail length in epochs: `asked` (a --trail) when given, else a tenth of the span of
    the snapshot epochs [T], at least 1 and at most TRAIL_EPOCHS."""
    if asked is not None:
        return asked
    span = float(epochs[-1] - epochs[0]) if len(epochs) > 1 else 1.0
    return min(TRAIL_EPOCHS, max(span / 10, 1.0))


@dataclass
class Look:
    """How the heads are drawn in one frame. H heads, in head order (not drawing order).

    face, edge: RGBA [H, 4] fill and outline of each dot; size [H]: dot area (points^2);
    linewidth [H]: outline width (points); trail: RGBA [H, 4] trail colour (its alpha scales
    the fade with age); outlines: bool [G], which of the figure's outline groups are drawn;
    legend: one (label, face, edge, size) per legend slot of the figure.
    """

    face: np.ndarray
    edge: np.ndarray
    size: np.ndarray
    linewidth: np.ndarray
    trail: np.ndarray
    outlines: np.ndarray
    legend: list


@dataclass
class FrameState:
    """What one frame shows.

    epoch:     the snapshot's epoch
    points:    complex [P, H], each head's coordinate in each panel's plane
    trail:     complex [K, P, H], the trail oldest first, ending with `points` (K >= 1); its
               first point is interpolated to lie exactly `trail_epochs` back when possible
    trail_age: float [K], age of each trail point in epochs (0 for the current point)
    limits:    float [P], half-width of each panel's axes (data units)
    radius:    float [P], largest |coordinate| in view (points and trails), before easing
    caption:   text at the top right (e.g. accuracies)
    look:      how the heads are drawn (None: as in the previous frame)
    panel_text: per panel, text at the bottom left of its axes (e.g. the orbit movie's
               frequency-group spectrum, `render.orbits.spectrum.panel_lines`); None: none
    """

    epoch: int
    points: np.ndarray
    trail: np.ndarray
    trail_age: np.ndarray
    limits: np.ndarray
    radius: np.ndarray
    caption: str = ""
    look: Look | None = None
    panel_text: list[str] | None = None


def frame_states(
    coords: Iterable[tuple[int, np.ndarray]],
    trail_epochs: float = TRAIL_EPOCHS,
    lookahead: int = LOOKAHEAD,
    ease: float = EASE,
    margin: float = MARGIN,
    caption: Callable[[int], str] | None = None,
) -> Iterator[FrameState]:
    """FrameStates from (epoch, complex [P, H]) pairs in increasing epoch order.

    Axis half-width: with R_t the radius in view at frame t (points and trails),
    A_t = max(R_t .. R_{t+lookahead}) looks ahead so the axes widen before a dot gets there;
    log L_t = log L_{t-1} + ease * (log A_t - log L_{t-1}) eases in log scale (zooming by 10x
    takes as long at any scale); L_t = max(L_t, R_t) keeps every dot inside; the limit is
    margin * L_t. Memory: the trail window plus `lookahead` frames.
    """
    history: deque[tuple[int, np.ndarray]] = deque()
    pending: deque[FrameState] = deque()
    log_l = None

    def emit() -> FrameState:
        nonlocal log_l
        state = pending.popleft()
        ahead = np.max([s.radius for s in (state, *pending)], axis=0)  # [P]
        log_a = np.log(np.maximum(ahead, FLOOR))
        if log_l is None:
            log_l = log_a
        else:  # a panel that was all at 0 so far starts at its new scale, not eased up from FLOOR
            log_l = np.where(log_l <= np.log(FLOOR), log_a, log_l + ease * (log_a - log_l))
        log_l = np.maximum(log_l, np.log(np.maximum(state.radius, FLOOR)))
        level = np.maximum(np.exp(log_l), state.radius)  # exact, despite rounding
        state.limits = np.where(ahead > 0, margin * level, 1.0)  # all at 0: any scale
        return state

    last_epoch = None
    for epoch, c in coords:
        epoch = int(epoch)
        c = np.asarray(c, np.complex128)
        if last_epoch is not None and epoch <= last_epoch:
            raise ValueError(f"epochs must increase: {epoch} after {last_epoch}")
        last_epoch = epoch
        history.append((epoch, c))
        start = epoch - trail_epochs
        while len(history) >= 2 and history[1][0] <= start:
            history.popleft()  # keep one point at or before the window start
        ep = np.array([e for e, _ in history], np.float64)
        pts = np.stack([x for _, x in history])  # [K, P, H]
        if len(history) >= 2 and ep[0] < start:  # cut the oldest segment at exactly `start`
            w = (start - ep[0]) / (ep[1] - ep[0])
            pts[0] = pts[0] + w * (pts[1] - pts[0])
            ep[0] = start
        radius = np.abs(pts).max(axis=(0, 2))  # [P]
        pending.append(
            FrameState(epoch, c, pts, epoch - ep, np.zeros_like(radius), radius, caption(epoch) if caption else "")
        )
        if len(pending) > lookahead:
            yield emit()
    while pending:
        yield emit()

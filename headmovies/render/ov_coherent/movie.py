"""The QK-plane movie of an ov-coherent run (source 004): each signal token's read-off QK score in
head 1 against head 2, over training (docs/math.md, "OV-coherent analyses"), over a timeline
strip (docs/movie.md, "Timeline"): epochs, the logged accuracy, the schedule switch, the epoch
from which the two heads' preference orderings stay opposite and the epoch from which the
accuracy stays at or above 99 % (held `event_hold_s` seconds each)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from headmovies.errors import UserError
from headmovies.render.core.encode import EncodeResult, write_movie
from headmovies.render.core.frame_states import FrameState, frame_states, trail_length
from headmovies.render.core.timeline import (
    EVENT_HOLD_S,
    STRIP_PX,
    Event,
    Timeline,
    accuracy_timeline,
    first_lasting,
    hold_frames,
)
from headmovies.render.core.timeline_strip import TimelineStrip
from headmovies.render.ov_coherent import analysis
from headmovies.render.ov_coherent.figures import TOKEN_COLOURS, plane_coords
from headmovies.runfile.reader import Run
from headmovies.tasks import ov_coherent as ov_task


class QKPlaneMovie:
    """Frames of the read-off QK scores of heads 1 and 2 in the plane over training.

    One dot per signal token (coloured), small grey dots for the noise tokens and a hollow one
    for the read-off; each head's scores are shifted by its mean noise score. Signal dots trail
    their last `trail` epochs (one optimizer step each; None: `frame_states.trail_length`'s
    rule). Axes are symmetric about the origin with equal aspect and follow the largest radius
    in view (trails included), eased as every trailing-dot movie's (`frame_states`), so every
    dot stays on screen. Artists are created once and updated per frame.

    epochs [T], qk [T, n_heads >= 2, 12] (from `analysis.qk_trajectory`), acc [T] or None.
    """

    def __init__(
        self,
        epochs: np.ndarray,
        qk: np.ndarray,
        acc: np.ndarray | None = None,
        *,
        trail: float | None = None,
        title: str = "",
        size_px: int = 720,
        dpi: int = 120,
        timeline: Timeline | None = None,
    ):
        if qk.shape[1] < 2:
            raise UserError("the QK-plane movie needs at least 2 heads")
        self.epochs, self.xy = epochs, np.swapaxes(plane_coords(qk)[:, :2], 1, 2)  # (T, 12, 2)
        self.qk, self.acc, self.trail = qk, acc, trail_length(epochs, trail)
        strip_px = STRIP_PX if timeline is not None else 0
        height = size_px + strip_px
        self.fig = plt.figure(figsize=(size_px / dpi, height / dpi), dpi=dpi)

        def y(frac):  # fractions of the square part
            return (strip_px + frac * size_px) / height

        ax = self.ax = self.fig.add_axes((0.13, y(0.1), 0.82, 0.76 * size_px / height))
        ax.set_aspect("equal")
        ax.plot([-1e9, 1e9], [0, 0], color="0.65", lw=0.6)  # thin cross at the origin
        ax.plot([0, 0], [-1e9, 1e9], color="0.65", lw=0.6)
        ax.set_xlabel("head 1: read-off QK score − mean noise")
        ax.set_ylabel("head 2: read-off QK score − mean noise")
        self.trails = {t: ax.plot([], [], color=TOKEN_COLOURS[t], lw=1.2, alpha=0.45)[0] for t in ov_task.SIGNAL}
        self.noise = ax.scatter(
            np.zeros(len(ov_task.NOISE)), np.zeros(len(ov_task.NOISE)), s=14, c="0.55", label="noise 5-11", zorder=2
        )
        self.readoff = ax.scatter([0], [0], s=40, facecolors="none", edgecolors="black", label="read-off", zorder=2)
        self.dots = ax.scatter(
            np.zeros(4),
            np.zeros(4),
            s=70,
            c=[TOKEN_COLOURS[t] for t in ov_task.SIGNAL],
            zorder=4,
            edgecolors="white",
            linewidths=0.6,
        )
        self.labels = [
            ax.text(0, 0, str(t), fontsize=10, fontweight="bold", color=TOKEN_COLOURS[t], zorder=5)
            for t in ov_task.SIGNAL
        ]
        ax.legend(loc="lower left", fontsize=7, framealpha=0.7)
        self.fig.text(
            0.5,
            y(0.965),
            title or "read-off QK scores per signal token, head 1 vs head 2",
            ha="center",
            va="top",
            fontsize=10,
        )
        self.info = self.fig.text(0.5, y(0.915), "", ha="center", va="top", fontsize=9, family="monospace")
        self.strip = None
        if timeline is not None:
            W = self.fig.bbox.width
            self.strip = TimelineStrip(
                self.fig, (70, 4, W - 70 - 30, strip_px - 8), timeline, epochs, animated=False, fontsize=8.0
            )

    def __len__(self) -> int:
        return len(self.epochs)

    def draw(self, t: int, state: FrameState) -> np.ndarray:
        """Update the artists to snapshot t, its trail and axis half-width from `state`, and
        return the frame, uint8 RGB [H, W, 3]."""
        xy = self.xy[t]
        trail = state.trail[:, 0]  # complex [K, 12]
        for tok in ov_task.SIGNAL:
            self.trails[tok].set_data(trail[:, tok].real, trail[:, tok].imag)
        lim = float(state.limits[0])
        for i, tok in enumerate(ov_task.SIGNAL):
            self.labels[i].set_position(xy[tok] + 0.035 * lim)
        self.dots.set_offsets(xy[list(ov_task.SIGNAL)])
        self.noise.set_offsets(xy[list(ov_task.NOISE)])
        self.readoff.set_offsets(xy[[ov_task.READOFF]])
        self.ax.set_xlim(-lim, lim)
        self.ax.set_ylim(-lim, lim)
        orders = [analysis.format_ordering(self.qk[t, h]).replace(" > noise", "").replace(" ", "") for h in range(2)]
        opp = "opposite" if opposite_over_time(self.qk[t : t + 1])[0] else "not opposite"
        acc = f"   acc {self.acc[t]:6.2%}" if self.acc is not None else ""
        self.info.set_text(f"epoch {int(self.epochs[t]):>6d}{acc}\nhead 1: {orders[0]}   head 2: {orders[1]}   ({opp})")
        if self.strip is not None:
            self.strip.update(int(self.epochs[t]))
        self.fig.canvas.draw()
        return np.asarray(self.fig.canvas.buffer_rgba())[..., :3]  # type: ignore[attr-defined]  # Agg, chosen above

    def frames(self) -> Iterator[np.ndarray]:
        """Every frame in order, one per snapshot: each token a point of one plane
        (`frame_states`, x + iy) gives the trails and the eased axes."""
        coords = (self.xy[..., 0] + 1j * self.xy[..., 1])[:, None]  # [T, 1, 12]
        for t, state in enumerate(frame_states(zip(self.epochs, coords), trail_epochs=self.trail)):
            yield self.draw(t, state)

    def close(self) -> None:
        plt.close(self.fig)


ACC_MARK = 0.99
ACC_COLOUR = "C0"
OPPOSITE_COLOUR = "C3"


def opposite_over_time(qk: np.ndarray) -> np.ndarray:
    """bool [T]: heads 1 and 2 order the signal tokens oppositely at each snapshot (qk [T, heads, 12])."""
    order = analysis.preference_ordering
    return np.array([analysis.are_opposite(order(q[0]), order(q[1])) for q in qk])


def ov_coherent_timeline(epochs: np.ndarray, qk: np.ndarray, metrics: dict, config: dict) -> Timeline:
    """The strip: the logged accuracy (%), the schedule switch, the epoch from which heads 1
    and 2 (if the run has two) stay opposite (`opposite_over_time`) and the epoch from which the accuracy stays at or
    above ACC_MARK."""
    e = first_lasting(epochs, opposite_over_time(qk)) if qk.shape[1] >= 2 else None  # one head: no pair
    opposite = []
    if e is not None:
        words = f"epoch {e:,}: heads 1 and 2 order the signal tokens oppositely from here on"
        opposite.append(Event(e, "orderings opposite", words, colour=OPPOSITE_COLOUR, phase=False))
    return accuracy_timeline(
        epochs,
        metrics,
        config,
        key="acc",
        words="accuracy",
        marks=(ACC_MARK,),
        colour=ACC_COLOUR,
        left_label="accuracy %",
        events=opposite,
    )


def figcaption(run: Run, label: str, qk: np.ndarray, timeline: Timeline, acc_final: float | None) -> str:
    """The movie's text alternative: what trained, what the dots are, what happened when."""
    cfg = run.config
    H = qk.shape[1]
    so_far = "" if run.complete else f" so far (of {int(cfg.get('epochs', 0) or 0):,}; the run is unfinished)"
    parts = [
        (
            f"{H} attention heads (d_head {cfg.get('d_head', '?')}) of one layer trained {int(run.epochs[-1]):,} "
            f"epochs{so_far} to name the unordered pair of signal tokens (1-4) among noise tokens at a read-off token "
            f"(ov-coherent, {label}, seed {run.seed})."
        )
    ]
    parts.append(
        "Each coloured dot is one signal token at its read-off QK score in head 1 (across) and head 2 (up), "
        "each minus that head's mean noise score; grey dots are the noise tokens."
    )
    for e in timeline.events:
        if e.label == "orderings opposite":
            parts.append(f"Heads 1 and 2 order the signal tokens oppositely from epoch {e.epoch:,} on.")
        elif not e.phase:
            parts.append(f"The accuracy reaches {ACC_MARK:.0%} at epoch {e.epoch:,} and stays there.")
    if acc_final is not None:
        parts.append(f"Final logged accuracy {acc_final:.2%}.")
    return " ".join(parts)


def make_movie(
    run: Run,
    out_dir: Path,
    label: str,
    formats,
    fps: float = 24.0,
    hold_s: float = 2.0,
    trail: float | None = None,
    progress: bool = True,
    event_hold_s: float = EVENT_HOLD_S,
    basename: str = "qk_plane",
) -> EncodeResult:
    """Render the QK-plane movie of an open run into out_dir/basename.{mp4,webm,gif,png,html};
    `trail` in epochs (None: `frame_states.trail_length`'s rule)."""
    epochs, qk = analysis.qk_trajectory(run)
    m = run.metrics()
    acc = np.interp(epochs, m["epoch"], m["acc"]) if "acc" in m else None
    timeline = ov_coherent_timeline(epochs, qk, m, run.config)
    movie = QKPlaneMovie(
        epochs, qk, acc, trail=trail, title=f"{label}: read-off QK, head 1 vs head 2", timeline=timeline
    )
    caption = figcaption(run, label, qk, timeline, float(m["acc"][-1]) if "acc" in m and len(m["acc"]) else None)
    try:
        return write_movie(
            movie.frames(),
            out_dir,
            basename,
            repeats=hold_frames(epochs, timeline.events, fps, event_hold_s),
            fps=fps,
            hold_s=hold_s,
            formats=formats,
            caption=caption,
            progress=progress,
            desc=f"movie {label}",
        )
    finally:
        movie.close()

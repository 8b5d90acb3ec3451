"""The QK-plane movie of an ov-coherent run (seed 004): each signal token's read-off QK score in
head 1 against head 2, over training (docs/math.md, "OV-coherent analyses")."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from headmovies.errors import UserError  # noqa: E402
from headmovies.render.core.encode import EncodeResult, encode  # noqa: E402
from headmovies.render.core.reader import Run  # noqa: E402
from headmovies.render.ov_coherent import analysis as S  # noqa: E402
from headmovies.render.ov_coherent.figures import TOKEN_COLOURS, plane_coords  # noqa: E402
from headmovies.tasks import ov_coherent as T  # noqa: E402


class QKPlaneMovie:
    """Frames of the read-off QK scores of heads 1 and 2 in the plane over training.

    One dot per signal token (coloured), small grey dots for the noise tokens and a hollow one
    for the read-off; each head's scores are shifted by its mean noise score. Signal dots trail
    their last `trail` optimizer steps. Axes are symmetric about the origin with equal aspect
    and follow the largest radius in view (trails included): they grow at once and shrink
    smoothly, so every dot stays on screen. Artists are created once and updated per frame.

    epochs [T], qk [T, n_heads >= 2, 12] (from `analysis.qk_trajectory`), acc [T] or None.
    """

    def __init__(self, epochs: np.ndarray, qk: np.ndarray, acc: np.ndarray | None = None, *,
                 trail: int = 1000, title: str = "", size_px: int = 720, dpi: int = 120):
        if qk.shape[1] < 2:
            raise UserError("the QK-plane movie needs at least 2 heads")
        self.epochs, self.xy = epochs, np.swapaxes(plane_coords(qk)[:, :2], 1, 2)   # (T, 12, 2)
        self.qk, self.acc, self.trail = qk, acc, trail
        inch = size_px / dpi
        self.fig = plt.figure(figsize=(inch, inch), dpi=dpi)
        ax = self.ax = self.fig.add_axes([0.13, 0.1, 0.82, 0.76])
        ax.set_aspect("equal")
        ax.plot([-1e9, 1e9], [0, 0], color="0.65", lw=0.6)        # thin cross at the origin
        ax.plot([0, 0], [-1e9, 1e9], color="0.65", lw=0.6)
        ax.set_xlabel("head 1: read-off QK score − mean noise")
        ax.set_ylabel("head 2: read-off QK score − mean noise")
        self.trails = {t: ax.plot([], [], color=TOKEN_COLOURS[t], lw=1.2, alpha=0.45)[0] for t in T.SIGNAL}
        self.noise = ax.scatter(np.zeros(len(T.NOISE)), np.zeros(len(T.NOISE)), s=14, c="0.55",
                                label="noise 5-11", zorder=2)
        self.readoff = ax.scatter([0], [0], s=40, facecolors="none", edgecolors="black",
                                  label="read-off", zorder=2)
        self.dots = ax.scatter(np.zeros(4), np.zeros(4), s=70, c=[TOKEN_COLOURS[t] for t in T.SIGNAL],
                               zorder=4, edgecolors="white", linewidths=0.6)
        self.labels = [ax.text(0, 0, str(t), fontsize=10, fontweight="bold", color=TOKEN_COLOURS[t],
                               zorder=5) for t in T.SIGNAL]
        ax.legend(loc="lower left", fontsize=7, framealpha=0.7)
        self.fig.text(0.5, 0.965, title or "read-off QK scores per signal token, head 1 vs head 2",
                      ha="center", va="top", fontsize=10)
        self.info = self.fig.text(0.5, 0.915, "", ha="center", va="top", fontsize=9, family="monospace")
        self.lim = None
        w, h = self.fig.canvas.get_width_height()
        self.size = (w - w % 2, h - h % 2)

    def __len__(self) -> int:
        return len(self.epochs)

    def _limit(self, target: float) -> float:
        # grow at once, shrink by 8 % of the gap per frame
        self.lim = target if self.lim is None or target > self.lim else self.lim + 0.08 * (target - self.lim)
        return self.lim

    def draw(self, t: int) -> np.ndarray:
        """Update the artists to snapshot t and return the frame, uint8 RGB [H, W, 3] (even sizes)."""
        xy = self.xy[t]
        start = np.searchsorted(self.epochs, self.epochs[t] - self.trail)
        radius = np.abs(xy).max()
        for i, tok in enumerate(T.SIGNAL):
            path = self.xy[start:t + 1, tok]
            self.trails[tok].set_data(path[:, 0], path[:, 1])
            radius = max(radius, np.abs(path).max())
        lim = self._limit(1.15 * max(radius, 1e-3))
        for i, tok in enumerate(T.SIGNAL):
            self.labels[i].set_position(xy[tok] + 0.035 * lim)
        self.dots.set_offsets(xy[list(T.SIGNAL)])
        self.noise.set_offsets(xy[list(T.NOISE)])
        self.readoff.set_offsets(xy[[T.READOFF]])
        self.ax.set_xlim(-lim, lim)
        self.ax.set_ylim(-lim, lim)
        orders = [S.format_ordering(self.qk[t, h]).replace(" > noise", "").replace(" ", "") for h in range(2)]
        opp = "opposite" if S.are_opposite(S.preference_ordering(self.qk[t, 0]),
                                           S.preference_ordering(self.qk[t, 1])) else "not opposite"
        acc = f"   acc {self.acc[t]:6.2%}" if self.acc is not None else ""
        self.info.set_text(f"step {int(self.epochs[t]):>6d}{acc}\nhead 1: {orders[0]}   head 2: {orders[1]}   ({opp})")
        self.fig.canvas.draw()
        rgb = np.asarray(self.fig.canvas.buffer_rgba())[..., :3]
        return np.ascontiguousarray(rgb[: self.size[1], : self.size[0]])

    def frames(self) -> Iterator[np.ndarray]:
        """Every frame in order (the axis limit state carries from frame to frame)."""
        self.lim = None
        for t in range(len(self)):
            yield self.draw(t)

    def close(self) -> None:
        plt.close(self.fig)


def make_movie(run: Run, out_dir: Path, label: str, formats, fps: float = 24.0, hold_s: float = 2.0,
               trail: int = 1000, progress: bool = True) -> EncodeResult:
    """Render the QK-plane movie of an open run into out_dir/qk_plane.{mp4,webm,gif,png,html}."""
    from tqdm import tqdm
    epochs, qk = S.qk_trajectory(run)
    m = run.metrics()
    acc = np.interp(epochs, m["epoch"], m["acc"]) if "acc" in m else None
    movie = QKPlaneMovie(epochs, qk, acc, trail=trail, title=f"{label}: read-off QK, head 1 vs head 2")
    bar = tqdm(total=len(movie) + int(round(hold_s * fps)), desc=f"movie {label}", unit="frame",
               dynamic_ncols=True, disable=not progress)
    try:
        return encode(movie.frames(), out_dir, "qk_plane", fps=fps, hold_s=hold_s, formats=formats,
                      on_frame=bar.update, on_stage=bar.set_postfix_str)
    finally:
        bar.close()
        movie.close()

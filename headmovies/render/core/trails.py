"""The fading trails of one panel of a trailing-dot movie, drawn with few paths
(`TrailCollection`, used by `render.core.panels.PanelFigure`)."""

from __future__ import annotations

import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.path import Path


class TrailCollection(PathCollection):
    """Fading trails of every head in one panel, drawn with few paths.

    One Path per (trail step k, colour): the step-k segments of all heads of that colour as
    MOVETO/LINETO pairs, so all its segments share one alpha (their age) and one colour. A
    frame costs (steps x colours) paths, not (steps x heads) segments, and their vertices are
    views of preallocated arrays written in place: no Path is built per frame (building one
    per segment costs ~20 ms a frame for 32 heads in 4 panels). Slots beyond the current
    trail are zero-length and transparent; the arrays grow when a trail needs more steps.
    """

    def __init__(self, colours: np.ndarray, **kw):
        super().__init__([], facecolors="none", **kw)
        self._colours: np.ndarray | None = None
        self.set_colours(colours)

    def set_colours(self, colours: np.ndarray) -> None:
        """Per-head RGBA [H, 4]; heads are regrouped only when the colours change (rare)."""
        colours = np.asarray(colours, np.float64)
        if self._colours is not None and np.array_equal(colours, self._colours):
            return
        self._colours = colours.copy()
        groups: dict[tuple, list[int]] = {}
        for h, c in enumerate(map(tuple, colours)):
            groups.setdefault(c, []).append(h)
        self._groups = [(np.array(heads), np.array(c)) for c, heads in groups.items()]
        self._bufs: list[np.ndarray] = []
        self._steps = 0

    def _allocate(self, steps: int) -> None:
        self._bufs = [np.zeros((steps, 2 * len(heads), 2)) for heads, _ in self._groups]
        codes = [np.tile([Path.MOVETO, Path.LINETO], len(heads)).astype(Path.code_type) for heads, _ in self._groups]
        self.set_paths([Path(buf[k], code) for k in range(steps) for buf, code in zip(self._bufs, codes)])
        if not np.shares_memory(self.get_paths()[0].vertices, self._bufs[0]):
            raise RuntimeError("matplotlib copied path vertices; trails cannot be updated in place")
        self._steps = steps

    def set_trail(self, xy: np.ndarray, alpha: np.ndarray) -> None:
        """xy [K, H, 2] trail positions (heads in this collection's order), alpha [K-1] per step."""
        steps = xy.shape[0] - 1
        if steps > self._steps:
            self._allocate(max(steps, 2 * self._steps, 4))
        rgba = np.zeros((self._steps, len(self._groups), 4))
        for g, ((heads, colour), buf) in enumerate(zip(self._groups, self._bufs)):
            buf[:steps, 0::2] = xy[:-1, heads]
            buf[:steps, 1::2] = xy[1:, heads]
            buf[steps:] = 0.0
            rgba[:steps, g] = colour
            rgba[:steps, g, 3] = alpha * colour[3]
        self.set_edgecolor(rgba.reshape(-1, 4))  # type: ignore[arg-type]  # the stubs leave out RGBA arrays
        self.stale = True

"""The viewer of any run (`headmovies view RUN --out DIR`; docs/recording.md): one
self-contained HTML page (no server, no network) to scrub the snapshots, each head a dot with
its trail in the movie's planes (`planes.py`, axes eased as the movie's), and per-head
heatmaps of the centred QK and OV circuits at up to `MAP_SNAPSHOTS` snapshots.

Heatmaps are stored as int8 (each map scaled by its own largest |entry|, kept beside it),
base64 in the page's JSON payload; coordinates as float32 rounded to 5 significant digits.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import numpy as np
from matplotlib.colors import to_hex

from headmovies.render.core.frame_states import frame_states
from headmovies.render.core.outputs import prepare_out_dir, write_text
from headmovies.render.generic.heads import iter_circuits
from headmovies.render.generic.movie import GenericMovie, head_colours
from headmovies.runfile.reader import Run

MAP_SNAPSHOTS = 40
PAGE = Path(__file__).parent / "viewer_page"


def _maps(movie: GenericMovie) -> dict:
    run, heads = movie.run, movie.heads
    T = len(run)
    picks = np.unique(np.linspace(0, T - 1, min(T, MAP_SNAPSHOTS)).round().astype(int))
    data, scales, epochs = [], [], []
    for epoch, circ in iter_circuits(run, heads, picks):
        epochs.append(int(epoch))
        for h in range(heads.total):
            for c in ("qk", "ov"):
                X = circ[c][h]
                s = float(np.abs(X).max()) or 1.0
                scales.append(s)
                data.append(np.round(X / s * 127).astype(np.int8).ravel())
    return {
        "epochs": epochs,
        "shapes": [[heads.tokens, heads.tokens], [heads.outputs, heads.tokens]],
        "scales": [float(f"{s:.5g}") for s in scales],
        "data": base64.b64encode(np.concatenate(data).tobytes()).decode(),
    }


def payload(run: Run, group_order: int | None = None, panels: list[str] | None = None, basis=None) -> dict:
    """The page's data: epochs [T], titles and notes [P], heads [H] and their colours, coords
    (x, y) flat [T * P * H * 2], axis half-widths [T * P], captions [T], trail_epochs, maps."""
    movie = GenericMovie(run, group_order, panels, basis)
    try:
        planes = movie.planes
        limits = [s.limits for s in frame_states(zip(planes.epochs, planes.coords), trail_epochs=movie.trail_epochs)]
        xy = np.stack([planes.coords.real, planes.coords.imag], axis=-1).astype(np.float32)
        return {
            "header": movie.figure_header,
            "epochs": [int(e) for e in planes.epochs],
            "titles": planes.titles,
            "notes": planes.notes,
            "heads": movie.heads.labels,
            "colours": [to_hex(c) for c in head_colours(movie.heads)],
            "coords": [float(f"{v:.5g}") for v in xy.ravel()],
            "limits": [float(f"{v:.5g}") for v in np.concatenate(limits)],
            "captions": [movie.caption(int(e)) for e in planes.epochs],
            "trail_epochs": movie.trail_epochs,
            "maps": _maps(movie),
        }
    finally:
        movie.figure.close()


def page(data: dict, title: str) -> str:
    """The viewer page with `data` inlined (script-safe JSON)."""
    text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    template = (PAGE / "viewer.html").read_text(encoding="utf-8")
    script = (PAGE / "viewer.js").read_text(encoding="utf-8")
    return template.replace("__TITLE__", html.escape(title)).replace("__SCRIPT__", script).replace("__PAYLOAD__", text)


def render_viewer(
    run_path: str | Path,
    out_dir: str | Path,
    group_order: int | None = None,
    panels: list[str] | None = None,
    basis: dict[str, np.ndarray] | None = None,
) -> Path:
    """Write out_dir/viewer.html for `run_path` (atomically); returns its path."""
    out = prepare_out_dir(out_dir)
    with Run(run_path) as run:
        text = page(payload(run, group_order, panels, basis), f"headmovies viewer: {run.path.name}")
    return write_text(out / "viewer.html", text)

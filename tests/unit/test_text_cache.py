"""The text-caching Agg canvas draws the same pixels as matplotlib's own, and renders each glyph
once per sub-pixel position."""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from headmovies.render.core import text_cache
from headmovies.render.core.text_cache import CachedTextCanvas


def frames(canvas_type, n=12):
    """n frames of a figure whose texts move by fractions of a pixel, change, rotate, fade,
    overlap a line, and one of them is drawn without antialiasing."""
    fig = Figure(figsize=(3.2, 2.4), dpi=100)
    canvas = canvas_type(fig)
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    ax.plot([0, 1], [0, 1], lw=3, color="tab:blue")
    moving = fig.text(0.05, 0.9, "", fontsize=11, weight="bold")
    right = ax.text(0.98, 0.02, "", ha="right", fontsize=8, color="#808080", transform=ax.transAxes)
    boxed = ax.text(
        0.02, 0.5, "", fontsize=9, linespacing=1.3, transform=ax.transAxes, bbox=dict(facecolor="white", alpha=0.7)
    )
    turned = ax.text(0.5, 0.5, "", rotation=33, fontsize=10, transform=ax.transAxes)
    mono = fig.text(0.6, 0.92, "", fontsize=9, antialiased=False)
    out = []
    for i in range(n):
        moving.set_position((0.05 + 0.0013 * i, 0.9 - 0.0007 * i))
        moving.set_text(f"epoch {1000 * i:,}")
        right.set_text(f"axes span ±{1.2345 / (i + 1):.3g}")
        boxed.set_text("frequency group ω = 6: 4 heads\n|μ̂_k|/Σ|ρ| ≤ 0.054 (k ≤ 3)" if i % 3 else "empty")
        boxed.set_alpha(0.4 + 0.05 * i)
        turned.set_text(f"turned {i % 4}")
        mono.set_text(f"mono {i}")
        canvas.draw()
        out.append(np.asarray(canvas.buffer_rgba()).copy())
    return out, canvas


def test_cached_text_draws_the_same_pixels_as_agg():
    plain, _ = frames(FigureCanvasAgg)
    cached, canvas = frames(CachedTextCanvas)
    assert all(np.array_equal(a, b) for a, b in zip(plain, cached))
    assert any(not np.array_equal(plain[0], a) for a in plain[1:])  # the texts did change
    r = canvas.get_renderer()
    assert isinstance(r, text_cache.CachedTextRenderer) and len(r._glyphs) > 0


def test_each_glyph_is_rendered_once_per_subpixel_position(monkeypatch):
    fig = Figure(figsize=(2, 1), dpi=100)
    canvas = CachedTextCanvas(fig)
    t = fig.text(0.1, 0.5, "8888", fontsize=10)
    canvas.draw()
    r = canvas.get_renderer()
    rendered = []
    render = r._render
    monkeypatch.setattr(r, "_render", lambda *a: rendered.append(a) or render(*a))
    canvas.draw()  # the same text again: nothing rendered
    assert rendered == []
    t.set_x(0.1 + 3 / 200)  # three whole pixels to the right: the same bitmaps, moved
    canvas.draw()
    assert rendered == []
    t.set_x(0.1 + 0.5 / 200)  # half a pixel: new bitmaps
    canvas.draw()
    assert len(rendered) >= 1


def test_full_caches_are_emptied_and_refilled(monkeypatch):
    monkeypatch.setattr(text_cache, "MAX_GLYPHS", 3)
    monkeypatch.setattr(text_cache, "MAX_LAYOUTS", 2)
    plain, _ = frames(FigureCanvasAgg, n=4)
    cached, canvas = frames(CachedTextCanvas, n=4)
    assert all(np.array_equal(a, b) for a, b in zip(plain, cached))
    r = canvas.get_renderer()
    assert len(r._glyphs) <= 3 and len(r._layouts) <= 2

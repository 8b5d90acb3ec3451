"""An Agg canvas that lays out each string once and rasterises each glyph once (docs/movie.md,
"Encoding"); the frames are the same pixels as matplotlib's own Agg canvas draws.

Text is the costly part of a movie frame: matplotlib's Agg renderer lays out every string
(`FT2Font._layout`) and asks FreeType for every glyph's bitmap (`_render_glyph`) each time a
text is drawn, although a frame's texts repeat from frame to frame (the panels' lines, the
header) or differ only in a few characters (the epoch, the axes span). `CachedTextCanvas` is a
`FigureCanvasAgg` whose renderer keeps

- each string's layout (the glyphs and their offsets), keyed by the string and its font, and
- each glyph's bitmap, keyed by its font, size, rotation, the render flags and its sub-pixel
  position: FreeType places a glyph at 1/64 pixel, so a glyph whose position differs by whole
  pixels has the same bitmap, moved by those pixels.

Every glyph is then blended onto the canvas exactly as matplotlib does (`draw_text_image`,
with the text's colour and alpha), so the pixels do not change; only the work before the
blend is saved. Both caches are bounded (`MAX_LAYOUTS` strings, `MAX_GLYPHS` bitmaps: a few
MB); a full cache is emptied and refilled. Mathtext and TeX go matplotlib's own way.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.ft2font import RenderMode

MAX_LAYOUTS = 4096  # strings whose layout is kept
MAX_GLYPHS = 50_000  # glyph bitmaps kept (each a few hundred bytes)


def _font_key(prop) -> tuple:
    """What of a FontProperties decides which font and size a text is drawn in."""
    return (
        tuple(prop.get_family()),
        prop.get_slant(),
        prop.get_variant(),
        prop.get_weight(),
        prop.get_stretch(),
        prop.get_size_in_points(),
        prop.get_file(),
    )


class CachedTextRenderer(RendererAgg):
    """`RendererAgg` with a layout cache per string and a bitmap cache per glyph (see the
    module docstring); drawing is otherwise matplotlib's."""

    def __init__(self, width, height, dpi):
        super().__init__(width, height, dpi)
        self._layouts: dict[tuple, tuple] = {}
        self._glyphs: dict[tuple, tuple[np.ndarray, int, int]] = {}

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath:
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        flags = get_hinting_flag()
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None
        key = (s, _font_key(prop), self.dpi, flags, features, language)
        glyphs = self._layouts.get(key)
        if glyphs is None:
            font = self._prepare_font(prop)
            items = font._layout(s, flags=flags, features=features, language=language)
            size = prop.get_size_in_points()
            glyphs = tuple((item.ft_object, size, item.glyph_index, 0, 1, item.x, item.y) for item in items)
            if len(self._layouts) >= MAX_LAYOUTS:
                self._layouts.clear()
            self._layouts[key] = glyphs
        self._draw_text_glyphs_and_boxes(gc, x, y, angle, glyphs, [])

    def _draw_text_glyphs_and_boxes(self, gc, x, y, angle, glyphs, boxes):
        """matplotlib's (`RendererAgg._draw_text_glyphs_and_boxes`), each glyph's bitmap taken
        from the cache when it was rendered before at the same sub-pixel position."""
        if boxes:  # mathtext's rules: matplotlib's way
            return super()._draw_text_glyphs_and_boxes(gc, x, y, angle, glyphs, boxes)
        cos = math.cos(math.radians(angle))
        sin = math.sin(math.radians(angle))
        load_flags = get_hinting_flag()
        aa = bool(gc.get_antialiased())
        height = self.height
        cache = self._glyphs
        draw = self._renderer.draw_text_image
        for font, size, glyph_index, slant, extend, dx, dy in glyphs:  # dy is upwards
            X = round(0x40 * (x + dx * cos - dy * sin))  # the glyph's origin in 1/64 px
            Y = round(0x40 * (height - y + dx * sin + dy * cos))  # FreeType's y is upwards
            key = (font.fname, size, self.dpi, glyph_index, slant, extend, angle, load_flags, aa, X & 63, Y & 63)
            hit = cache.get(key)
            if hit is None:
                hit = self._render(font, size, glyph_index, slant, extend, cos, sin, X, Y, load_flags, aa)
                if len(cache) >= MAX_GLYPHS:
                    cache.clear()
                cache[key] = hit
            buffer, left, top = hit
            left += X >> 6
            top += Y >> 6
            # draw_text_image's y is downwards and the bitmap's bottom side
            draw(buffer, left, int(height) - top + buffer.shape[0], 0, gc)

    def _render(self, font, size, glyph_index, slant, extend, cos, sin, X, Y, load_flags, aa) -> tuple[Any, int, int]:
        """One glyph's bitmap at origin (X, Y) (1/64 px), with its left and top edges relative
        to the whole pixel of that origin."""
        font.set_size(size, self.dpi)
        font._set_transform(
            (0x10000 * np.array([[cos, -sin], [sin, cos]]) @ [[extend, extend * slant], [0, 1]]).round().astype(int),
            [X, Y],
        )
        bitmap = font._render_glyph(glyph_index, load_flags, RenderMode.NORMAL if aa else RenderMode.MONO)
        buffer = np.array(bitmap.buffer)  # own copy: FreeType's buffer is reused
        if not aa:
            buffer *= 0xFF
        return buffer, bitmap.left - (X >> 6), bitmap.top - (Y >> 6)


class CachedTextCanvas(FigureCanvasAgg):
    """`FigureCanvasAgg` drawing with a `CachedTextRenderer` (same pixels, text drawn faster)."""

    def get_renderer(self):
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._lastKey != key:
            self.renderer = CachedTextRenderer(w, h, self.figure.dpi)
            self._lastKey = key
        return self.renderer

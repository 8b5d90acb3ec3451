"""Where each part of a panel frame goes, in pixels (docs/movie.md, "Layouts").

Two layouts of the same parts (header, epoch line, panels, timeline strip, legend):

- `wide` (landscape, the movie's default): the header and epoch line on top; the panels in
  their grid on the left; the timeline strip, as tall as the panels, in a column on their
  right; the legend under both, in two columns. The default run's frame is about 1.3 times as
  wide as it is tall, so it fits a laptop screen and a post's column whole.
- `tall` (portrait, the original): the header, the panels, the strip and the legend stacked.

`frame_layout` computes the boxes once; `PanelFigure` places its artists in them. All boxes
are (x0, y0, width, height) in pixels from the bottom left corner of the frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LAYOUTS = ("wide", "tall")
PANEL_PX = {"wide": 360, "tall": 480}  # the default side of a panel in each layout
MIN_PANEL_PX = 220  # text stops shrinking here (half size); smaller panels would not leave it room
STRIP_AXES_PX = 64  # the least height of each axes of the strip (below: the tall layout's strip grows)
LEGEND_CHAR_PX = 7.2  # the mean width of a character of the legend (10 pt DejaVu Sans at 100 dpi), at full text size


def grid_shape(n_panels: int) -> tuple[int, int]:
    """(rows, cols): one row for 1-2 panels, else two rows (filled column by column, so the
    source 000's panels give a column per frequency with QK above OV)."""
    rows = 1 if n_panels <= 2 else 2
    return rows, math.ceil(n_panels / rows)


@dataclass(frozen=True)
class FrameLayout:
    """The pixel boxes of one frame (see the module docstring).

    size: (width, height), both even; fs: text and margin scale (1 = full size); pad: outer
    margin; panels: per panel its (x0, y0) (each panel_px square); strip: the timeline strip's
    box, or None; legend_top: the legend's top edge (y); legend_x: its left edge; legend_w: its
    width; legend_cols: its columns; header_lines: lines of the header."""

    layout: str
    size: tuple[int, int]
    fs: float
    pad: int
    panel_px: int
    panels: list[tuple[int, int]]
    strip: tuple[float, float, float, float] | None
    legend_top: float
    legend_x: float
    legend_w: float
    legend_cols: int
    header_lines: int


def frame_layout(
    layout: str,
    n_panels: int,
    panel_px: int,
    header_lines: int = 1,
    note_lines: int = 0,
    axis_labels: bool = False,
    legend_entries: int = 0,
    legend_cols: int | None = None,
    strip_px: int | None = None,
    legend_chars: int = 0,
) -> FrameLayout:
    """The boxes of a frame of `n_panels` square panels of `panel_px` pixels in `layout`
    ('wide' or 'tall'; ValueError otherwise). `strip_px`: the timeline strip's height in the
    tall layout at full text size (None: no strip; the wide layout's strip is as tall as the
    panels). Text shrinks with small panels (down to half size): from 440 px down in the tall
    layout, from 360 px down in the wide one. `legend_chars`: the longest legend label's length;
    the wide layout's legend takes one column when a label would not fit in half its width."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    rows, cols = grid_shape(n_panels)
    wide = layout == "wide"
    fs = min(1.0, max(0.5, panel_px / (360 if wide else 440)))
    pad, gap, vgap = round(30 * fs), round(44 * fs), round(16 * fs)
    title_h = round((32 + 15 * note_lines) * fs)
    label_h = round(18 * fs) if axis_labels else 0
    header_h = round((54 + 16 * header_lines) * fs)
    grid_w = cols * panel_px + (cols - 1) * gap
    side_w = round(520 * fs) if wide and strip_px is not None else 0
    if legend_cols is None:
        legend_cols = 2 if wide and legend_entries > 1 else (1 if legend_entries <= 3 else 2)
        half = (2 * pad + grid_w + (gap + side_w if side_w else 0)) / 2 - pad
        if wide and (20 + LEGEND_CHAR_PX * legend_chars) * fs > half - 12 * fs:
            legend_cols = 1  # a label as long as half the frame would run into its neighbour
    legend_rows = math.ceil(legend_entries / legend_cols)
    legend_h = round((22 * legend_rows + 14) * fs) if legend_entries else round(12 * fs)
    grid_h = rows * (title_h + panel_px + label_h) + (rows - 1) * vgap
    if wide:
        width = 2 * pad + grid_w + (gap + side_w if side_w else 0)
        height = header_h + grid_h + legend_h
    else:
        strip_h = round(strip_px * fs) if strip_px is not None else 0
        width = 2 * pad + grid_w
        height = header_h + grid_h + strip_h + legend_h
    width, height = width + width % 2, height + height % 2
    panels = []
    for i in range(n_panels):
        r, c = i % rows, i // rows  # column by column
        x0 = pad + c * (panel_px + gap)
        y0 = height - header_h - title_h - r * (title_h + panel_px + label_h + vgap) - panel_px
        panels.append((x0, y0))
    strip: tuple[float, float, float, float] | None = None
    if strip_px is not None and wide:
        left = pad + grid_w + gap + 40 * fs  # room for the axes' labels
        bottom = height - header_h - grid_h  # level with the lowest panels' axis labels
        strip = (left, bottom, width - pad - left - 40 * fs, grid_h - 8 * fs)
    elif strip_px is not None:
        strip = (pad + 34 * fs, legend_h, width - 2 * pad - 84 * fs, round(strip_px * fs))
    return FrameLayout(
        layout,
        (width, height),
        fs,
        pad,
        panel_px,
        panels,
        strip,
        legend_top=legend_h,
        legend_x=pad,
        legend_w=width - 2 * pad,
        legend_cols=legend_cols,
        header_lines=header_lines,
    )

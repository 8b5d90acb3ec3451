"""The orbit movie's layouts (render/core/frame_layout.py): landscape by default, the tall one
on request, and the HTML snippet showing the whole frame in a 1280 x 900 window (Chromium)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from headmovies.cli import main
from headmovies.render.core.frame_layout import frame_layout
from headmovies.render.orbits.movie import OrbitMovie
from headmovies.runfile.reader import Run

from equivariant import equivariant_run

EPOCHS = np.array([0, 25, 50, 75, 100, 200, 300, 400, 500, 600])


@pytest.fixture(scope="module")
def run_path(tmp_path_factory):
    return equivariant_run(tmp_path_factory.mktemp("run") / "layout.h5", EPOCHS, orbit_sizes=(4, 3), extra_heads=25)


def test_default_frame_is_landscape_and_tall_is_portrait(run_path):
    with Run(run_path) as run:
        wide = OrbitMovie(run, panels=["source"])
        tall = OrbitMovie(run, panels=["source"], layout="tall")
    (w, h), (tw, th) = wide.figure.size, tall.figure.size
    wide.close()
    tall.close()
    assert w > 1.2 * h and th > 1.3 * tw  # landscape / portrait
    assert h <= 1100 and w <= 1440  # one laptop screen at 1:1 or close
    assert tw == 1064 and th > 1400  # the tall layout as before (1064 x 1494 with a dead-head line)
    # the wide layout's strip is a column right of the panels, as tall as they are
    lay = frame_layout("wide", 4, 360, header_lines=2, note_lines=2, axis_labels=True, legend_entries=4, strip_px=170)
    x0, _, _, sh = lay.strip
    assert x0 > max(x for x, _ in lay.panels) + 360 and sh > 2 * 360 and lay.legend_cols == 2


def test_bad_layout_is_one_line(run_path, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["movie", str(run_path), "--out", str(tmp_path / "o"), "--layout", "square"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--layout" in err and "Traceback" not in err


@pytest.mark.parametrize("layout", ["wide", "tall"])
def test_snippet_shows_the_whole_frame_at_1280_by_900(run_path, tmp_path, browser, layout):
    out = tmp_path / layout
    args = ["movie", str(run_path), "--out", str(out), "--formats", "mp4,png,html", "--no-progress"]
    assert main([*args, "--layout", layout, "--fps", "8"]) == 0
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1, reduced_motion="reduce")
    try:
        page = ctx.new_page()
        page.goto((out / "orbits.html").as_uri())
        page.wait_for_function("document.querySelector('video').videoWidth > 0", timeout=10000)
        box = page.evaluate(
            "(() => { const r = document.querySelector('video').getBoundingClientRect();"
            " return [r.left, r.top, r.width, r.height, innerWidth, innerHeight]; })()"
        )
        left, top, width, height, iw, ih = box
        assert left >= 0 and top >= 0 and left + width <= iw and top + height <= ih, box
        if layout == "wide":
            assert width > 1000, box  # the landscape frame keeps most of the window's width
        shots = os.environ.get("HEADMOVIES_SHOTS")  # a folder to keep the screenshot in, for a look
        if shots:
            page.screenshot(path=f"{shots}/snippet-{layout}.png")
    finally:
        ctx.close()


@pytest.mark.parametrize("layout, least_px", [("wide", 200), ("tall", 50)])
def test_error_curve_has_its_own_axes_under_the_orbit_bands(run_path, layout, least_px):
    from matplotlib.colors import to_rgb

    from headmovies.render.orbits.movie import EQ_COLOUR

    with Run(run_path) as run:
        mv = OrbitMovie(run, panels=["source"], layout=layout)
        eq = mv.info.metrics["eq_error_pooled"]
    strip = mv.figure.strip
    states = list(mv.states())
    img = mv.figure.render(states[-1])
    assert strip.low is not None and strip.low is not strip.ax
    heights = [a.get_window_extent().height for a in (strip.ax, strip.low)]
    assert min(heights) >= least_px, heights
    assert strip.low.get_yscale() == "log" and strip.ax.get_yscale() == "linear"
    assert [c.get_facecolor()[0][:3] for c in strip.ax.collections]  # the orbit bands, above
    assert to_rgb(strip.low.get_lines()[0].get_color()) == to_rgb(EQ_COLOUR)
    # the error curve is on screen after the orbits are verified (epoch 550, between the last two
    # snapshots: a straight line on the log scale passes their geometric mean)
    px, py = strip.low.transData.transform((550, float(np.sqrt(eq[-2] * eq[-1]))))
    row, col = int(round(img.shape[0] - py)), int(round(px))
    patch = img[row - 2 : row + 3, col - 2 : col + 3].reshape(-1, 3).astype(int)
    darkest = patch[patch.sum(1).argmin()]
    assert darkest.max() < 200 and np.ptp(darkest) < 30, patch  # grey, drawn
    mv.close()


def test_the_strip_shows_no_future(run_path):
    """Before the orbits' verification (epoch 500): no band, no mark, no label of it; the phase
    and schedule marks (planned, from the config) stay. From it: the bands and the labels."""
    config = {"epochs": 600, "early_every": 25, "switch_epoch": 100, "late_every": 100, "refine_start": 200}
    path = equivariant_run(run_path.parent / "future.h5", EPOCHS, orbit_sizes=(4, 3), extra_heads=25, config=config)
    with Run(path) as run:
        mv = OrbitMovie(run, panels=["source"])
    strip, fig = mv.figure.strip, mv.figure
    states = list(mv.states())
    kinds = [(e.label, e.phase) for e in strip.timeline.events]
    assert kinds == [
        ("1 frame = 100 epochs", True),
        ("phase 2", True),
        ("4-orbit verified", False),
        ("3-orbit verified", False),
    ]

    def band_pixel(img):  # inside the stacked bands, at epoch 550 and 2 heads up
        px, py = strip.ax.transData.transform((550, 2.0))
        return img[int(round(img.shape[0] - py)), int(round(px)), :3].astype(int)

    for t, epoch in ((4, 100), (7, 400), (8, 500), (9, 600)):
        img = fig.render(states[t])
        shown = [lab.get_visible() for lab in strip.labels]
        assert shown == [True, True, epoch >= 500, epoch >= 500], (epoch, shown)
        assert [leader.get_visible() for leader in strip.leaders] == shown
        band = band_pixel(img)
        if epoch < 500:
            assert band.min() == 255, band  # white: the future is hidden, not pale
        else:  # the 4-orbit's blue band (C0 at alpha 0.75 on white): the snapshot of 500 holds to 600
            assert band[2] > band[0] + 60, band
    mv.close()


def test_gif_is_wide_enough_for_its_smallest_text(run_path, tmp_path):
    from PIL import Image

    from headmovies.render.orbits.movie import GIF_TEXT_PX, legible_gif_width

    with Run(run_path) as run:
        mv = OrbitMovie(run, panels=["source"])
    smallest = mv.figure.smallest_text_px()
    assert smallest == pytest.approx(8 * 100 / 72)  # the tick labels: 8 pt at 100 dpi
    want = legible_gif_width(mv.figure, 540)
    mv.close()
    w = mv.figure.size[0]
    assert 540 < want < w and want * smallest / w >= GIF_TEXT_PX  # >= 9.5 px after scaling
    args = ["movie", str(run_path), "--out", str(tmp_path), "--formats", "gif", "--no-progress"]
    assert main([*args, "--fps", "4", "--hold", "0"]) == 0
    with Image.open(tmp_path / "orbits.gif") as gif:
        assert gif.size[0] == want


def test_no_sliver_of_a_later_band_at_the_strip_s_right_edge(tmp_path):
    """The veil reaches past the axes' end: a band that ends there leaves no antialiased column."""
    epochs = np.concatenate([np.arange(0, 4001, 25), np.arange(4100, 16001, 100)])
    path = equivariant_run(tmp_path / "long.h5", epochs, orbit_sizes=(4, 3), extra_heads=25)
    with Run(path) as run:
        mv = OrbitMovie(run, panels=["source"])
    strip, fig = mv.figure.strip, mv.figure
    state = next(s for s in mv.states() if s.epoch == 10600)  # the orbits come at the end
    img = fig.render(state)
    bb = strip.ax.get_window_extent()
    rows = slice(int(img.shape[0] - bb.y1) + 2, int(img.shape[0] - bb.y0) - 2)
    edge = img[rows, int(bb.x1) - 3 : int(bb.x1) + 4, :3].astype(int)
    assert (np.ptp(edge, axis=-1) < 12).all(), np.ptp(edge, axis=-1).max()  # greys only, no orbit colour
    mv.close()


def test_each_group_s_qk_panel_shows_its_orbit_spectrum_frame_by_frame(tmp_path):
    """Heads 0-3 end as an exact 4-orbit at w = 6 and heads 4-6 as an exact 3-orbit at w = 8
    (tests/equivariant.py), from random weights: the spectrum in the QK panels (0, 6) and (0, 8)
    starts far from 0 and ends at rounding level; the OV panels of the same groups stay blank."""
    path = equivariant_run(tmp_path / "spectrum.h5", EPOCHS, orbit_sizes=(4, 3))
    with Run(path) as run:
        mv = OrbitMovie(run, panels=["qk:0,6", "qk:0,8", "ov:6,-6", "ov:8,-8"])
    try:
        states = list(mv.states())
        mv.figure.render(states[-1])
        shown = [t.get_text() for t in mv.figure.panel_texts]
        assert shown == [
            "frequency group ω = 6: 4 heads\n|μ̂_k|/Σ|ρ| < 1e-6 (k ≤ 3)",
            "frequency group ω = 8: 3 heads\n|μ̂_k|/Σ|ρ| < 1e-6 (k ≤ 2)",
            "",
            "",
        ]
        first = states[0].panel_text
        assert first is not None and first[2:] == ["", ""]
        assert all("< 1e-6" not in line for line in first[:2])  # random weights: not an orbit yet
        assert "at the last snapshot: frequency group ω = 6: 4 heads, |μ̂_k|/Σ|ρ| < 1e-6 (k ≤ 3); " in mv.caption
    finally:
        mv.close()


def test_a_long_panel_line_is_lifted_clear_of_the_axes_span(run_path):
    """The bottom-left lines stay at the bottom beside 'axes span ±…' while they fit, and rise
    above it (never overlap it, never leave the panel) when their last line would reach it."""
    from headmovies.render.core.panels import CORNER

    long = "frequency group ω = 12: 32 heads\n|μ̂_k|/Σ|ρ| ≤ 0.00013 (k ≤ 3), ≤ 0.00013 (k ≥ 4)"
    short = "frequency group ω = 6: 4 heads\n|μ̂_k|/Σ|ρ| < 1e-6 (k ≤ 3)"
    for layout, px, lifted in (("wide", 360, True), ("wide", 220, True), ("tall", 480, False)):
        with Run(run_path) as run:
            mv = OrbitMovie(run, panels=["qk:0,6", "ov:6,-6"], layout=layout, panel_px=px)
        state = list(mv.states())[-1]
        state.panel_text = [long, short]
        mv.figure.render(state)
        r = mv.figure.fig.canvas.get_renderer()
        for p, was_lifted in ((0, lifted), (1, False)):
            lines = mv.figure.panel_texts[p]
            box, span = lines.get_bbox_patch().get_window_extent(r), mv.figure.scales[p].get_window_extent(r)
            axes = mv.figure.axes[p].get_window_extent(r)
            assert not box.overlaps(span), (layout, px, p)
            assert axes.x0 < box.x0 and box.x1 < span.x1 and box.y1 < axes.y1, (layout, px, p)
            assert (lines.get_position()[1] > CORNER) == was_lifted, (layout, px, p)
        mv.close()


def test_the_gif_width_counts_the_panel_lines_before_any_frame(run_path):
    """Tall, no strip: the 8 pt axes span and panel lines are the frame's smallest text, empty
    until a frame sets them; the GIF width keeps them 9.5 px high (8.5 pt axis labels would
    give 858 px, and 8 pt text 8.9 px)."""
    from headmovies.render.orbits.movie import GIF_TEXT_PX, legible_gif_width

    with Run(run_path) as run:
        mv = OrbitMovie(run, panels=["source"], layout="tall", timeline=False)
    assert mv.figure.smallest_text_px() == pytest.approx(8 * 100 / 72)
    want = legible_gif_width(mv.figure, 540)
    mv.close()
    assert want is not None and want * 8 * 100 / 72 / mv.figure.size[0] >= GIF_TEXT_PX


@pytest.mark.parametrize("blit", [True, False])
def test_a_head_under_the_panel_lines_is_drawn_over_their_box(run_path, blit):
    """A dot in the bottom-left corner keeps its colour: the lines' half-white box lies under
    the dots (blitted frames and a full draw alike), not over them."""
    with Run(run_path) as run:
        mv = OrbitMovie(run, panels=["qk:0,6", "ov:6,-6"], blit=blit)
    state = list(mv.states())[-1]
    assert state.panel_text is not None and state.panel_text[0].startswith("frequency group ω = 6")
    fig = mv.figure
    fig.render(state)
    r = fig.fig.canvas.get_renderer()
    box = fig.panel_texts[0].get_window_extent(r)
    head = int(fig.order[-1])  # drawn last: no other dot over it
    at = fig.axes[0].transData.inverted().transform([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2])
    state.points[0, head] = complex(*at)
    img = fig.render(state)
    x, y = fig.axes[0].transData.transform(at)
    pixel = img[int(round(fig.size[1] - y)), int(round(x)), :3].astype(int)
    want = (np.array(fig.scatters[0].get_facecolors()[-1][:3]) * 255).astype(int)
    assert np.abs(pixel - want).max() < 25, (pixel, want)
    mv.close()

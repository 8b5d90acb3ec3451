"""Trailing-dot panels: trails counted in epochs, eased axis limits that never cut a dot off,
dots drawn where their coordinates say, equal even frame sizes, orbit colours."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from headmovies.render.core.frame_states import frame_states
from headmovies.render.core.panels import PanelFigure, grid_shape
from headmovies.render.orbits.colours import OTHER_COLOUR
from headmovies.render.orbits.head_styles import OrbitLooks
from headmovies.render.orbits.panel_choice import SOURCE_PANELS
from headmovies.render.orbits.stream import orbit_history, panel_coordinates
from headmovies.runfile.reader import Run

from equivariant import equivariant_run


def states(epochs, coords, **kw):
    return list(frame_states(zip(epochs, coords), **kw))


def test_trail_counts_epochs_not_frames_and_starts_exactly_250_back():
    epochs = [0, 25, 50, 75, 100, 125, 150, 175, 200, 225, 250, 275, 300, 400, 500, 600]
    coords = [np.array([[e + 0j]]) for e in epochs]  # one panel, one head at x = epoch
    out = {s.epoch: s for s in states(epochs, coords)}
    s = out[300]  # every 25 epochs: 11 trail points
    assert s.trail.shape == (11, 1, 1) and s.trail_age.tolist() == list(range(250, -1, -25))
    s = out[500]  # every 100 epochs: window starts at 250
    assert s.trail[:, 0, 0].real.tolist() == [250, 275, 300, 400, 500]
    assert s.trail_age.tolist() == [250, 225, 200, 100, 0]
    s = out[600]  # 350 lies between 300 and 400: interpolated
    assert s.trail[:, 0, 0].real.tolist() == pytest.approx([350, 400, 500, 600])
    assert s.trail_age.tolist() == [250, 200, 100, 0]
    assert out[0].trail.shape[0] == 1 and out[0].trail_age.tolist() == [0]
    assert np.all(s.points == coords[-1])


def test_limits_hold_every_dot_and_trail_and_do_not_jitter():
    T = 80
    epochs = np.arange(T) * 25
    rng = np.random.default_rng(0)
    # a radius that alternates 1.0 / 1.3 every frame (jitter), then jumps to 10 at frame 50
    radius = np.where(np.arange(T) % 2, 1.3, 1.0) * np.where(np.arange(T) >= 50, 10.0, 1.0)
    phase = np.exp(1j * rng.uniform(0, 2 * np.pi, (T, 2, 5)))
    coords = radius[:, None, None] * phase * np.r_[1.0, 0.5, 0.3, 0.2, 0.1][None, None, :]
    out = states(epochs, coords, trail_epochs=0, lookahead=12, ease=0.2, margin=1.1)
    lim = np.array([s.limits for s in out])  # [T, P]
    inview = np.abs(coords).max(axis=2)
    assert np.all(lim >= 1.1 * inview - 1e-12)  # every dot on screen, with margin
    # while the radius only alternates the axes do not move at all (the look-ahead max is flat)
    assert np.allclose(lim[:38], lim[0]) and lim[0, 0] == pytest.approx(1.1 * 1.3)
    # the zoom-out anticipates the jump and is smooth: monotone, never more than 1.6x per frame
    ramp = lim[37:51, 0]
    assert np.all(np.diff(ramp) > 0) and np.all(ramp[1:] / ramp[:-1] < 1.6)
    assert lim[49, 0] > 5 * lim[0, 0]  # already wide before the jump


def test_limits_count_trails_and_shrink_smoothly():
    epochs = np.arange(40) * 100
    r = np.where(np.arange(40) < 20, 8.0, 1.0)  # a head falls from r=8 to r=1
    coords = [np.array([[x + 0j]]) for x in r]
    out = states(epochs, coords, trail_epochs=250, lookahead=4, ease=0.3, margin=1.0)
    lim = np.array([s.limits[0] for s in out])
    # trails (250 epochs = 2.5 snapshots) keep r=8 in view two frames after the fall
    assert lim[20] >= 8 and lim[21] >= 8
    tail = lim[22:]
    assert np.all(np.diff(tail) <= 1e-12) and tail[-1] == pytest.approx(1.0, rel=1e-2)
    assert np.all(tail[1:] / tail[:-1] > 0.5)  # eased, not a cut


def test_all_zero_panel_gets_a_unit_scale_then_its_first_real_scale():
    out = states([0, 10], [np.zeros((2, 3), complex)] * 2)
    assert np.all(np.array([s.limits for s in out]) == 1.0)
    c = [np.zeros((1, 1), complex)] * 5 + [np.full((1, 1), 3 + 0j)] * 10  # dots appear at r=3 at frame 5
    lim = [s.limits[0] for s in states(range(0, 150, 10), c, trail_epochs=0, lookahead=3, margin=1.0)]
    assert lim[:2] == [1.0, 1.0] and lim[2:] == pytest.approx([3.0] * 13)  # anticipated, not eased up from 0


def test_epochs_must_increase():
    with pytest.raises(ValueError, match="increase"):
        states([0, 10, 10], [np.zeros((1, 1), complex)] * 3)


def one_state(points, limits, epoch=100):
    from headmovies.render.core.frame_states import FrameState

    pts = np.asarray(points, complex)
    return FrameState(epoch, pts, pts[None], np.zeros(1), np.asarray(limits, float), np.abs(pts).max(1))


@pytest.mark.parametrize("blit", [True, False])
def test_dot_is_drawn_where_its_coordinate_says(blit):
    fig = PanelFigure(["a", "b"], ["#ff0000", "#0000ff"], panel_px=200, blit=blit)
    # panel 0: head 0 (red) at x = +0.5 L; panel 1: head 1 (blue) at y = -0.5 L; others far off-screen
    pts = np.array([[0.5 * 3.0, 99.0], [99j, -0.5j * 7.0]])
    img = fig.render(one_state(pts, [3.0, 7.0])).astype(int)
    for p, colour in ((0, (255, 0, 0)), (1, (0, 0, 255))):
        ax = fig.axes[p]
        x0, y0, x1, y1 = ax.get_window_extent().extents  # pixels, origin bottom left
        H = img.shape[0]
        mask = np.all(np.abs(img - colour) < 40, axis=-1)
        ys, xs = np.nonzero(mask)
        assert len(xs) > 10
        cx, cy = (x0 + x1) / 2, H - (y0 + y1) / 2  # panel centre, image rows
        half = (x1 - x0) / 2
        exp = (cx + 0.5 * half, cy) if p == 0 else (cx, cy + 0.5 * half)
        assert abs(xs.mean() - exp[0]) < 2 and abs(ys.mean() - exp[1]) < 2
    assert fig.axes[1].get_xlim() == (-7.0, 7.0) and fig.axes[1].get_ylim() == (-7.0, 7.0)


@pytest.mark.slow
def test_blitted_frames_match_full_redraws():
    rng = np.random.default_rng(1)
    fast = PanelFigure(
        ["QK", "OV", "QK", "OV"], ["C0"] * 6 + ["C1"] * 2, legend=[("x", "C0")], header="h", panel_px=160, blit=True
    )
    slow = PanelFigure(
        ["QK", "OV", "QK", "OV"], ["C0"] * 6 + ["C1"] * 2, legend=[("x", "C0")], header="h", panel_px=160, blit=False
    )
    epochs = np.arange(12) * 50
    coords = rng.standard_normal((12, 4, 8)) + 1j * rng.standard_normal((12, 4, 8))
    diffs = []
    for s in frame_states(zip(epochs, np.cumsum(coords, 0)), caption=lambda e: f"acc {e}"):
        a, b = fast.render(s), slow.render(s)
        assert a.shape == b.shape == (fast.size[1], fast.size[0], 3)
        diffs.append(np.abs(a.astype(int) - b.astype(int)).mean())
    assert max(diffs) < 0.05  # same pixels up to antialiasing


@pytest.mark.parametrize("n_panels, px", [(1, 101), (2, 97), (3, 120), (4, 480), (5, 64)])
def test_frames_have_one_even_size(n_panels, px):
    fig = PanelFigure([f"p{i}" for i in range(n_panels)], ["C0"] * 3, legend=[("a", "C0")] * n_panels, panel_px=px)
    w, h = fig.size
    assert w % 2 == 0 and h % 2 == 0
    rows, cols = grid_shape(n_panels)
    assert rows * cols >= n_panels and w > cols * px and h > rows * px
    rng = np.random.default_rng(n_panels)
    shapes = set()
    for s in frame_states(
        zip(range(0, 60, 10), rng.standard_normal((6, n_panels, 3)) * 10.0 ** np.arange(6)[:, None, None])
    ):
        img = fig.render(s)
        assert img.dtype == np.uint8
        shapes.add(img.shape)
        rgba = fig.render(s, rgba=True)  # what the movie streams
        assert rgba.shape == (h, w, 4) and np.array_equal(rgba[..., :3], img) and np.all(rgba[..., 3] == 255)
    assert shapes == {(h, w, 3)}


def test_seed_layout_is_a_column_per_frequency():
    assert grid_shape(4) == (2, 2) and grid_shape(2) == (1, 2) and grid_shape(1) == (1, 1) and grid_shape(6) == (2, 3)
    fig = PanelFigure([str(p) for p in SOURCE_PANELS], ["C0"], panel_px=100)
    (a, b, c, d) = [ax.get_position() for ax in fig.axes]
    assert a.x0 == b.x0 < c.x0 == d.x0 and a.y0 > b.y0 and c.y0 > d.y0  # QK above OV, r=10 left


# --- from a run file --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def equi_run(tmp_path_factory):
    return equivariant_run(tmp_path_factory.mktemp("runs") / "equi.h5", np.arange(8) * 50, extra_heads=3)


def test_run_coordinates_end_on_the_polygons(equi_run):
    with Run(equi_run) as run:
        coords = list(panel_coordinates(run, SOURCE_PANELS, chunk=3))
    assert [e for e, _ in coords] == list(range(0, 400, 50))
    X = coords[-1][1]  # [4, 19]
    assert X.shape == (4, 19)
    r10 = X[0, :12]
    assert np.allclose(np.abs(r10), np.abs(r10[0])) and len(np.unique(np.round(np.angle(r10), 6))) == 12
    assert np.abs(X[0, 12:16]).max() < 1e-5 * np.abs(r10).max()  # the 4-orbit sits at 0 for r=10
    assert len(np.unique(np.round(X[2, 12:16], 4))) == 4  # and draws a square for r=6
    assert not np.allclose(coords[0][1], X)


def test_orbit_colours(equi_run):
    """At the final snapshot: largest orbit blue, next orange, others grey; legend entries that
    hold in every panel (each r named)."""
    with Run(equi_run) as run:
        history = orbit_history(run)
        final = next(panel_coordinates(run, SOURCE_PANELS, indices=np.array([len(run) - 1])))[1]
    looks = OrbitLooks(history, list(SOURCE_PANELS), final, 24, 2)
    last = looks.look(len(history) - 1)
    assert [tuple(c) for c in last.face] == [to_rgba("C0")] * 12 + [to_rgba("C1")] * 4 + [to_rgba(OTHER_COLOUR)] * 3
    assert looks.draw_order[:3] == [16, 17, 18] and sorted(looks.draw_order) == list(range(19))
    labels = [label for label, *_ in last.legend]
    assert labels == [
        "12-orbit (heads 0–11): 12-gon where ω = 10, square where ω = 6 · verified since epoch 300",
        "4-orbit (heads 12–15): at 0 where ω = 10, square where ω = 6 · verified since epoch 300",
        "3 other live heads (in no verified orbit)",
    ]
    # outlines: the 12-gon in both r = 10 panels and the square of each orbit in both r = 6 panels
    assert [(p, len(h)) for p, h, _ in looks.outlines] == [(0, 12), (1, 12), (2, 12), (3, 12), (2, 4), (3, 4)]

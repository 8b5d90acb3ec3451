"""The orbit movie over time: each orbit drawn only from the snapshot at which it is verified
(grey, like any other live head, before), dead heads apart, the timeline strip (cursor on a linear epoch axis, event
marks), the frames held at key events, the HTML snippet and its figcaption; the same timeline
for the induction and OV-coherent movies. Hand-built runs with known answers (tests/equivariant.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from headmovies.cli import main
from headmovies.render.core.snippet import html_snippet, mp4_codec
from headmovies.render.core.timeline import Event, Timeline, first_lasting, hold_frames
from headmovies.render.core.timeline_strip import TimelineStrip
from headmovies.render.orbits.colours import DEAD_COLOUR, DEAD_EDGE, OTHER_COLOUR
from headmovies.render.orbits.head_styles import DEAD, OTHER, head_ranges
from headmovies.render.orbits.movie import OrbitMovie
from headmovies.runfile.reader import Run

from equivariant import equivariant_run
from test_encode import probe

# every 25 epochs to 100, then every 100; exactly equivariant from snapshot 8 (epoch 500) on
EPOCHS = np.array([0, 25, 50, 75, 100, 200, 300, 400, 500, 600])
CONFIG = {
    "epochs": 600,
    "early_every": 25,
    "switch_epoch": 100,
    "late_every": 100,
    "refine_start": 200,
    "refine_prune": 0.25,
    "refine_eq_weight": 100.0,
    "refine_ov_bias_weight": 0.01,
}
VERIFIED_AT = 8


@pytest.fixture(scope="module")
def run_path(tmp_path_factory):
    # heads 0-11: a 12-orbit, 12-15: a 4-orbit, 16-18: in no orbit; head 16 dead from snapshot 5 on
    return equivariant_run(
        tmp_path_factory.mktemp("run") / "timeline.h5", EPOCHS, extra_heads=3, config=CONFIG, dead_heads=(16,)
    )


@pytest.fixture(scope="module")
def movie(run_path):
    with Run(run_path) as run:
        mv = OrbitMovie(run, panels=["source"], panel_px=240, fps=8, event_hold_s=1.0)
        states = list(mv.states())
        yield mv, states
        mv.close()


def pixel(img: np.ndarray, ax, x: float, y: float) -> np.ndarray:
    """Mean RGB of the 3x3 pixels at data point (x, y) of `ax` in a rendered frame."""
    px, py = ax.transData.transform((x, y))
    row, col = int(round(img.shape[0] - py)), int(round(px))
    return img[row - 1 : row + 2, col - 1 : col + 2, :3].reshape(-1, 3).mean(0)


def test_orbit_dated_by_the_check_of_every_snapshot(movie):
    mv, _ = movie
    assert mv.history.epochs.tolist() == EPOCHS.tolist()
    assert [(t.size, t.heads, t.since) for t in mv.looks.tracks] == [
        (12, tuple(range(12)), 500),
        (4, (12, 13, 14, 15), 500),
    ]
    assert mv.looks.tracks[0].verified.tolist() == [False] * VERIFIED_AT + [True] * 2


def test_head_is_filled_in_its_orbit_colour_exactly_from_verification_and_grey_before(movie):
    mv, states = movie
    fig = mv.figure
    grey = to_rgba(OTHER_COLOUR)
    for t in range(len(states)):
        look = mv.looks.look(t)
        before = t < VERIFIED_AT
        live_other = 17  # a live head in no orbit: what an orbit's head looks like before its verification
        assert tuple(look.face[live_other]) == grey and look.size[live_other] == OTHER["size"]
        for heads, colour in ((range(12), "C0"), (range(12, 16), "C1")):
            for h in heads:
                assert tuple(look.face[h]) == (grey if before else to_rgba(colour)), (t, h)
                assert look.size[h] == look.size[live_other] if before else look.size[h] > OTHER["size"]
                assert tuple(look.trail[h]) == (grey if before else to_rgba(colour))
        assert look.outlines.tolist() == [not before] * len(mv.looks.outlines)
        label, face, *_ = look.legend[0]
        # before: the orbit's legend slot is blank (no word, no marker); after: dated
        assert (label, face[3]) == ("", 0.0) if before else label.endswith("· verified since epoch 500")
        assert look.legend[-2][0].startswith(f"{3 + 16 * before - (t >= 5)} other live head")
    # in the pixels: head 0's dot in the r = 10 QK panel (a 12-gon vertex) turns from grey to full blue
    before = fig.render(states[VERIFIED_AT - 1])
    p0 = states[VERIFIED_AT - 1].points[0, 0]
    pale = pixel(before, fig.axes[0], p0.real, p0.imag)
    after = fig.render(states[VERIFIED_AT])
    p1 = states[VERIFIED_AT].points[0, 0]
    full = pixel(after, fig.axes[0], p1.real, p1.imag)
    assert np.abs(full - 255 * np.array(to_rgba("C0")[:3])).max() < 25, full
    assert np.abs(pale - 255 * np.array(grey[:3])).max() < 25, pale
    # the polygon outline is drawn from that snapshot on, through the 12 vertices
    line = fig.outline_lines[0]
    assert line.get_visible() and len(line.get_xdata()) == 13


def test_dead_heads_look_unlike_live_heads_in_no_orbit(movie):
    mv, _ = movie
    for t in (4, 5, 9):
        look = mv.looks.look(t)
        dead = t >= 5  # head 16's W_O is zero from snapshot 5
        assert (tuple(look.face[16]) == to_rgba(DEAD_COLOUR)) == dead
        assert tuple(look.face[17]) == to_rgba(OTHER_COLOUR) and look.size[17] == OTHER["size"]
        if dead:
            assert look.size[16] == DEAD["size"] < OTHER["size"] and tuple(look.edge[16]) == to_rgba(DEAD_EDGE)
        labels = [label for label, *_ in look.legend]
        assert labels[-2:] == (
            [
                f"{(2 if dead else 3) + 16 * (t < VERIFIED_AT)} other live heads (in no verified orbit)",
                f"{1 if dead else 0} dead head{'' if dead else 's'} (OV circuit < 1 % of the largest head's)",
            ]
        )


def test_events_and_held_frames_are_where_said(movie):
    mv, _ = movie
    ev = [(e.epoch, e.label, e.hold) for e in mv.timeline.events]
    assert ev == [
        (100, "1 frame = 100 epochs", False),
        (200, "phase 2, pruning, OV-bias penalty", True),
        (500, "12-orbit verified", True),
        (500, "4-orbit verified", True),
    ]
    assert mv.timeline.events[1].text == (
        "epoch 200: phase 2 starts: heads with OV below 25% of the largest are "
        "pruned (1 head dead after it); the equivariance weight ramps to 100; the OV-bias "
        "penalty (μ = 0.01) starts"
    )
    # 1 s at 8 fps: 8 extra copies of the frames of epochs 200 and 500 (once, for two events)
    assert mv.extra.tolist() == [0, 0, 0, 0, 0, 8, 0, 0, 8, 0]
    shown = mv.frame_epochs()
    assert len(mv) == 26 and shown.tolist() == [0, 25, 50, 75, 100] + [200] * 9 + [300, 400] + [500] * 9 + [600]
    frames = [f.copy() for f in mv.frames()]  # one per snapshot; write_movie repeats them by mv.extra
    assert len(frames) == 10
    assert not np.array_equal(frames[5], frames[6])  # epoch 200 -> 300


def dark_columns(img: np.ndarray, ax) -> np.ndarray:
    """Columns of `ax`'s box where at least 80 % of the rows are near-black (the cursor)."""
    bb = ax.get_window_extent()
    rows = slice(int(img.shape[0] - bb.y1) + 2, int(img.shape[0] - bb.y0) - 2)
    cols = slice(int(bb.x0), int(bb.x1) + 2)
    dark = img[rows, cols, :3].max(-1) < 80
    return np.flatnonzero(dark.mean(0) > 0.8) + cols.start


def test_timeline_cursor_sits_at_the_epoch_on_a_linear_axis(movie):
    mv, states = movie
    fig = mv.figure
    ax = fig.strip.ax
    assert ax.get_xlim() == (0, 600) and ax.get_xscale() == "linear"
    bb = ax.get_window_extent()
    for t in (1, 4, 5, 8, 9):
        img = fig.render(states[t])
        cols = dark_columns(img, ax)
        assert len(cols) and fig.strip.cursor_x() == EPOCHS[t]
        expected = bb.x0 + EPOCHS[t] / 600 * bb.width
        assert abs(cols.mean() - expected) <= 1.5, (t, cols, expected)
        # the banner tells the event for a few snapshots from its own
        text = fig.strip.banner.get_text().replace("\n", " ")  # wrapped to the strip's width
        if t in (8, 9):
            assert text.startswith("epoch 500: heads 12–15 form a verified 4-orbit")
        if t == 1:
            assert text == ""


def test_event_labels_do_not_overlap():
    fig = Figure(figsize=(10, 2), dpi=100)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    tl = Timeline(
        0,
        16000,
        [
            Event(4000, "1 frame = 100 epochs", hold=False),
            Event(10000, "phase 2, pruning"),
            Event(10200, "2-orbit verified", phase=False),
            Event(10800, "4-orbit verified", phase=False),
        ],
    )
    strip = TimelineStrip(fig, (40, 0, 900, 150), tl)
    boxes = [t.get_window_extent() for t in strip.labels]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), (strip.labels[i].get_text(), strip.labels[j].get_text())


def test_a_leader_that_must_cross_a_lower_label_passes_behind_it():
    """In a narrow strip (--panel-px 220) the phase label at 10,000 covers epoch 10,700, where the
    4-orbit's leader rises: the label hides the leader (no leader-blue pixel inside its box)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(5.4, 1.6), dpi=100)
    canvas = FigureCanvasAgg(fig)
    tl = Timeline(
        0,
        16000,
        [Event(10000, "phase 2, OV-bias penalty"), Event(10700, "4-orbit verified", phase=False, colour="#0000ff")],
    )
    strip = TimelineStrip(fig, (40, 0, 450, 150), tl, animated=False)
    canvas.draw()
    img = np.asarray(canvas.buffer_rgba())[..., :3].astype(int)
    phase, orbit = strip.labels
    box = phase.get_window_extent()
    assert orbit.get_window_extent().y0 > box.y0  # the 4-orbit label sits a row higher
    x = strip.ax.transData.transform((10700, 0))[0]
    assert box.x0 < x < box.x1  # so its leader must cross the phase label
    H = img.shape[0]
    rows = slice(int(H - box.y1) + 1, int(H - box.y0) - 1)
    cols = slice(int(x) - 1, int(x) + 2)

    def blue(px):  # the leader, alpha-blended
        return px[..., 2] - px[..., 0] > 60

    assert not blue(img[rows, cols]).any()
    below = slice(int(H - box.y0) + 3, int(H - box.y0) + 8)  # between the label and the axes it shows
    assert blue(img[below, cols]).any()


def test_hold_frames_and_first_lasting():
    epochs = np.array([0, 10, 20, 30, 40])
    events = [Event(15, "a"), Event(20, "b"), Event(40, "c", hold=False), Event(99, "late")]
    assert hold_frames(epochs, events, fps=10, hold_s=0.5).tolist() == [0, 0, 5, 0, 0]
    assert first_lasting(epochs, np.array([1, 0, 1, 1, 1], bool)) == 20
    assert first_lasting(epochs, np.array([1, 1, 1, 1, 0], bool)) is None
    assert first_lasting(epochs, np.ones(5, bool)) == 0
    assert head_ranges([7, 0, 1, 2, 3, 9, 10]) == "0–3, 7, 9, 10"


@pytest.mark.slow
def test_movie_command_snippet_and_frame_count(run_path, tmp_path):
    out = tmp_path / "movie"
    assert (
        main(
            [
                "movie",
                str(run_path),
                "--out",
                str(out),
                "--panels",
                "seed",
                "--fps",
                "8",
                "--hold",
                "0.5",
                "--event-hold",
                "1",
                "--panel-px",
                "220",
                "--no-progress",
            ]
        )
        == 0
    )
    assert probe(out / "orbits.mp4")[1] == 10 + 16 + 4  # snapshots + event holds + end hold
    html = (out / "orbits.html").read_text()
    video = re.search(r"<video[^>]*>", html).group(0)
    assert "controls" in video and "autoplay" not in video and 'poster="orbits.png"' in video
    assert html.index('src="orbits.mp4"') < html.index('src="orbits.webm"')
    codec = mp4_codec(out / "orbits.mp4")
    assert re.fullmatch(r"avc1\.64[0-9A-F]{4}", codec) and f'codecs="{codec}"' in html  # H.264 High profile
    assert 'matchMedia("(prefers-reduced-motion: reduce)")' in html and "video.play()" in html
    cap = re.search(r"<figcaption[^>]*>(.*)</figcaption>", html, re.S).group(1)
    assert cap.startswith("19 heads of one attention layer")
    assert re.search(
        r"At epoch 500 heads 0–11 form a verified 12-orbit \(worst error [^)]+\); heads 12–15 form a "
        r"verified 4-orbit \(worst error [^)]+\)\. Before its verification an orbit&#x27;s heads are grey, "
        r"like every other live head",
        cap,
    )  # in the words of the timeline's events, in epoch order
    assert "At epoch 200 phase 2 starts: heads with OV below 25% of the largest are pruned" in cap


def test_snippet_without_poster_or_mp4():
    html = html_snippet("m<1>", (100, 60), ["webm"], poster=False, caption="a < b & c")
    assert "poster" not in html and "mp4" not in html and 'src="m&lt;1&gt;.webm"' in html
    assert "<figcaption" in html and "a &lt; b &amp; c" in html
    assert "<figcaption" not in html_snippet("m", (100, 60), ["mp4"], poster=True)


def test_bad_event_hold_is_one_line(run_path, tmp_path, capsys):
    assert main(["movie", str(run_path), "--out", str(tmp_path / "o"), "--event-hold", "nan"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "--event-hold" in err and "\n" not in err


def test_figcaption_of_an_unfinished_run_says_so(tmp_path):
    import h5py

    from headmovies import runfile
    from headmovies.render.orbits.captions import figcaption
    from headmovies.render.orbits.stream import RunInfo

    path = equivariant_run(tmp_path / "live.h5", EPOCHS, config={**CONFIG, "epochs": 1200})
    with Run(path) as run:
        done = figcaption(RunInfo.of(run), 16, None, [], [], 24)
    with h5py.File(path, "a") as f:
        del f[runfile.COMPLETE]  # as a live or killed run leaves it
    with Run(path) as run:
        assert not run.complete
        live = figcaption(RunInfo.of(run), 16, None, [], [], 24)
    assert "trained 600 epochs so far (of 1,200; the run is unfinished)" in live and "At the last snapshot: " in live
    assert "so far" not in done and "At the end: " in done


def test_an_imposed_orbit_run_says_so_in_header_caption_and_timeline(tmp_path):
    from headmovies.render.orbits.captions import figcaption, header_text
    from headmovies.render.orbits.events import training_events
    from headmovies.render.orbits.stream import RunInfo

    path = equivariant_run(tmp_path / "imposed.h5", EPOCHS, config={**CONFIG, "impose_orbit_at": 400})
    with Run(path) as run:
        info = RunInfo.of(run)
    assert "orbits imposed at epoch 400 (projected, not emergent)" in header_text(info, 24, 2, 16, 250)
    caption = figcaption(info, 16, None, [], [], 24)
    assert "An experiment: orbits imposed at epoch 400" in caption and "At epoch 400 orbits imposed:" in caption
    assert [e.label for e in training_events(info.config) if e.epoch == 400] == ["orbits imposed"]
    plain = equivariant_run(tmp_path / "plain.h5", EPOCHS, config=CONFIG)
    with Run(plain) as run:
        info = RunInfo.of(run)
    assert "imposed" not in header_text(info, 24, 2, 16, 250) + figcaption(info, 16, None, [], [], 24)


def test_an_orbit_that_does_not_last_is_counted_in_the_strip(tmp_path):
    """Heads 0-3 (a 4-orbit) and 4-6 (a 3-orbit) are exact from snapshot 3 (epoch 300); at the
    last snapshot the 3-orbit's W_Q is pulled apart. So the 4-orbit is the only final orbit, and
    heads 4-6 are in a verified orbit at epochs 300-500 only: the strip stacks 3 heads on the 4
    there, in the colour that draws them, and the left axis makes room for all 7."""
    from equivariant import NAMES, equivariant_weights, write_run

    epochs = np.arange(0, 601, 100)
    target = dict(zip(NAMES, equivariant_weights(24, 2, (4, 3), seed=3)))
    rng = np.random.default_rng(4)
    start = {k: v + 0.5 * rng.standard_normal(v.shape) * np.abs(v).mean() for k, v in target.items()}
    start["W_E"], start["W_U"] = target["W_E"], target["W_U"]
    snaps = [start] * 3 + [target] * 3 + [{**target, "W_Q": target["W_Q"].copy()}]
    snaps[-1]["W_Q"][4:7] += rng.standard_normal(snaps[-1]["W_Q"][4:7].shape)
    path = write_run(tmp_path / "transient.h5", epochs, snaps)
    with Run(path) as run:
        mv = OrbitMovie(run, panels=["source"], panel_px=240)
    try:
        assert [(t.size, t.heads, t.since) for t in mv.looks.tracks] == [(4, (0, 1, 2, 3), 300)]
        curves = {c.label: c for c in mv.timeline.curves}
        assert curves["4-orbit"].values.tolist() == [0, 0, 0, 4, 4, 4, 4]
        late = curves["verified orbits that do not last"]
        assert late.values.tolist() == [0, 0, 0, 3, 3, 3, 0] and late.stack and late.fill
        assert late.colour == mv.looks.transient_colour
        assert mv.timeline.left_lim == (0, 7)  # min(7 heads, 1.25 x 7), not 1.25 x 4 = 5 (the final orbit alone)
    finally:
        mv.close()
    # both orbits pulled apart at the end: no final orbit, the strip has the transient band alone,
    # and the legend says 'a verified orbit' (no 'another': there is no final orbit to differ from)
    snaps[-1]["W_Q"][:4] += rng.standard_normal(snaps[-1]["W_Q"][:4].shape)
    with Run(write_run(tmp_path / "none_final.h5", epochs, snaps)) as run:
        mv = OrbitMovie(run, panels=["source"], panel_px=240)
    try:
        assert mv.looks.tracks == [] and [c.label for c in mv.timeline.curves] == ["verified orbits that do not last"]
        assert mv.timeline.curves[0].values.tolist() == [0, 0, 0, 7, 7, 7, 0] and mv.timeline.left_lim == (0, 7)
        assert mv.looks.look(3).legend[0][0] == "7 heads in a verified orbit"
    finally:
        mv.close()


def test_heads_of_a_final_orbit_in_another_orbit_earlier_are_coloured_as_the_strip_counts_them(tmp_path):
    """Heads 0-3 and 4-6 are exact 4- and 3-orbits at epochs 300-400; from epoch 500 the same
    seven heads form other orbits, 0-2 and 3-6, the final ones. At 300-400 every head belongs to
    a final orbit not yet verified and to a verified orbit that does not last: the strip counts
    all 7 there, and the panels draw them in that orbit's colour (they were grey, and the legend
    said '0 heads in another verified orbit' and '7 other live heads (in no verified orbit)')."""
    from equivariant import NAMES, equivariant_weights, write_run

    epochs = np.arange(0, 601, 100)
    first = dict(zip(NAMES, equivariant_weights(24, 2, (4, 3), seed=3)))
    final = dict(zip(NAMES, equivariant_weights(24, 2, (3, 4), seed=3)))  # same W_E, W_U (same seed)
    rng = np.random.default_rng(4)
    start = {k: v + 0.5 * rng.standard_normal(v.shape) * np.abs(v).mean() for k, v in first.items()}
    start["W_E"], start["W_U"] = first["W_E"], first["W_U"]
    path = write_run(tmp_path / "overlap.h5", epochs, [start] * 3 + [first] * 2 + [final] * 2)
    with Run(path) as run:
        mv = OrbitMovie(run, panels=["source"], panel_px=240)
    try:
        looks = mv.looks
        assert [(t.size, t.heads, t.since) for t in looks.tracks] == [(4, (3, 4, 5, 6), 500), (3, (0, 1, 2), 500)]
        curves = {c.label: c.values.tolist() for c in mv.timeline.curves}
        assert curves["4-orbit"] == [0, 0, 0, 0, 0, 4, 4] and curves["3-orbit"] == [0, 0, 0, 0, 0, 3, 3]
        assert curves["verified orbits that do not last"] == [0, 0, 0, 7, 7, 0, 0]
        assert [looks.state(t).tolist() for t in (2, 3, 5)] == [[2] * 7, [4] * 7, [3] * 7]
        labels = [slot[0] for slot in looks.look(3).legend]
        assert labels == ["", "", "7 heads in another verified orbit", "0 other live heads (in no verified orbit)"]
        assert np.allclose(looks.look(3).face, to_rgba(looks.transient_colour))
    finally:
        mv.close()

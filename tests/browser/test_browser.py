"""The viewer, the live view and the movie's HTML snippet in a real browser: Playwright driving
Debian's Chromium (/usr/bin/chromium, or $HEADMOVIES_CHROMIUM; `make test` installs it).
Playwright cannot download its own browsers here, so it is pointed at the system one (the
`browser` fixture, tests/conftest.py)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import sigint_as_at_a_terminal
from matplotlib.image import imread

from headmovies.render.core.circuits import centre_qk, qk_circuit
from headmovies.render.core.encode import encode
from headmovies.render.core.frame_states import frame_states
from headmovies.render.core.projections import irrep_coordinate
from headmovies.render.orbits.check import format_error
from headmovies.render.orbits.stream import orbit_history, panel_coordinates
from headmovies.render.orbits.viewer import dequantise_rows, make_viewer, unpack
from headmovies.runfile.reader import Run

from equivariant import NAMES, equivariant_run

EPOCHS = np.arange(0, 501, 25)  # 21 snapshots; the orbits are exact and verified from index 19
ORBIT_12 = "12-orbit (heads 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)"


@pytest.fixture
def open_page(browser):
    """open_page(url, **context options) -> (page, errors): JavaScript errors are collected."""
    contexts = []

    def opener(url, **options):
        options = {"viewport": {"width": 1280, "height": 1000}, **options}
        ctx = browser.new_context(device_scale_factor=1, **options)
        contexts.append(ctx)
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(url)
        return page, errors

    yield opener
    for ctx in contexts:
        ctx.close()


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    """(run path, viewer result): a hand-built run with a 12- and a 4-orbit plus 4 random heads."""
    folder = tmp_path_factory.mktemp("viewer")
    run = equivariant_run(folder / "eq.h5", EPOCHS, orbit_sizes=(12, 4), extra_heads=4)
    return run, make_viewer(run, folder / "out")


def ready(page) -> None:
    page.wait_for_selector("body[data-state=ready]", timeout=15000)


def pixel(page, x: float, y: float) -> np.ndarray:
    """RGB (0..255) of the screen pixel at page coordinates (x, y)."""
    png = page.screenshot(clip={"x": int(x), "y": int(y), "width": 1, "height": 1})
    return np.round(imread(io.BytesIO(png))[0, 0, :3] * 255)


def isolated(dots: list[dict], kinds=("orbit", "other"), room: float = 14.0) -> list[dict]:
    """Dots of the given kinds with no other dot within `room` pixels."""
    out = []
    for d in dots:
        others = [math_hypot(d, e) for e in dots if e is not d]
        if d["kind"] in kinds and min(others) >= room:
            out.append(d)
    return out


def math_hypot(a: dict, b: dict) -> float:
    return float(np.hypot(a["px"] - b["px"], a["py"] - b["py"]))


def hex_rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], float)


# --- the viewer from file:// -------------------------------------------------------------------


def test_viewer_opens_from_file_offline(viewer, open_page):
    _run, result = viewer
    requests = []
    page, errors = open_page("about:blank", offline=True)
    page.on("request", lambda r: requests.append(r.url))
    page.goto(result.path.as_uri())
    ready(page)
    assert errors == [] and all(u.startswith(("file://", "data:")) for u in requests), (errors, requests)
    assert page.inner_text("#epoch") == "epoch 0" and "snapshot 1 of 21" in page.inner_text("#caption")
    assert page.locator(".panel canvas").count() == 4
    legend = page.inner_text("#legend")
    assert f"{ORBIT_12}: not yet verified: from epoch 475" in legend and "20 live heads in no verified orbit" in legend
    box = page.locator(".panel canvas").first.bounding_box()
    shot = imread(io.BytesIO(page.screenshot(clip=box)))[..., :3]
    assert (shot < 0.9).any(axis=-1).mean() > 0.002  # dots and trails drawn, not a blank square


def test_the_frequency_groups_panel_shows_the_python_spectrum(viewer, open_page):
    """At the last snapshot the panel lists every frequency group of the orbit check's report
    with its orbit spectrum to 3 decimals (the exact orbits' groups at 0.000)."""
    from headmovies.render.orbits.check_run import run_report
    from headmovies.runfile.reader import Run

    run, result = viewer
    with Run(run) as r:
        report = run_report(r)
    page, errors = open_page(result.path.as_uri())
    ready(page)
    assert "|μ̂_k|/Σ|ρ|" in page.inner_text("#groups")
    for _ in range(len(EPOCHS) - 1):
        page.keyboard.press("ArrowRight")
    assert page.inner_text("#epoch") == f"epoch {EPOCHS[-1]:,}"
    assert page.locator("#groups li").count() == len(report.groups)
    for g in report.groups:
        text = page.inner_text(f"#groups li[data-omega='{g.omega}'] .spectrum")
        assert text.endswith(": " + " ".join(f"{v:.3f}" for v in g.spectrum)), (g.omega, text)
    assert errors == []


def test_viewer_fits_one_1440_by_900_screen_in_plain_words(viewer, open_page):
    """Panels on the left, the timeline and legend in a column on their right, all above the
    fold; the first line in plain words, from Python; the timeline's orbit marks from the
    payload's events (render/orbits/events.py), not worded in the page."""
    _run, result = viewer
    page, errors = open_page(result.path.as_uri(), viewport={"width": 1440, "height": 900})
    ready(page)
    boxes = [page.locator(".panel").nth(i).bounding_box() for i in range(4)]
    timeline = page.locator("#timeline").bounding_box()
    legend = page.locator("#legend").bounding_box()
    right = max(b["x"] + b["width"] for b in boxes)
    assert all(b["y"] + b["height"] <= 900 for b in boxes), boxes  # every panel on screen
    assert timeline["y"] + timeline["height"] <= 400 and legend["y"] + legend["height"] <= 900
    assert timeline["x"] > right and legend["x"] > right  # the right half is used
    assert timeline["width"] >= 600
    meta = page.evaluate("JSON.parse(document.getElementById('payload').textContent).meta")
    line = page.inner_text("#runline")
    assert line == meta["headline"] and line.startswith("eq.h5: 20 attention heads learning addition mod 24")
    assert not re.search(r">=|seed|panel of order|power", line), line
    verified = [e for e in meta["events"] if e["result"]]
    assert [(e["epoch"], e["short"]) for e in verified] == [(475, "12-orbit verified"), (475, "4-orbit verified")]
    assert verified[0]["label"].startswith("heads 0–11 form a verified 12-orbit (worst error")
    assert "epoch 475: heads 0–11 form a verified 12-orbit" in page.inner_text("#timeline-note")
    assert errors == []


def test_scrubbing_puts_each_dot_where_the_python_projection_does(viewer, open_page):
    run, result = viewer
    page, errors = open_page(result.path.as_uri())
    ready(page)
    with Run(run) as r:
        coords = [c for _, c in panel_coordinates(r, result.panels)]  # [T] of [P, H]
        limits = [s.limits for s in frame_states(panel_coordinates(r, result.panels))]  # the movie's axes
        history = orbit_history(r)
    for t in (12, 20):
        page.fill("#scrubber", str(EPOCHS[t] + 10))  # between snapshots: the one at or before
        assert page.get_attribute("#epoch", "data-epoch") == str(EPOCHS[t])
        for p in range(len(result.panels)):
            got = page.evaluate(f"headmovies.dots({p})")
            assert np.isclose(got["limit"], limits[t][p], rtol=1e-5)
            half, scale = got["size"] / 2, got["size"] / 2 / limits[t][p]
            for d in got["dots"]:
                z = coords[t][p, d["head"]]
                assert abs(d["x"] - z.real) <= 1e-5 * limits[t][p] and abs(d["y"] - z.imag) <= 1e-5 * limits[t][p]
                assert abs(d["px"] - (got["left"] + half + z.real * scale)) < 0.01
                assert abs(d["py"] - (got["top"] + half - z.imag * scale)) < 0.01
            # colours follow the orbit check of this snapshot: orbit heads only once verified
            kinds = [d["kind"] for d in got["dots"]]
            verified = history.in_orbit[t]
            assert kinds == ["orbit" if verified[h] else "hint" if h < 16 else "other" for h in range(20)]
        # the dot is drawn there: the pixel at an isolated dot's centre has its colour
        got = page.evaluate("headmovies.dots(0)")
        for d in isolated(got["dots"])[:3]:
            colour = "#1f77b4" if d["head"] < 12 else "#ff7f0e" if d["head"] < 16 else "#a0a0a0"
            assert np.abs(pixel(page, d["px"], d["py"]) - hex_rgb(colour)).max() <= 8, d
    assert errors == []


def test_play_pause_keys_and_the_timeline_move_through_epochs(viewer, open_page):
    _run, result = viewer
    page, errors = open_page(result.path.as_uri())
    ready(page)

    def epoch():
        return int(page.get_attribute("#epoch", "data-epoch"))

    page.select_option("#speed", "250")
    page.click("#play")
    page.wait_for_function("Number(document.getElementById('epoch').dataset.epoch) >= 100", timeout=5000)
    page.click("#play")  # pause
    stopped = epoch()
    time.sleep(0.5)
    assert epoch() == stopped < 500 and page.inner_text("#play") == "▶ play"
    page.keyboard.press("ArrowRight")
    assert epoch() == stopped + 25
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert epoch() == stopped - 25
    timeline = page.locator("#timeline")  # click at 3/4 of its epoch axis (44 px .. width - 16)
    width = timeline.bounding_box()["width"]
    timeline.click(position={"x": 44 + 0.75 * (width - 60) + 1, "y": 80})
    assert epoch() == 375
    assert errors == []


def test_hovering_a_head_shows_that_head(viewer, open_page):
    run, result = viewer
    page, errors = open_page(result.path.as_uri())
    ready(page)
    page.fill("#scrubber", str(EPOCHS[20]))
    dots = page.evaluate("headmovies.dots(0)")["dots"]
    target = next(d for d in isolated(dots, kinds=("orbit",)) if d["head"] < 12)
    page.mouse.move(target["px"] + 2, target["py"] - 1)
    h = target["head"]
    assert page.get_attribute("#head-info", "data-head") == str(h)
    text = page.inner_text("#head-info")
    with Run(run) as r:
        history = orbit_history(r)
        w = r.weights(20, list(NAMES))
    assert text.startswith(f"head {h}\n") and f"{ORBIT_12}: verified since epoch 475" in text
    assert f"worst-shift match error {format_error(history.head_error[20, h])} " in text
    values = [0.0197, 0.01996, 0.02, 0.02003, 0.0199996, 0.0199999999, 0.020000001, 6e-4, 3e-7]
    assert page.evaluate(f"{values}.map(headmovies.formatError)") == [format_error(x) for x in values]  # as the check
    # the QK heatmap: the cell of the largest |M[a, b]| is the colour map's end of that sign
    M = centre_qk(qk_circuit(w["W_E"], w["W_Q"], w["W_K"]))[h]
    a, b = np.unravel_index(np.argmax(np.abs(M)), M.shape)
    cell = page.evaluate("document.querySelector('#head-info canvas').width") / 24
    rgb = page.evaluate(
        f"Array.from(document.querySelector('#head-info canvas').getContext('2d')"
        f".getImageData({b * cell + cell / 2}, {a * cell + cell / 2}, 1, 1).data)"
    )
    assert rgb[:3] == ([103, 0, 31] if M[a, b] > 0 else [5, 48, 97])
    # moving away forgets it; a click keeps it
    page.mouse.move(5, 5)
    assert page.get_attribute("#head-info", "data-head") == ""
    page.mouse.click(target["px"], target["py"])
    page.mouse.move(5, 5)
    assert page.get_attribute("#head-info", "data-head") == str(h)
    assert errors == []


def test_a_plane_chosen_in_the_page_matches_the_python_projection(viewer, open_page):
    run, result = viewer
    page, errors = open_page(result.path.as_uri())
    ready(page)
    page.select_option("#plane-circuit", "qk")
    page.fill("#plane-u", "1")
    page.fill("#plane-v", "3")
    page.click("#plane-add")
    page.fill("#scrubber", str(EPOCHS[12]))
    assert page.evaluate("headmovies.panels()")[-1] == {"circuit": "qk", "u": 1, "v": 3, "custom": True}
    got = page.evaluate("headmovies.dots(4)")["dots"]
    js = np.array([d["x"] + 1j * d["y"] for d in got])
    bound = np.array([d["bound"] for d in got])
    payload = json.loads(
        re.search(r'id="payload" type="application/json">(.*?)</script>', result.path.read_text(), re.S).group(1)
    )
    arrays = unpack(payload["chunks"][0]["arrays"])
    rows = np.add.accumulate(arrays["rows"], axis=0, dtype=np.int8)[12]
    codes = np.add.accumulate(arrays["codes"], axis=0, dtype=np.int16)[12]
    A = dequantise_rows(rows, codes)  # [H, 4, 13, d]
    assert np.allclose(js, (A[:, 0, 1] * A[:, 1, 3]).sum(-1) / 24, rtol=1e-9, atol=1e-12)  # the page's arithmetic
    with Run(run) as r:
        w = r.weights(12, list(NAMES))
    exact = irrep_coordinate(centre_qk(qk_circuit(w["W_E"], w["W_Q"], w["W_K"])), 1, 3)
    assert np.all(np.abs(js - exact) <= bound * (1 + 1e-9))  # within the ring the page draws
    assert np.median(bound / np.abs(exact)) < 0.05
    page.fill("#plane-v", "0")
    page.click("#plane-add")
    assert "centred away" in page.inner_text("#plane-msg") and len(page.evaluate("headmovies.panels()")) == 5
    assert errors == []


# --- the live view ------------------------------------------------------------------------------

TINY = [
    "--set",
    "p=5",
    "--set",
    "n_heads=3",
    "--set",
    "d_model=8",
    "--set",
    "d_head=2",
    "--set",
    "epochs=600",
    "--set",
    "early_every=10",
    "--set",
    "switch_epoch=600",
    "--set",
    "eq_start=0",
    "--set",
    "eq_ramp=100",
]


def wait_until(check, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def snapshots_in(path: Path) -> int:
    try:
        with Run(path) as r:
            return len(r)
    except Exception:
        return 0


def test_live_view_follows_training_through_a_kill_and_resume(tmp_path, open_page):
    """A real tiny training run: paused once it has a few snapshots; the page opens; training
    continues and the page shows the new snapshots; the writer is killed, restarted with
    --resume and finishes; the page ends at the final epoch with the run's exact snapshots;
    Ctrl-C stops the server cleanly."""
    run = tmp_path / "tiny.h5"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    train = [
        sys.executable,
        "-m",
        "headmovies",
        "train",
        "orbits",
        "--out",
        str(run),
        *TINY,
        "--checkpoint-every",
        "0",
        "--no-progress",
    ]
    trainer = subprocess.Popen(train, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    watcher = None
    try:
        wait_until(lambda: snapshots_in(run) >= 3, 120, "the first snapshots")
        trainer.send_signal(signal.SIGSTOP)
        watcher = subprocess.Popen(
            [sys.executable, "-m", "headmovies", "orbits", "watch", str(run), "--port", "0", "--interval", "0.25"],
            env=env,
            preexec_fn=sigint_as_at_a_terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        first = watcher.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", first).group(0)
        page, errors = open_page(url)
        ready(page)
        opened_at = int(page.get_attribute("#epoch", "data-epoch"))
        page.wait_for_selector("#live:not([hidden])", timeout=5000)
        assert re.fullmatch(rf"live: epoch {opened_at:,} of 600", page.inner_text("#live"))
        count = snapshots_in(run)
        trainer.send_signal(signal.SIGCONT)  # a few more snapshots, then pause again
        wait_until(lambda: snapshots_in(run) >= count + 3, 60, "more snapshots")
        trainer.send_signal(signal.SIGSTOP)
        with Run(run) as r:
            latest = int(r.epochs[-1])
        assert opened_at < latest < 600
        page.wait_for_function(f"document.getElementById('epoch').dataset.epoch === '{latest}'", timeout=5000)
        assert f"live: epoch {latest:,} of 600" in page.inner_text("#live")
        trainer.kill()  # SIGKILL, mid-run
        trainer.wait(10)
        resumed = subprocess.run(train + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        page.wait_for_function(
            "document.getElementById('live').textContent.includes('epoch 600 of 600')", timeout=10000
        )
        assert "training finished" in page.inner_text("#live") and page.inner_text("#epoch") == "epoch 600"
        with Run(run) as r:
            assert page.evaluate("headmovies.epochs") == r.epochs.tolist() and r.complete
        assert errors == []
        watcher.send_signal(signal.SIGINT)  # Ctrl-C
        out, _ = watcher.communicate(timeout=10)
        assert watcher.returncode == 0 and out.rstrip().endswith("stopped"), out
        assert "writer restarted (--resume)" in out and "Traceback" not in out
    finally:
        for proc in (trainer, watcher):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)


# --- the movie's HTML snippet -------------------------------------------------------------------


def moving_square(n=48, h=64, w=96):
    for i in range(n):
        f = np.full((h, w, 3), 255, np.uint8)
        x = (2 * i) % (w - 16)
        f[20:40, x : x + 16] = (31, 119, 180)
        yield f


@pytest.fixture(scope="module")
def snippet(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snippet")
    encode(moving_square(), folder, "sq", fps=12, hold_s=0.5, formats=("mp4", "webm", "png", "html"))
    return folder / "sq.html"


def test_snippet_video_plays(snippet, open_page):
    page, errors = open_page(snippet.as_uri())
    page.wait_for_function("document.querySelector('video').currentTime > 0.3", timeout=10000)
    assert page.evaluate("document.querySelector('video').currentSrc").endswith(".mp4")  # MP4 first (Safari)
    assert page.evaluate("document.querySelector('video').controls") is True
    assert errors == []


def test_snippet_shows_the_poster_and_does_not_autoplay_under_reduced_motion(snippet, open_page):
    page, errors = open_page(snippet.as_uri(), reduced_motion="reduce")
    page.wait_for_load_state("load")
    time.sleep(1.0)
    state = page.evaluate(
        "(() => { const v = document.querySelector('video'); return {paused: v.paused, t: v.currentTime}; })()"
    )
    assert state == {"paused": True, "t": 0}, state
    # paused before its first frame, a video shows its poster (HTML's "show poster" flag): the
    # poster must be the movie's poster PNG and load
    poster = page.evaluate(
        "new Promise((ok) => { const v = document.querySelector('video'), i = new Image(); "
        "i.onload = () => ok([v.getAttribute('poster'), i.naturalWidth, i.naturalHeight]); "
        "i.onerror = () => ok([v.getAttribute('poster'), 0, 0]); i.src = v.poster; })"
    )
    assert poster == ["sq.png", 96, 64]
    assert errors == []

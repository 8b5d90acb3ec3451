"""The induction and OV-coherent viewers (render/induction/viewer.py, render/ov_coherent/viewer.py,
the scatter viewer's page in render/core/viewer_page/) on tiny trained runs, in Debian's Chromium
through Playwright (the `open_page` fixture, tests/conftest.py; the checks every scatter page
gets in tests/scatter_pages.py): the page opens from file:// with no request to the network and
no console error, the last snapshot shows the numbers the Python analysis gives for it, play
moves, and the page fits a 1440x900 screen."""

from __future__ import annotations

import numpy as np
import pytest
from scatter_pages import check_opens_offline_and_fits, check_play_moves, check_timeline_and_trails, payload_of, to_last

from headmovies.cli import main as cli_main
from headmovies.render.core.frame_states import trail_length
from headmovies.render.core.viewer_page.build import unpack
from headmovies.render.induction import numpy_model as npm
from headmovies.render.induction.analysis import over_training
from headmovies.render.induction.circuit_scores import copying_table
from headmovies.render.induction.viewer import head_scores
from headmovies.render.induction.viewer import make_viewer as induction_viewer
from headmovies.render.ov_coherent import analysis
from headmovies.render.ov_coherent.figures import plane_coords
from headmovies.render.ov_coherent.viewer import make_viewer as ov_viewer
from headmovies.runfile.reader import Run
from headmovies.train import config
from headmovies.train.experiments import get as task_class
from headmovies.train.loop import train

INDUCTION = {"epochs": "40", "early_every": "10", "batch_size": "32", "eval_size": "64"}
OV = {"epochs": "30", "seq_len": "6", "batch": "16", "early_every": "5", "switch_epoch": "20", "late_every": "10"}
# These runs are short: a tenth of each (the trails' default length, `frame_states.trail_length`)
# is shorter than one snapshot step, so the pages trail 50 epochs to show the trails box's effect.
TRAIL = 50


def trained(folder, experiment: str, sets: dict) -> str:
    path = folder / f"{experiment}.h5"
    train(experiment, config.resolve(task_class(experiment).Config, sets=sets), path, progress=False)
    return path


@pytest.fixture(scope="module")
def induction(tmp_path_factory):
    folder = tmp_path_factory.mktemp("induction_viewer")
    run = trained(folder, "induction-2l", INDUCTION)
    return run, induction_viewer(run, folder / "out", n_sequences=64, trail_epochs=TRAIL)


@pytest.fixture(scope="module")
def ov(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ov_viewer")
    run = trained(folder, "ov-coherent", OV)
    return run, ov_viewer(run, folder / "out", trail_epochs=TRAIL)


def test_induction_viewer_shows_the_analysis_of_the_last_snapshot(induction, open_page):
    run_path, result = induction
    page, errors, requests = open_page(result.path.as_uri())
    check_opens_offline_and_fits(page, errors, requests, panels=2)
    with Run(run_path) as run:
        table = {r["circuit"]: r["copying"] for r in copying_table(run.weights(-1))}
        hist = over_training(run, n_sequences=64, progress=False)
        L = run.config["block_len"]
        final_epoch = int(run.epochs[-1])
    prev, ind = head_scores(hist["attention"][-1], L)  # (n_layers, H)
    assert to_last(page) == final_epoch == 40
    for name, li, h in (("L0H0", 0, 0), ("L1H3", 1, 3)):
        row = page.locator(f"#legend tr[data-head={name}]")
        assert row.locator(".copying").inner_text() == f"{table[name]:+.2f}"
        assert row.locator(".prev").inner_text() == f"{prev[li, h]:.2f}"
        assert row.locator(".induction").inner_text() == f"{ind[li, h]:.2f}"
    assert f"{table['direct path W_E W_U']:+.2f}" in page.inner_text("#legend")
    dots = page.evaluate("window.headmovies.dots(1)")  # copying score across, induction up
    assert dots[4]["label"] == "L1H0" and dots[4]["x"] == pytest.approx(table["L1H0"], abs=1e-6)
    assert dots[4]["y"] == pytest.approx(ind[1, 0], abs=1e-6)
    page.mouse.move(dots[4]["px"], dots[4]["py"])
    box = page.inner_text("#head-info")
    assert box.startswith("head L1H0") and f"{table['L1H0']:+.2f}" in box and "epoch 40" in box
    assert page.locator("#head-info canvas").count() == 1  # its mean attention pattern
    check_timeline_and_trails(page, plane=1)
    check_play_moves(page)
    assert errors == []


def test_ov_coherent_viewer_shows_the_analysis_of_the_last_snapshot(ov, open_page):
    run_path, result = ov
    page, errors, requests = open_page(result.path.as_uri())
    check_opens_offline_and_fits(page, errors, requests, panels=3)
    with Run(run_path) as run:
        qk = analysis.readoff_qk(run.weights(-1))  # (2 heads, 12)
        final_epoch = int(run.epochs[-1])
    xy = plane_coords(qk)
    assert to_last(page) == final_epoch == 30
    for h in (0, 1):
        row = page.locator(f"#legend tr[data-head='{h + 1}']")
        assert row.locator(".ordering").inner_text() == analysis.format_ordering(qk[h])
        assert row.locator(".qk").all_inner_texts() == [f"{xy[h, t]:+.2f}" for t in (1, 2, 3, 4)]
    opposite = analysis.are_opposite(analysis.preference_ordering(qk[0]), analysis.preference_ordering(qk[1]))
    assert ("do not prefer" not in page.inner_text("#legend")) == opposite
    dots = page.evaluate("window.headmovies.dots(0)")  # the shared plane: head 1 across, head 2 up
    assert [d["x"] for d in dots] == pytest.approx(xy[0].tolist(), abs=1e-5)
    assert [d["y"] for d in dots] == pytest.approx(xy[1].tolist(), abs=1e-5)
    page.mouse.move(dots[3]["px"], dots[3]["py"])
    assert page.inner_text("#head-info").startswith("signal token 3")
    assert page.locator("#head-info canvas").count() == 2  # both heads' OV tables
    assert "rows 11, 12, 13, 14, 22, 23, 24, 33, 34, 44) per unit of attention on each token 0-11" in page.inner_text(
        "#head-info"
    )
    check_timeline_and_trails(page, plane=0)
    check_play_moves(page)
    assert errors == []


@pytest.mark.slow  # trains two tiny runs (about 10 s)
def test_the_payloads_hold_every_snapshot(induction, ov):
    for (run_path, result), arrays in ((induction, ("copying", "prev", "induction", "attention")), (ov, ("qk", "ov"))):
        text = result.path.read_text()
        data = payload_of(text)
        with Run(run_path) as run:
            assert data["epochs"] == run.epochs.tolist()
        A = unpack(data["arrays"])
        assert A["coords"].shape[0] == len(data["epochs"]) and set(arrays) <= set(A)
        assert "<script src=" not in text and "http" not in text.split('id="payload"')[0]


@pytest.mark.slow  # the same two runs
def test_the_old_view_spellings_print_a_notice_and_run_view(induction, ov, tmp_path, capsys):
    """`headmovies induction view` and `headmovies ov-coherent view` are deprecated spellings of
    `headmovies view`: one line on stderr, then the page `view` writes, in the run's family's look
    (an ov-coherent run given to `induction view` is drawn as an ov-coherent run)."""
    for group, run, family in (("induction", induction[0], "induction"), ("ov-coherent", ov[0], "ov-coherent")):
        args = ["--sequences", "64", "--no-progress"] if family == "induction" else []
        assert cli_main([group, "view", str(run), "--out", str(tmp_path / "old" / group), *args]) == 0
        assert capsys.readouterr().err.startswith(f"note: `headmovies {group} view` is now `headmovies view`\n")
        assert cli_main(["view", str(run), "--out", str(tmp_path / "new" / group), *args]) == 0
        old, new = (payload_of((tmp_path / d / group / "viewer.html").read_text()) for d in ("old", "new"))
        assert old == new and old["meta"]["trail_epochs"] == trail_length(np.array(old["epochs"]))
    assert cli_main(["induction", "view", str(ov[0]), "--out", str(tmp_path / "crossed")]) == 0
    assert "source 004" in (tmp_path / "crossed" / "viewer.html").read_text()


def test_an_induction_pattern_with_known_offsets_scores_as_it_should():
    T, L = 12, 4
    prev = np.eye(T, k=-1)
    prev[0, 0] = 1
    induct = np.eye(T, k=-(L - 1))
    induct[: L - 1, 0] = 1
    p, i = head_scores(np.stack([prev, induct])[None], L)  # (1 layer, 2 heads)
    assert p.tolist() == [[1.0, 0.0]] and i.tolist() == [[0.0, 1.0]]
    assert npm.offset_profile(induct, start=L)[L - 1] == 1.0


# --- the scatter viewer's page: its build and pure functions -------------------------------------

FAMILIES = ("headmovies.render.induction.viewer_page", "headmovies.render.ov_coherent.viewer_page")


def test_each_family_page_inlines_the_shared_parts_and_its_own_script():
    from headmovies.render.core.viewer_page import build

    for package in FAMILIES:
        names = build.scripts(package)
        assert names[0] == "format.js" and names[-1] == "scatter_main.js" and "family.js" in names
        text = build.page({"meta": {}, "epochs": [], "captions": [], "arrays": None}, package)
        assert text == build.page({"meta": {}, "epochs": [], "captions": [], "arrays": None}, package)
        assert "<script src=" not in text and '<link rel="stylesheet"' not in text and text.count("<style>") == 2
        assert build.part("family.js", package) in text
    assert build.part("family.js", FAMILIES[0]) != build.part("family.js", FAMILIES[1])


@pytest.fixture(scope="module")
def js(browser):
    """A blank page holding the induction page's scripts but the wiring: js(expression, arg)."""
    from headmovies.render.core.viewer_page import build

    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content("<!DOCTYPE html><html><body></body></html>")
    for name in build.scripts(FAMILIES[0]):
        if name != "scatter_main.js":
            page.add_script_tag(content=build.part(name, FAMILIES[0]))
    assert errors == []
    yield lambda expression, arg=None: page.evaluate(
        f"(arg) => {{ const M = viewerModules; return {expression}; }}", arg
    )
    assert errors == []
    page.close()


def test_speeds_ticks_labels_and_signs(js):
    assert js("M.player.speeds(10000)") == [200, 500, 1000, 2000]  # the run in about 40, 20, 10, 5 s
    assert js("M.player.speeds(40)") == [1, 2, 5, 10]
    assert js("[0.7, 3, 140, 2600].map(M.player.roundSpeed)") == [1, 2, 100, 2000]
    assert js("[10000, 40, 3000].map(M.curves.niceStep)") == [
        2000,
        5,
        500,
    ]  # the smallest round step giving at most 8 ticks
    # three marks, the second too close to the first for one row: it goes to the next row
    assert js("M.curves.labelRows([[100, 50], [120, 50], [400, 50]], 0, 1000, 3)") == [[75, 0], [95, 1], [375, 0]]
    values = [0.6860927, -0.9995849, -0.001, 0.0, 1.0]
    assert js("arg.map(M.format.fmtSigned)", values) == [f"{x:+.2f}" for x in values]


@pytest.mark.parametrize("argv", [["view"], ["induction", "view"], ["ov-coherent", "view"]])
def test_view_help_says_what_it_writes(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli_main([*argv, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "DIR/NAME.html (default viewer.html)" in out and "file://" in out and "--out DIR" in out


def test_the_timeline_note_names_each_curve_in_its_colour(js):
    meta = {
        "curves": [
            {"label": "accuracy", "colour": "#1f77b4", "lo": 0, "hi": 1},
            {"label": "τ", "colour": "#d62728", "lo": -1, "hi": 1},
            {"label": "train_loss", "colour": "#2ca02c", "lo": -2, "hi": 0.60206, "log": True},
        ],
        "events": [{"epoch": 1500, "label": "accuracy reaches 99% and stays there"}],
    }
    parts = js("M.curves.timelineNote(arg)", meta)
    assert "".join(p[0] for p in parts) == (
        "accuracy (0 to 1.00), τ (-1.00 to 1.00), train_loss (log scale, 0.010 to 4.00) · "
        "dashed: accuracy reaches 99% and stays there (epoch 1,500). "
        "Click or drag to move."
    )
    assert [p[1] for p in parts if p[1]] == ["#1f77b4", "#d62728", "#2ca02c"]


def test_playback_stops_at_the_last_snapshot_or_waits_there_for_a_live_run(browser):
    """player.js (every viewer page): a page with its own speed options keeps them; playback runs
    to the last snapshot and stops there, or, while app.waitAtEnd() holds (the orbit viewer's
    live view), keeps playing at the newest snapshot."""
    from headmovies.render.core.viewer_page import build

    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(
        '<!DOCTYPE html><html><body><button id="play"></button><input id="scrubber" type="range">'
        '<select id="speed"><option value="100000" selected>fast</option></select>'
        '<input type="checkbox" id="trails" checked></body></html>'
    )
    for name in ("format.js", "dom.js", "axes.js", "player.js"):
        page.add_script_tag(content=build.part(name))
    state = page.evaluate_handle("""() => {
        const epochs = [0, 10, 20], shown = [];
        const app = {
            snaps: { T: 3, epochs, indexAtOrBefore: (e) => viewerModules.axes.indexAtOrBefore(epochs, e) },
            view: { t: 0, playing: false, epoch: 0, last: 0, hold: 0, trails: true }, holdEpochs: [],
            live: true, waitAtEnd: () => app.live, redraw() {},
            setSnapshot(t) { app.view.t = Math.max(0, Math.min(2, t)); shown.push(app.view.t); },
        };
        const player = viewerModules.player.createPlayer(app);
        player.listen();
        return { app, player, shown };
    }""")
    assert page.eval_on_selector_all("#speed option", "os => os.map((o) => o.textContent)") == ["fast"]
    page.evaluate("(s) => s.player.play(true)", state)
    page.wait_for_function("(s) => s.shown.includes(2)", arg=state, timeout=5000)
    page.wait_for_timeout(300)
    assert page.evaluate("(s) => [s.app.view.playing, s.app.view.t, s.app.view.epoch]", state) == [True, 2, 20]
    page.evaluate("(s) => { s.app.live = false; }", state)
    page.wait_for_function("(s) => !s.app.view.playing", arg=state, timeout=5000)
    assert page.inner_text("#play") == "▶ play" and page.evaluate("(s) => s.app.view.t", state) == 2
    assert errors == []
    page.close()

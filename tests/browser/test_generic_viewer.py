"""The generic viewer (render/generic/viewer.py) of a run recorded by `headmovies.Recorder`, in
Debian's Chromium (the `open_page` fixture, tests/conftest.py): a metric logged every 50 steps
while snapshots come every 10 is drawn through its values, the y-axis is in the loss' own
units, and the page shows the probe's scores and attention patterns; by default its planes are
score space, as the movie's (`--view axes`: principal axes)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scatter_pages import to_last
from tiny_models import TinyAttentionModel as Model

import headmovies
from headmovies.render.generic.heads import find_heads
from headmovies.render.generic.planes import planes_of
from headmovies.render.generic.viewer import render_viewer
from headmovies.runfile.reader import Run

STEPS, EVERY, VAL_EVERY = 300, 10, 50


def train_loss(e: int) -> float:
    return 4.0 * 0.995**e


def val_loss(e: int) -> float:
    return 4.2 * 0.995**e


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generic_viewer")
    path = folder / "run.h5"
    torch.manual_seed(0)
    model = Model()
    letters = lambda ids: "".join("abcdefghi"[i] for i in ids)  # noqa: E731  (a tokenizer's decode)
    with headmovies.Recorder(path, model, schedule=range(0, STEPS + 1, EVERY), decode=letters) as rec:
        for e in range(STEPS + 1):
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.01 * torch.randn_like(p))
            if e % VAL_EVERY == 0:
                rec.log(val_loss=val_loss(e))
            rec.step(e, train_loss=train_loss(e))
    return path, render_viewer(path, folder / "out")


def test_a_metric_logged_every_50_steps_is_drawn_in_its_units(recorded, open_page):
    _, page_path = recorded
    page, errors, _ = open_page(page_path.as_uri())
    drawn = page.evaluate("window.headmovies.timeline")
    series = {s["label"]: s for s in drawn["series"]}
    val = series["val_loss"]["points"]
    assert [p[0] for p in val] == list(range(0, STEPS + 1, VAL_EVERY))
    for epoch, value, _, _ in val:
        assert value == pytest.approx(val_loss(epoch), rel=1e-5)
    train = series["train_loss"]["points"]
    assert [p[0] for p in train] == list(range(0, STEPS + 1, EVERY))
    # one axis for both losses, ticks in loss units (1 and 2 between 0.89 and 4.2), 2 above 1
    assert drawn["scale"] == "train_loss"
    ticks = {t["text"]: t["y"] for t in drawn["ticks"]}
    assert set(ticks) == {"1", "2"} and ticks["2"] < ticks["1"]
    # val_loss on that log axis: its drawn height is the ticks' log10 scale of its values
    y_of = {p[0]: p[3] for p in val}
    slope = (ticks["1"] - ticks["2"]) / math.log10(2)
    assert y_of[300] - y_of[0] == pytest.approx(slope * math.log10(val_loss(0) / val_loss(300)), abs=0.01)
    assert y_of[0] == pytest.approx(ticks["2"] - slope * math.log10(val_loss(0) / 2), abs=0.01)
    assert errors == []


def test_the_probe_scores_are_curves_and_each_head_shows_its_pattern(recorded, open_page):
    run_path, page_path = recorded
    with Run(run_path) as run:
        scores = run.head_scores()
        T = len(run)
        last_pattern = run.patterns(-1)[0]  # [L, H, P, P]
        tokens = run.probe_tokens()[0]
        labels = run.probe_labels()
    page, errors, _ = open_page(page_path.as_uri())
    series = {s["label"]: s for s in page.evaluate("window.headmovies.timeline")["series"]}
    strongest = series["induction (strongest head)"]["points"]
    assert len(strongest) == T
    for t in (0, T - 1):
        assert strongest[t][1] == pytest.approx(float(np.nanmax(scores["induction"][t])), abs=1e-6)
    page.locator("#legend li[data-head=L1H0]").click()
    drawn = page.evaluate("window.headmovies.timeline")
    head = {s["label"]: s for s in drawn["series"]}["previous_token (L1H0)"]["points"]
    assert [p[1] for p in head] == pytest.approx([float(v) for v in scores["previous_token"][:, 1, 0]], abs=1e-6)
    assert [t["text"] for t in drawn["rightTicks"]] == ["0", "0.5", "1"]
    to_last(page)
    box = page.inner_text("#head-info")
    assert f"induction score\t{scores['induction'][-1, 1, 0]:.3f}" in box
    pattern = page.evaluate("window.headmovies.pattern(2)")  # L1H0: the third head
    assert pattern["epoch"] == STEPS and pattern["positions"] == 64
    np.testing.assert_allclose(pattern["values"], last_pattern[1, 0, :64, :64], atol=0.5 / 255 + 1e-3)
    assert pattern["labels"] == labels[:64] == ["abcdefghi"[i] for i in tokens[:64]]
    assert page.locator("#head-info figure[data-map=pattern] canvas").count() == 1
    assert "probe: " + " ".join(labels[:64]) in box
    assert errors == []


def test_the_planes_are_score_space_by_default_and_principal_axes_with_view_axes(recorded, open_page, tmp_path):
    """One plane per layer, axes fixed 0 to 1: each head's dot in its own layer's plane at its
    stored (previous-token, induction) scores at the last snapshot, absent from the other's;
    view="axes" gives the principal-axis planes of planes_of."""
    run_path, page_path = recorded
    with Run(run_path) as run:
        scores = run.head_scores()
        heads = find_heads(run)
        planes = planes_of(run, heads)
    page, errors, _ = open_page(page_path.as_uri())
    assert [t.strip() for t in page.locator(".panel h2").all_inner_texts()] == [
        "layer 0 (2 heads)",
        "layer 1 (2 heads)",
    ]
    assert to_last(page) == STEPS
    for layer in (0, 1):
        assert page.evaluate(f"window.headmovies.axis({layer})") is None  # fixed axes
        dots = page.evaluate(f"window.headmovies.dots({layer})")
        assert [d["label"] for d in dots] == ["L0H0", "L0H1", "L1H0", "L1H1"]
        for d in dots:
            if d["label"][1] != str(layer):  # another layer's head: no point here
                assert d["x"] is None and d["px"] is None
                continue
            h = int(d["label"][3])
            assert d["x"] == pytest.approx(float(scores["previous_token"][-1, layer, h]), abs=1e-6)
            assert d["y"] == pytest.approx(float(scores["induction"][-1, layer, h]), abs=1e-6)
    # the dot's place on the canvas: x from 0 to 1 across the plane's inner square
    box = page.locator(".panel canvas").nth(1).bounding_box()
    d = page.evaluate("window.headmovies.dots(1)")[2]
    assert box["x"] + 26 - 1 <= d["px"] <= box["x"] + box["width"] - 26 + 1
    assert d["px"] == pytest.approx(box["x"] + 26 + d["x"] * (box["width"] - 52), abs=1.0)
    assert d["py"] == pytest.approx(box["y"] + box["height"] - 26 - d["y"] * (box["height"] - 52), abs=1.0)
    page.mouse.move(d["px"], d["py"])
    assert page.inner_text("#head-info").startswith("head L1H0")
    (tmp_path / "scores.png").write_bytes(page.screenshot(full_page=True))
    # labelled dots within 12 px share one label, as the movie's (score_space.label_groups)
    near = [
        {"px": 0, "py": 0, "label": "L0H0"},
        {"px": 100, "py": 0, "label": "L0H1"},
        {"px": 5, "py": 5, "label": "L0H3"},
    ]
    groups = page.evaluate(f"viewerModules.scatter.labelGroups({json.dumps(near)}, 12).map(g => g.map(d => d.label))")
    assert groups == [["L0H0", "L0H3"], ["L0H1"]]
    assert page.evaluate('viewerModules.scatter.joinLabels(["L0H0", "L0H3"])') == "L0H0,3"
    assert errors == []

    axes_path = render_viewer(run_path, tmp_path / "axes", view="axes")
    page, errors, _ = open_page(axes_path.as_uri())
    assert [t.strip() for t in page.locator(".panel h2").all_inner_texts()] == planes.titles
    to_last(page)
    for p in range(len(planes.titles)):
        dots = page.evaluate(f"window.headmovies.dots({p})")
        np.testing.assert_allclose([d["x"] for d in dots], planes.coords[-1, p].real, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose([d["y"] for d in dots], planes.coords[-1, p].imag, rtol=1e-5, atol=1e-7)
        assert page.evaluate(f"window.headmovies.axis({p})") > 0
    assert errors == []


@pytest.mark.parametrize("width", [1000, 1100])
def test_the_notebook_viewer_fits_an_output_area_without_cutting_the_right_column(recorded, browser, tmp_path, width):
    """`headmovies.show(run, "viewer")` in an output area `width` px wide: nothing wider than the
    frame, the legend and the timeline inside it (stacked under the panels)."""
    run_path, _ = recorded
    host = tmp_path / "notebook.html"
    host.write_text(
        f'<body style="margin:0"><div style="width:{width}px">{headmovies.show(run_path, "viewer").html}</div>'
    )
    ctx = browser.new_context(viewport={"width": width + 200, "height": 1000}, device_scale_factor=1, offline=True)
    try:
        page = ctx.new_page()
        page.goto(host.as_uri())
        frame = page.frame_locator("iframe")
        frame.locator("body[data-state=ready]").wait_for(timeout=15000)
        inner = page.frames[1]
        fit = inner.evaluate(
            "({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth, "
            "aside: document.querySelector('aside').getBoundingClientRect().right, "
            "timeline: document.querySelector('#timeline').getBoundingClientRect().right})"
        )
        assert fit["scroll"] <= fit["client"] <= width
        assert fit["aside"] <= fit["client"] and fit["timeline"] <= fit["client"]
        shot = page.screenshot(clip={"x": 0, "y": 0, "width": width, "height": 900})
        (tmp_path / f"notebook-{width}.png").write_bytes(shot)
    finally:
        ctx.close()

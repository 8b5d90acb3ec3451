"""Rendering any run (render/generic/): planes on cases with known answers, and a recorded
TransformerLens run rendered end to end (movie, figures, viewer, Jupyter) through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scatter_pages

import headmovies
from headmovies.render.core.viewer_page.build import unpack
from headmovies.render.generic.figures import frequency_shares, key_frequencies
from headmovies.render.generic.heads import find_heads
from headmovies.render.generic.planes import planes_of, top_irrep_planes
from headmovies.runfile.reader import Run

ROOT = Path(headmovies.__file__).resolve().parents[1]  # the repository


def fourier_weights(p: int, k: int, d: int = 8) -> dict:
    """One layer, 2 heads, W_E the cos/sin of frequency k (and zeros), identity-like heads: each
    head's OV circuit R[c, b] = cos(2 pi k (c - b) / p) (times a head's gain), pure frequency k."""
    a = np.arange(p)
    E = np.zeros((p, d))
    E[:, 0], E[:, 1] = np.cos(2 * np.pi * k * a / p), np.sin(2 * np.pi * k * a / p)
    W = np.zeros((2, d, 2))
    W[:, 0, 0] = W[:, 1, 1] = 1.0
    W[1] *= 2.0  # head 1: W_Q, W_K, W_V twice, and so W_O
    W_O = np.swapaxes(W, 1, 2).copy()
    return {0: {"W_Q": W, "W_K": W, "W_V": W, "W_O": W_O}, "W_E": E, "W_U": E.T}


def record_function_run(path: Path, fn, epochs=(0, 1, 2), **kwargs) -> None:
    with headmovies.Recorder(path, fn, schedule=epochs, **kwargs) as rec:
        for e in epochs:
            rec.step(e, train_acc=e / 2)


def test_irrep_planes_and_key_frequency_of_a_pure_fourier_mode(tmp_path):
    p, k = 13, 4
    record_function_run(tmp_path / "run.h5", lambda: fourier_weights(p, k), group_order=p)
    with Run(tmp_path / "run.h5") as run:
        heads = find_heads(run)
        assert (heads.group_order, heads.tokens, heads.labels) == (p, p, ["L0H0", "L0H1"])
        planes = planes_of(run, heads)
        ov = [pl for pl in planes.panels if pl.circuit == "ov"]
        assert {abs(ov[0].u), abs(ov[0].v)} == {k}  # the one plane holding the OV power
        coords = planes.coords[:, planes.panels.index(ov[0])]  # [T, H]
        np.testing.assert_allclose(np.abs(coords[:, 1]), 4 * np.abs(coords[:, 0]))  # W_V and W_O both x2
        from headmovies.render.generic.heads import head_circuits

        circ = head_circuits(heads, run.weights(-1, heads.names()))
    shares = frequency_shares(circ["ov"])
    assert shares[k] == pytest.approx(1.0) and key_frequencies(shares) == [k]
    assert top_irrep_planes(circ, p)[2:] == ov  # qk first, then ov


def test_principal_axes_are_fitted_once_and_keep_a_planar_head_exact(tmp_path):
    """Without a group: heads whose circuits scale over time stay on one line through 0 in the
    fitted plane (axes fitted on all snapshots, uncentred), at radius = their circuit's norm."""
    rng = np.random.default_rng(0)
    base = fourier_weights(7, 2)[0]
    W_E = rng.normal(size=(7, 8))
    gains = iter([1.0, 2.0, 3.0])

    def fn():
        g = next(gains)
        return {0: {k: v * (g if k == "W_V" else 1.0) for k, v in base.items()}, "W_E": W_E, "W_U": W_E.T}

    record_function_run(tmp_path / "run.h5", fn)
    with Run(tmp_path / "run.h5") as run:
        heads = find_heads(run)
        assert heads.group_order is None
        planes = planes_of(run, heads)
        from headmovies.render.generic.heads import iter_circuits

        norms = np.array([[np.linalg.norm(c["ov"][h]) for h in range(2)] for _, c in iter_circuits(run, heads)])
    assert planes.kind == "pca" and planes.titles[2] == "OV circuit, principal axes 1 and 2"
    ov12 = planes.coords[:, 2]  # [T, H]
    np.testing.assert_allclose(np.abs(ov12), norms, rtol=1e-9)  # the OV circuits span one axis: all of it
    np.testing.assert_allclose(ov12[1] / ov12[0], [2, 2], rtol=1e-9)  # axes do not move between snapshots
    with pytest.raises(headmovies.errors.UserError, match="irrep panels need a cyclic group"):
        planes_of(run.__class__(tmp_path / "run.h5"), heads, panels=["qk:0,1"])


def test_the_viewers_timeline_curves_and_marks_of_logged_metrics():
    """Accuracies 0 to 1 with a mark where one first reaches 90 %; a positive loss and a positive
    metric spanning more than 100x on a log scale (values log10, `log` set); another between its
    extremes; a metric logged at no snapshot left out."""
    from headmovies.render.generic.viewer import metric_curves

    nan = float("nan")
    epochs = np.array([0, 10, 20, 30])
    metrics = {
        "epoch": np.array([0, 5, 10, 20, 25, 30]),
        "test_acc": np.array([0.1, 0.5, 0.8, 0.95, 0.97, 1.0]),
        "train_loss": np.array([4.0, 3.0, 2.0, 1.0, 0.7, 0.5]),
        "eq_error": np.array([1.0, 0.5, 0.1, 0.01, 0.01, 0.001]),
        "lr": np.array([3.0, 3.0, 2.0, 1.0, 1.0, 1.0]),
        "rare": np.array([nan, 1.0, nan, nan, 2.0, nan]),
    }
    series, events = metric_curves(epochs, metrics)
    got = {s.label: (s.lo, s.hi, list(s.values)) for s in series}
    assert {s.label for s in series if s.log} == {"train_loss", "eq_error"}
    assert got["test_acc"] == (0.0, 1.0, [0.1, 0.8, 0.95, 1.0])
    assert got["train_loss"] == (
        pytest.approx(np.log10(0.5)),
        pytest.approx(np.log10(4)),
        pytest.approx(np.log10([4, 2, 1, 0.5])),
    )
    assert got["eq_error"][:2] == (pytest.approx(-3), pytest.approx(0))
    assert got["lr"] == (1.0, 3.0, [3.0, 2.0, 1.0, 1.0]) and "rare" not in str(got)
    assert [(e.epoch, e.label) for e in events] == [(20, "test_acc 90%")]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "headmovies", *args], env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_a_recorded_transformer_lens_run_renders_end_to_end(tmp_path):
    """A 2-layer HookedTransformer trained 40 steps on addition mod 7, recorded; then the CLI's
    movie (one frame per snapshot), figures, viewer, and `headmovies.show` of it."""
    import torch
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    torch.set_num_threads(1)
    p = 7
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=16, d_head=4, n_heads=2, d_mlp=32, d_vocab=p + 1, d_vocab_out=p, n_ctx=3, act_fn="relu",
        seed=0,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    a, b = np.meshgrid(np.arange(p), np.arange(p))
    x = torch.tensor(np.stack([a.ravel(), b.ravel(), np.full(p * p, p)], 1))
    y = (x[:, 0] + x[:, 1]) % p
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    run = tmp_path / "tl.h5"
    with headmovies.Recorder(run, model, config={"p": p}, group_order=p, schedule=range(0, 41, 4)) as rec:
        for epoch in range(41):
            if epoch:
                loss = torch.nn.functional.cross_entropy(model(x)[:, -1], y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            rec.step(epoch, **({"train_loss": loss.item()} if epoch else {}))  # no loss measured at 0
    with Run(run) as r:
        assert len(r) == 11 and "blocks.1.attn.W_O" in r.weight_names

    done = _cli("movie", str(run), "--out", str(tmp_path / "m"), "--formats", "mp4,png", "--hold", "0")
    assert done.returncode == 0, done.stderr
    assert "(11 frames)" in done.stdout and (tmp_path / "m" / "movie.png").stat().st_size > 10_000
    done = _cli("figures", str(run), "--out", str(tmp_path / "f"))
    assert done.returncode == 0, done.stderr
    info = json.loads((tmp_path / "f" / "summary.json").read_text())
    assert info["heads"] == ["L0H0", "L0H1", "L1H0", "L1H1"] and info["group_order"] == p
    assert len(info["key_frequencies"]) >= 1 and (tmp_path / "f" / "ov_frequencies.png").exists()
    done = _cli("view", str(run), "--out", str(tmp_path / "v"))
    assert done.returncode == 0, done.stderr
    data = scatter_pages.payload_of((tmp_path / "v" / "viewer.html").read_text())
    arrays = unpack(data["arrays"])
    assert len(data["epochs"]) == 11 and arrays["coords"].shape == (11, 4, 4, 2)  # T x P x H x (x, y)
    assert arrays["qk"].shape == arrays["ov"].shape == (11, 4, p, p) and np.abs(arrays["ov"]).max() == 127
    assert [c["label"] for c in data["meta"]["curves"]] == ["train_loss"] and data["meta"]["curves"][0]["log"]
    done = _cli("movie", str(tmp_path / "missing.h5"), "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "does not exist" in done.stderr

    shown = headmovies.show(run)
    assert shown._repr_html_().startswith(
        '<video controls loop muted playsinline style="max-width: 100%" src="data:video/mp4;base64,'
    )
    viewer = headmovies.show(run, "viewer")._repr_html_()
    assert viewer.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;') and "payload" in viewer


def growing_run(path: Path, p: int = 13, k: int = 4, epochs=(0, 10, 20, 30, 40)) -> None:
    """`fourier_weights` with W_V times 1, 2, 3, 4, 10 at the snapshots (each head's OV circuit
    grows along one line, a jump at the end that a trail of a tenth of the run shows; QK stays),
    train_acc = epoch / 40 and train_loss halving every 10 epochs."""
    base = fourier_weights(p, k)
    gains = iter([1, 2, 3, 4, 10])

    def fn():
        g = next(gains)
        return {0: {n: w * g if n == "W_V" else w for n, w in base[0].items()}, "W_E": base["W_E"], "W_U": base["W_U"]}

    with headmovies.Recorder(path, fn, schedule=list(epochs), group_order=p) as rec:
        for e in epochs:
            rec.step(e, train_acc=e / 40, train_loss=2.0 ** (-e / 10))


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    """(run path, viewer page path) of a `growing_run`."""
    from headmovies.render.generic.viewer import render_viewer

    folder = tmp_path_factory.mktemp("generic_viewer")
    growing_run(folder / "run.h5")
    return folder / "run.h5", render_viewer(folder / "run.h5", folder / "v")


def fmt_num(x: float) -> str:
    """format.js's fmtNum: a heatmap's scale as the page writes it."""
    return "0" if x == 0 else f"{x:.0f}" if abs(x) >= 100 else f"{x:#.3g}" if abs(x) >= 1 else f"{x:#.2g}"


def test_the_viewer_page_shows_the_planes_axes_and_heatmaps_python_computes(grown, open_page):
    """The generic viewer in Chromium, offline: at every snapshot each dot sits at its head's
    coordinates in planes_of's planes and each plane's axes span what frame_states gives the
    movie; a head's QK and OV heatmaps carry its circuits' largest |entry| as their scale, that
    entry drawn in the colour map's end colour; the timeline, trails and play work."""
    from headmovies.render.core.frame_states import frame_states, trail_length
    from headmovies.render.core.scatter_viewer import HEATMAP, colour_stops
    from headmovies.render.generic.heads import iter_circuits

    run_path, page_path = grown
    assert page_path.name == "viewer.html"
    with Run(run_path) as run:
        heads = find_heads(run)
        planes = planes_of(run, heads)
        circuits = [c for _, c in iter_circuits(run, heads)]
    states = frame_states(zip(planes.epochs, planes.coords), trail_epochs=trail_length(planes.epochs))
    limits = [s.limits for s in states]  # [T] of [P]
    page, errors, requests = open_page(page_path.resolve().as_uri())
    scatter_pages.check_opens_offline_and_fits(page, errors, requests, panels=4)
    assert [t.strip() for t in page.locator(".panel h2").all_inner_texts()] == planes.titles
    assert "train_acc 0.0%" in page.inner_text("#caption")
    for t, epoch in enumerate(planes.epochs.tolist()):
        page.locator("#scrubber").fill(str(epoch))
        assert page.get_attribute("#epoch", "data-snapshot") == str(t)
        for p in range(len(planes.titles)):
            dots = page.evaluate(f"window.headmovies.dots({p})")
            assert [d["label"] for d in dots] == ["L0H0", "L0H1"]
            want = planes.coords[t, p]
            np.testing.assert_allclose([d["x"] for d in dots], want.real, rtol=1e-6, atol=1e-9)
            np.testing.assert_allclose([d["y"] for d in dots], want.imag, rtol=1e-6, atol=1e-9)
            assert page.evaluate(f"window.headmovies.axis({p})") == pytest.approx(limits[t][p], rel=1e-5)
    page.click("#legend li[data-head=L0H1]")  # the last snapshot: one of the 40 that hold heatmaps
    assert page.inner_text("#head-info").startswith("head L0H1") and "heatmaps at epoch 40" in page.inner_text(
        "#head-info"
    )
    stops = colour_stops(HEATMAP)
    for name in ("qk", "ov"):
        X = circuits[-1][name][1]
        fig = page.locator(f"#head-info figure[data-map={name}]")
        assert float(fig.get_attribute("data-scale")) == pytest.approx(np.abs(X).max(), rel=1e-6)
        assert fig.locator("figcaption").inner_text().endswith(f"scale ±{fmt_num(np.abs(X).max())}")
        r, c = np.unravel_index(np.abs(X).argmax(), X.shape)
        cell = max(2, 192 // max(X.shape))
        rgb = fig.locator("canvas").evaluate(
            "(cv, [x, y]) => Array.from(cv.getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3))",
            [int(c * cell + cell // 2), int(r * cell + cell // 2)],
        )
        assert rgb == stops[-1 if X[r, c] > 0 else 0]
    scatter_pages.check_timeline_and_trails(page, plane=2)  # the OV plane where the heads grow
    scatter_pages.check_play_moves(page)
    assert errors == []


def test_show_viewer_runs_inside_its_sandboxed_iframe(grown, browser):
    """`headmovies.show(run, "viewer")`: the iframe's srcdoc page starts (no server, scripts
    only) and holds every snapshot."""
    run_path, _ = grown
    markup = headmovies.show(run_path, "viewer")._repr_html_()
    assert markup.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;') and 'sandbox="allow-scripts"' in markup
    ctx = browser.new_context(offline=True)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.set_content(markup)
    frame = page.frames[1]
    frame.wait_for_selector("body[data-state=ready]", timeout=15000)
    assert frame.evaluate("window.headmovies.epochs") == [0, 10, 20, 30, 40] and errors == []
    ctx.close()

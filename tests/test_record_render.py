"""Rendering any run (render/generic/): planes on cases with known answers, and a recorded
TransformerLens run rendered end to end (movie, figures, viewer, Jupyter) through the CLI."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import headmovies
from headmovies.render.generic.analysis import frequency_shares, key_frequencies
from headmovies.render.generic.heads import find_heads
from headmovies.render.generic.planes import planes_of, top_irrep_planes
from headmovies.runfile.reader import Run

ROOT = Path(__file__).resolve().parents[1]


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
    with headmovies.record(run, model, config={"p": p}, group_order=p, schedule=range(0, 41, 4)) as rec:
        for epoch in range(41):
            if epoch:
                loss = torch.nn.functional.cross_entropy(model(x)[:, -1], y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            rec.step(epoch, train_loss=loss.item() if epoch else float("nan"))
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
    page = (tmp_path / "v" / "viewer.html").read_text()
    data = json.loads(re.search(r'<script id="payload" type="application/json">(.*?)</script>', page, re.S)[1])
    assert len(data["epochs"]) == 11 and len(data["coords"]) == 11 * 4 * 4 * 2  # T x P x H x (x, y)
    maps = np.frombuffer(base64.b64decode(data["maps"]["data"]), np.int8)
    assert maps.size == 11 * 4 * (p * p + p * p) and np.abs(maps).max() == 127
    done = _cli("movie", str(tmp_path / "missing.h5"), "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "does not exist" in done.stderr

    shown = headmovies.show(run)
    assert shown._repr_html_().startswith(
        '<video controls loop muted playsinline style="max-width: 100%" src="data:video/mp4;base64,'
    )
    viewer = headmovies.show(run, "viewer")._repr_html_()
    assert viewer.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;') and "payload" in viewer


def test_the_viewer_page_scrubs_and_shows_a_heads_heatmaps(tmp_path, browser):
    """The generic viewer in Chromium: no script error, the last snapshot shown first, a head
    button selects that head's heatmaps (QK and OV), the slider moves to any snapshot."""
    from headmovies.render.generic.viewer import render_viewer

    record_function_run(tmp_path / "run.h5", lambda: fourier_weights(13, 4), group_order=13)
    page_path = render_viewer(tmp_path / "run.h5", tmp_path / "v")
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_path.resolve().as_uri())
    assert page.inner_text("#epoch") == "epoch 2"
    page.click("#heads button:nth-child(2)")
    captions = page.locator("#maps figcaption").all_inner_texts()
    assert [c.split(",")[0] for c in captions] == ["L0H1 QK (query down", "L0H1 OV (output down"]
    page.eval_on_selector("#scrub", "el => { el.value = 0; el.dispatchEvent(new Event('input')); }")
    assert page.inner_text("#epoch") == "epoch 0" and "train_acc 0.0%" in page.inner_text("#caption")
    assert errors == []
    page.close()

"""The movie in score space (render/generic/score_space.py): a run with probe scores and no
group is drawn one panel per layer at (previous-token, induction) score; `--view axes` keeps
the principal axes; `--view scores` on a run without a probe is one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tiny_models import TinyAttentionModel as Model

import headmovies
from headmovies.render.generic.score_space import ScoreMovie, score_coordinates, strip_metric
from headmovies.runfile.reader import Run

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)


def _record(path: Path, layers: int = 3, **kwargs) -> None:
    torch.manual_seed(0)
    model = Model(layers)
    with headmovies.Recorder(path, model, schedule=range(6), **kwargs) as rec:
        for epoch in range(6):
            with torch.no_grad():
                model.W_E.mul_(1.5)
            rec.step(epoch, train_loss=3.0 - 0.4 * epoch)


def _movie(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "headmovies", "movie", *args], env=env, capture_output=True, text=True)


def test_heads_move_in_score_space_one_panel_per_layer(tmp_path):
    path = tmp_path / "run.h5"
    _record(path)
    with Run(path) as run:
        epochs, coords, n_heads = score_coordinates(run)
        scores = run.head_scores()
        assert list(epochs) == list(range(6)) and n_heads == [2, 2, 2] and coords.shape == (6, 1, 6)
        np.testing.assert_allclose(coords[:, 0, 3].real, scores["previous_token"][:, 1, 1], rtol=1e-6)
        np.testing.assert_allclose(coords[:, 0, 3].imag, scores["induction"][:, 1, 1], rtol=1e-6)
        name, ep, values = strip_metric(run)
        assert name == "train_loss" and list(ep) == [0, 1, 2, 3, 4, 5] and values[-1] == 1.0
        movie = ScoreMovie(run, trail_epochs=2)
        frames = list(movie.frames())
        assert len(frames) == 6 and frames[0].shape[2] == 4 and frames[0].shape[:2] == movie.figure.size[::-1]
        assert not np.array_equal(frames[0], frames[-1])
    out = _movie(str(path), "--out", str(tmp_path / "m"), "--formats", "png")
    assert out.returncode == 0, out.stderr
    poster = np.asarray(Image.open(tmp_path / "m" / "movie.png"))
    assert poster.shape[:2] == frames[-1].shape[:2]
    axes = _movie(str(path), "--out", str(tmp_path / "a"), "--formats", "png", "--view", "axes")
    assert axes.returncode == 0 and "principal-axis planes" in axes.stderr


def test_view_scores_without_a_probe_is_one_line(tmp_path):
    path = tmp_path / "plain.h5"
    _record(path, layers=1, probe=None)
    out = _movie(str(path), "--out", str(tmp_path / "m"), "--formats", "png", "--view", "scores")
    assert out.returncode == 2 and "holds no probe scores" in out.stderr and out.stderr.count("\n") == 1
    default = _movie(str(path), "--out", str(tmp_path / "d"), "--formats", "png")
    assert default.returncode == 0 and "principal-axis planes" in default.stderr

"""The generic viewer (render/generic/viewer.py) of a run recorded by `headmovies.Recorder`, in
Debian's Chromium (the `open_page` fixture, tests/conftest.py): a metric logged every 50 steps
while snapshots come every 10 is drawn through its values, the y-axis is in the loss' own
units, and the page shows the probe's scores and attention patterns."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import headmovies
from headmovies.render.generic.viewer import render_viewer

STEPS, EVERY, VAL_EVERY = 300, 10, 50


def train_loss(e: int) -> float:
    return 4.0 * 0.995**e


def val_loss(e: int) -> float:
    return 4.2 * 0.995**e


class Model(nn.Module):
    def __init__(self, layers: int = 2):
        super().__init__()
        self.W_E = nn.Parameter(torch.randn(9, 8))
        self.attn = nn.ModuleList(nn.MultiheadAttention(8, 2, batch_first=True) for _ in range(layers))
        self.W_U = nn.Parameter(torch.randn(8, 9))

    def forward(self, tokens):
        x = self.W_E[tokens]
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        for a in self.attn:
            x = x + a(x, x, x, attn_mask=mask, need_weights=False)[0]
        return x @ self.W_U


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generic_viewer")
    path = folder / "run.h5"
    torch.manual_seed(0)
    model = Model()
    with headmovies.Recorder(path, model, schedule=range(0, STEPS + 1, EVERY)) as rec:
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

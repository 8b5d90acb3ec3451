"""`headmovies heads RUN [--epoch E] [--json]`: every head's probe scores at a snapshot, labelled
L{layer}H{head}, with the strongest head per score; one-line errors with exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import torch
from tiny_models import TinyAttentionModel as Model

import headmovies
from headmovies.runfile.reader import Run

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)


def _heads(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "headmovies", "heads", *args], env=env, capture_output=True, text=True)


def test_heads_prints_every_heads_scores_and_the_strongest(tmp_path):
    torch.manual_seed(0)
    model = Model()
    path = tmp_path / "run.h5"
    with headmovies.Recorder(path, model, schedule=[0, 5]) as rec:
        rec.step(0)
        with torch.no_grad():
            model.W_E.mul_(3)
        rec.step(5)
    out = _heads(str(path), "--epoch", "0", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    with Run(path) as run:
        scores = {k: v[0] for k, v in run.head_scores().items()}
        ics = float(run.in_context_scores()[0])
    assert got["epoch"] == 0 and got["snapshot"] == 1 and got["complete"] is True
    assert [h["head"] for h in got["heads"]] == ["L0H0", "L0H1", "L1H0", "L1H1"]
    for h in got["heads"]:
        for name in ("previous_token", "duplicate_token", "induction"):
            assert h[name] == round(float(scores[name][h["layer"], h["index"]]), 6)
    flat = int(np.argmax(scores["induction"]))
    assert got["strongest"]["induction"]["head"] == f"L{flat // 2}H{flat % 2}"
    assert got["in_context_score"] == round(ics, 6)
    text = _heads(str(path))
    assert text.returncode == 0 and "epoch 5 (snapshot 2 of 2)" in text.stdout
    assert "strongest induction: L" in text.stdout
    with Run(path) as run:  # the text's verdict: half a perfect score
        last = {k: v[-1] for k, v in run.head_scores().items()}
    strong = [f"L{i // 2}H{i % 2}" for i in np.flatnonzero(last["induction"].ravel() >= 0.25)]
    line = next(x for x in text.stdout.splitlines() if x.startswith("strongest induction"))
    assert line.endswith(f"at or above 0.25: {', '.join(strong)}" if strong else "none at or above 0.25"), line
    figures = subprocess.run(  # figures draws the scores over epochs and names the strongest heads
        [sys.executable, "-m", "headmovies", "figures", str(path), "--out", str(tmp_path / "f")],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
    )
    assert figures.returncode == 0, figures.stderr
    assert (tmp_path / "f" / "head_scores.png").stat().st_size > 10_000
    summary = json.loads((tmp_path / "f" / "summary.json").read_text())["head_scores"]
    assert summary["induction"]["final"] == {
        f"L{i // 2}H{i % 2}": round(float(v), 4) for i, v in enumerate(last["induction"].ravel())
    }
    assert summary["induction"]["strongest"] == got_last_best(text.stdout)
    with headmovies.Recorder(tmp_path / "live.h5", model, schedule=[0, 5]) as rec:  # read while written
        rec.step(0)
        live = _heads(str(tmp_path / "live.h5"))
        assert live.returncode == 0, live.stderr
        assert "(snapshot 1 of 1 so far: the run is still being written, or was stopped)" in live.stdout
        assert json.loads(_heads(str(tmp_path / "live.h5"), "--json").stdout)["complete"] is False


def got_last_best(stdout: str) -> str:
    """The head the text names strongest for induction."""
    return next(x for x in stdout.splitlines() if x.startswith("strongest induction")).split()[2]


def test_heads_errors_are_one_line(tmp_path):
    path = tmp_path / "plain.h5"
    with headmovies.Recorder(path, Model(), schedule=[0], probe=None) as rec:
        rec.step(0)
    out = _heads(str(path))
    assert out.returncode == 2 and "holds no probe scores" in out.stderr and out.stderr.count("\n") == 1
    with h5py.File(path, "r+") as f:  # as a built-in run without a probe would say it
        f.attrs["experiment"] = "orbits"
    out = _heads(str(path))
    assert out.returncode == 2 and "orbits runs record none" in out.stderr and out.stderr.count("\n") == 1
    with headmovies.Recorder(tmp_path / "run.h5", Model(), schedule=[0, 10]) as rec:
        rec.step(0)
        rec.step(10)
    out = _heads(str(tmp_path / "run.h5"), "--epoch", "7")
    assert out.returncode == 2 and "no snapshot at epoch 7; the nearest is at 10" in out.stderr


def test_damaged_probe_scores_fail_their_checksum_in_one_line(tmp_path):
    """Bytes of /probe/scores/induction changed on disk: `heads` says which dataset fails its
    checksum (exit 2), as a damaged weight does."""
    path = tmp_path / "run.h5"
    with headmovies.Recorder(path, Model(), schedule=[0, 1]) as rec:
        rec.step(0)
        rec.step(1)
    with h5py.File(path, "r") as f:
        info = f["probe/scores/induction"].id.get_chunk_info(1)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset)
        fh.write(b"\xff\xff\xff\xff")
    out = _heads(str(path))
    assert out.returncode == 2 and "/probe/scores/induction fails its checksum" in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1

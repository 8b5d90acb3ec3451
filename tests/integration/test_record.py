"""The recording API (`headmovies.Recorder`): a user's loop writes snapshots on the schedule,
metrics at any step, the same errors as the built-in trainers; a recording killed with SIGKILL
is readable, recoverable and resumes to the same bits as an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import headmovies
from headmovies.errors import ConfigError, RunFileError, RunLockedError, UserError
from headmovies.runfile.reader import Run

torch.set_num_threads(1)
ROOT = Path(headmovies.__file__).resolve().parents[1]  # the repository

# A tiny model and loop, run in a subprocess (SIGKILL) and in-process; deterministic on one thread.
LOOP = textwrap.dedent(
    """
    import sys, time, torch
    from torch import nn
    import headmovies
    torch.set_num_threads(1)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_E = nn.Parameter(torch.randn(7, 8))
            self.attn = nn.MultiheadAttention(8, 2, bias=False, batch_first=True)
            self.W_U = nn.Parameter(torch.randn(8, 7) / 3)

        def forward(self, tokens):
            x = self.W_E[tokens]
            return (x + self.attn(x, x, x, need_weights=False)[0])[:, -1] @ self.W_U

    def main(path, epochs, resume, pause):
        torch.manual_seed(0)
        model = Model()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        rec = headmovies.Recorder(path, model, config={"p": 7, "seed": 0}, group_order=7,
                                  schedule=range(0, epochs + 1, 2), resume=resume, optimizer=opt,
                                  checkpoint_seconds=0)
        start = max(rec.epoch, 0)
        rec.step(0)
        for epoch in range(start + 1, epochs + 1):
            g.manual_seed(1000 + epoch)  # draws depend on the epoch only: resumable
            x = torch.randint(0, 7, (16, 2), generator=g)
            loss = nn.functional.cross_entropy(model(x), (x[:, 0] + x[:, 1]) % 7)
            opt.zero_grad(); loss.backward(); opt.step()
            rec.step(epoch, train_loss=loss.item())
            time.sleep(pause)
        rec.close()

    if __name__ == "__main__":
        main(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "resume", float(sys.argv[4]))
    """
)


def _loop(tmp_path: Path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    return script


def _run(script: Path, path: Path, epochs: int, resume: bool, pause: float = 0.0) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    args = [sys.executable, str(script), str(path), str(epochs), "resume" if resume else "new", str(pause)]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _datasets(path: Path) -> tuple[np.ndarray, dict, dict]:
    with Run(path) as run:
        weights = {e: run.weights(t) for t, e in enumerate(run.epochs)}
        return run.epochs.copy(), weights, run.metrics()


def test_the_default_schedule_is_the_training_configs():
    """`default_schedule` writes the epochs a training run of TrainConfig's schedule writes (every
    25 through 4000, then every 100), without an end."""
    from headmovies.record import default_schedule
    from headmovies.train.config import TrainConfig
    from headmovies.train.schedule import config_schedule

    recorded = [e for e in range(6001) if default_schedule(e)]
    assert recorded == config_schedule(TrainConfig(epochs=6000)).tolist()
    assert recorded[159:163] == [3975, 4000, 4100, 4200] and len(recorded) == 161 + 20


def test_a_tiny_loop_records_weights_metrics_and_config(tmp_path):
    """Weights at a snapshot are the model's own then; metrics logged between snapshots are
    stored with the next one (NaN where none); a metric first seen later is added with NaN."""
    ns: dict = {}
    exec(compile(LOOP.replace('if __name__ == "__main__":', "if False:"), "loop", "exec"), ns)
    torch.manual_seed(0)
    model = ns["Model"]()
    path = tmp_path / "run.h5"
    seen = {}
    with headmovies.Recorder(path, model, config={"lr": 0.1}, group_order=7, schedule=[0, 3, 6]) as rec:
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(7):
            if epoch:
                loss = model(torch.tensor([[epoch % 7, 1]])).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
            if epoch == 2:
                rec.log(test_acc=0.5)
            wrote = rec.step(epoch, **({"train_loss": float(epoch)} if epoch else {}))
            assert wrote == (epoch in (0, 3, 6))
            if wrote:
                Wq = model.attn.in_proj_weight.detach().numpy()[:8]  # W_Q of both heads, rows = outputs
                seen[epoch] = (model.W_E.detach().numpy().copy(), Wq.copy())
    epochs, weights, metrics = _datasets(path)
    assert list(epochs) == [0, 3, 6]
    for e, (W_E, Wq) in seen.items():
        np.testing.assert_array_equal(weights[e]["W_E"], W_E)
        np.testing.assert_array_equal(weights[e]["blocks.0.attn.W_Q"][1], Wq[4:].T)  # head 1
    assert list(metrics["epoch"]) == [0, 3, 6]
    np.testing.assert_array_equal(metrics["train_loss"], [np.nan, 3.0, 6.0])
    np.testing.assert_array_equal(metrics["test_acc"], [np.nan, 0.5, np.nan])
    with Run(path) as run:
        assert run.experiment == "recorded" and run.config == {"lr": 0.1} and run.complete
        assert run.attrs()["group_order"] == 7 and run.attrs()["layers"] == ["attn"]
        assert "MultiheadAttention: 1 layer x 2 heads" in run.attrs()["adapter"]


def test_the_trainers_errors(tmp_path):
    model = nn.MultiheadAttention(8, 2)
    path = tmp_path / "run.h5"
    rec = headmovies.Recorder(path, model, schedule=[0, 1])
    rec.step(0)
    with pytest.raises(RunLockedError):
        headmovies.Recorder(path, model)
    with pytest.raises(UserError, match="training diverged by epoch 1 \\(train_loss not finite\\)"):
        rec.step(1, train_loss=float("nan"))
    rec.close()
    with pytest.raises(UserError, match="exists; pass resume=True to continue it or force=True to replace it"):
        headmovies.Recorder(path, model)
    with pytest.raises(ConfigError, match="different config \\(lr\\)"):
        headmovies.Recorder(path, model, config={"lr": 1}, resume=True)
    with pytest.raises(UserError, match="does not exist"):
        headmovies.Recorder(tmp_path / "none.h5", model, resume=True)
    headmovies.Recorder(path, model, force=True).close()  # never written to: the old file stays
    assert path.exists()


@pytest.mark.slow
def test_a_recording_killed_with_sigkill_is_readable_and_resumes_to_the_same_bits(tmp_path):
    script = _loop(tmp_path)
    whole, killed = tmp_path / "whole.h5", tmp_path / "killed.h5"
    done = _run(script, whole, 40, False)
    assert done.wait(120) == 0, done.stderr.read()

    proc = _run(script, killed, 40, False, pause=0.05)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # a live reader follows it (SWMR) until 5 snapshots
        if killed.exists():
            try:
                with Run(killed) as run:
                    if len(run) >= 5:
                        break
            except RunFileError:
                pass
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    epochs, _, _ = _datasets(killed)  # readable as killed
    assert 5 <= len(epochs) < 21 and list(epochs) == list(range(0, 2 * len(epochs), 2))
    clean = tmp_path / "clean.h5"
    out = subprocess.run(
        [sys.executable, "-m", "headmovies", "recover", str(killed), "--out", str(clean)],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert list(_datasets(clean)[0]) == list(epochs)

    resumed = _run(script, killed, 40, True)
    assert resumed.wait(120) == 0, resumed.stderr.read()
    a, b = _datasets(whole), _datasets(killed)
    assert list(a[0]) == list(b[0]) == list(range(0, 41, 2))
    for e in a[0]:
        for k in a[1][e]:
            assert np.array_equal(a[1][e][k], b[1][e][k]), (e, k)
    np.testing.assert_array_equal(a[2]["train_loss"], b[2]["train_loss"])
    with Run(whole) as one, Run(killed) as two:  # the default probe's records (/probe) too
        assert one.head_scores()["induction"].shape == (21, 1, 2)
        for name, scores in one.head_scores().items():
            np.testing.assert_array_equal(scores, two.head_scores()[name])
        np.testing.assert_array_equal(one.patterns(-1), two.patterns(-1))
    with Run(killed) as run:
        assert run.complete and json.loads(json.dumps(run.config)) == {"p": 7, "seed": 0}


def test_recover_names_the_recorder_and_a_checkpoint_only_where_there_is_one(tmp_path):
    """A recorded run killed after two snapshots, recorded without an optimizer (no checkpoint):
    the copy's message names no checkpoint; in place it says a Recorder(..., resume=True) goes on."""
    path = tmp_path / "k.h5"
    script = (
        "import os, sys, numpy as np, headmovies\n"
        "W = np.ones((2, 8, 4))\n"
        "weights = lambda: {0: {'W_Q': W, 'W_K': W, 'W_V': W, 'W_O': np.ones((2, 4, 8))}, 'W_E': np.ones((5, 8))}\n"
        "rec = headmovies.Recorder(sys.argv[1], weights, schedule=[0, 1, 2])\n"
        "rec.step(0)\nrec.step(1)\nos._exit(0)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    assert subprocess.run([sys.executable, "-c", script, str(path)], env=env).returncode == 0
    assert not (tmp_path / "k.h5.ckpt").exists()

    def recover(*argv: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "headmovies", "recover", *argv], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    copy = recover(str(path), "--out", str(tmp_path / "c.h5"))
    assert copy.strip().endswith(f"incomplete (training continues from {path}, not from the copy)"), copy
    in_place = recover(str(path))
    assert in_place.strip().endswith(f"incomplete (`Recorder({str(path)!r}, ..., resume=True)` continues it)"), in_place

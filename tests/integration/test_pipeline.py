"""Training side: schedule, config, run-file round trip, live reading, crash + resume, determinism,
and the fast grid model against the straightforward per-sample model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import headmovies
from headmovies import runfile
from headmovies.cli import main as pipeline_main
from headmovies.errors import RunFileError
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.tasks.orbits import all_inputs
from headmovies.train import config
from headmovies.train.loop import train
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.eq_errors import eq_error_pooled, eq_error_worst_input
from headmovies.train.orbits.losses import eq_loss, orbit_gather_index
from headmovies.train.orbits.model import AttentionLayer
from headmovies.train.orbits.task import OrbitTask
from headmovies.train.schedule import snapshot_epochs

ROOT = Path(headmovies.__file__).resolve().parents[1]  # the repository
TINY = [
    "p=5",
    "n_heads=3",
    "d_model=8",
    "d_head=2",
    "early_every=10",
    "switch_epoch=30",
    "late_every=20",
    "seed=0",
    "split=random",
]


def tiny_cfg(**kw) -> OrbitConfig:
    sets = dict(s.split("=") for s in TINY)
    sets.update({k: str(v) for k, v in kw.items()})
    return config.resolve(OrbitConfig, sets=sets)


# --- schedule -----------------------------------------------------------------------------------


def test_default_schedule_matches_seed():
    ep = snapshot_epochs(10000)
    assert ep[0] == 0 and ep[-1] == 10000
    assert np.all(np.diff(ep[ep <= 4000]) == 25) and ep[ep <= 4000][-1] == 4000
    assert np.all(np.diff(ep[ep >= 4000]) == 100)
    assert len(ep) == 161 + 60


def test_schedule_includes_final_epoch_and_log_early():
    assert snapshot_epochs(4030).tolist()[-3:] == [3975, 4000, 4030]
    assert snapshot_epochs(60, 25, 4000, 100).tolist() == [0, 25, 50, 60]
    assert snapshot_epochs(100, 25, 4000, 100, log_early=True).tolist()[:7] == [0, 1, 2, 4, 8, 16, 25]
    assert snapshot_epochs(0).tolist() == [0]


# --- config -------------------------------------------------------------------------------------


def test_config_layers_defaults_toml_and_sets(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text("lr = 0.01\nn_heads = 8\nresidual = true\n")
    cfg = config.resolve(OrbitConfig, config.load_toml(toml), config.parse_sets(["n_heads=4", "eq_weight=3"]))
    assert (cfg.lr, cfg.n_heads, cfg.residual, cfg.eq_weight, cfg.d_model) == (0.01, 4, True, 3.0, 128)


@pytest.mark.parametrize(
    "sets, message",
    [
        (["bogus=1"], "unknown config key 'bogus'"),
        (["n_heads=two"], "n_heads must be int"),
        (["n_heads=0"], "n_heads must be >= 1"),
        (["epochs=-1"], "epochs must be in 0..100,000,000, got -1"),
        (["train_frac=0"], "train_frac must be in (0, 1]"),
        (["train_frac=1.5"], "train_frac must be in (0, 1]"),
        (["residual=maybe"], "residual must be true or false"),
        (["split=thirds"], "split must be one of"),
        (["lr"], "--set expects KEY=VALUE"),
    ],
)
def test_bad_config_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys, sets, message):
    out = tmp_path / "run.h5"
    argv = ["train", "orbits", "--out", str(out), "--no-progress"]
    for s in sets:
        argv += ["--set", s]
    assert pipeline_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("error:")
    assert list(tmp_path.iterdir()) == []


def test_bad_toml_unknown_experiment_and_existing_output(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("lr = = 3\n")
    assert pipeline_main(["train", "orbits", "--config", str(bad)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert pipeline_main(["train", "orbits", "--config", str(tmp_path / "nope.toml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err
    assert pipeline_main(["train", "orbitz"]) == 2
    assert "unknown experiment 'orbitz'; known: " in capsys.readouterr().err
    existing = tmp_path / "run.h5"
    existing.write_bytes(b"precious")
    assert (
        pipeline_main(
            ["train", "orbits", "--out", str(existing), "--no-progress"] + sum((["--set", s] for s in TINY), [])
        )
        == 2
    )
    assert "exists and is not a readable run file; pass --force" in capsys.readouterr().err
    assert existing.read_bytes() == b"precious"


def test_reuse_sets_a_run_of_another_config_aside_and_never_replaces_a_foreign_file(tmp_path, capsys):
    """`train --reuse` (what `make movie` runs) after the config or a default changed: the old run
    moves, with its checkpoint, to run.previous.h5 (then run.previous-2.h5), and a new one trains."""
    out = tmp_path / "run.h5"
    sets = sum((["--set", s] for s in TINY + ["epochs=40"]), [])
    assert pipeline_main(["train", "orbits", "--out", str(out), "--no-progress"] + sets) == 0
    first = out.read_bytes()
    capsys.readouterr()
    assert pipeline_main(["train", "orbits", "--out", str(out), "--no-progress", "--reuse"] + sets) == 0
    assert "complete run with this config, reused" in capsys.readouterr().out and out.read_bytes() == first
    for k, (before, lr) in enumerate((("0.001", "0.002"), ("0.002", "0.003")), 1):
        assert (
            pipeline_main(
                ["train", "orbits", "--out", str(out), "--no-progress", "--reuse", "--set", f"lr={lr}"] + sets
            )
            == 0
        )
        aside = tmp_path / ("run.previous.h5" if k == 1 else "run.previous-2.h5")
        assert (
            f"{out} held a run of another config (lr {before} → {lr}): moved to {aside}; training anew"
            in capsys.readouterr().out
        )
        assert checkpoint_path(aside).exists() and (k > 1 or aside.read_bytes() == first)
        with runfile.open_for_reading(out) as f:
            assert runfile.read_config(f)["lr"] == float(lr) and runfile.is_complete(f)
    capsys.readouterr()
    stopped = tmp_path / "stopped.h5"  # incomplete, and its checkpoint is gone: cannot resume
    assert pipeline_main(["train", "orbits", "--out", str(stopped), "--no-progress", "--stop-at", "20"] + sets) == 0
    checkpoint_path(stopped).unlink()
    partial = stopped.read_bytes()
    assert pipeline_main(["train", "orbits", "--out", str(stopped), "--no-progress", "--reuse"] + sets) == 0
    aside = tmp_path / "stopped.previous.h5"
    assert (
        f"{stopped} held an incomplete run of this config without its checkpoint stopped.h5.ckpt, so it "
        f"cannot resume: moved to {aside}; training anew"
    ) in capsys.readouterr().out
    assert aside.read_bytes() == partial
    with runfile.open_for_reading(stopped) as f:
        assert runfile.is_complete(f)
    foreign = tmp_path / "notes.h5"
    foreign.write_bytes(b"precious")
    assert pipeline_main(["train", "orbits", "--out", str(foreign), "--no-progress", "--reuse"] + sets) == 2
    assert "exists and is not a readable run file: move it away, or pass --force" in capsys.readouterr().err
    assert foreign.read_bytes() == b"precious"
    folder = tmp_path / "folder.h5"
    folder.mkdir()
    assert pipeline_main(["train", "orbits", "--out", str(folder), "--no-progress", "--reuse"] + sets) == 2
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_exit_code_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "headmovies", "train", "orbits", "--set", "n_heads=0", "--out", str(tmp_path / "x.h5")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: n_heads must be >= 1, got 0"
    assert not (tmp_path / "x.h5").exists()


# --- model and losses ---------------------------------------------------------------------------


@pytest.mark.parametrize("residual", [False, True])
def test_grid_logits_equal_per_sample_forward(residual):
    torch.manual_seed(1)
    p = 7
    model = AttentionLayer(p, n_heads=3, d_model=16, d_head=2, residual=residual)
    x = torch.from_numpy(all_inputs(p))
    with torch.no_grad():
        ref = model(x)  # (N, 3, p)
        G = model.grid_logits()
    cells = torch.stack([G[x[:, 0], x[:, 1], x[:, 2]], G[x[:, 1], x[:, 0], x[:, 2]], G[x[:, 2], x[:, 0], x[:, 1]]], 1)
    torch.testing.assert_close(cells, ref, rtol=1e-5, atol=1e-5)


def test_grid_attention_gradient_is_exact():
    from headmovies.train.orbits.attention import GridAttention

    g = torch.Generator().manual_seed(0)
    M = torch.randn(3, 5, 5, dtype=torch.double, generator=g, requires_grad=True)
    R = torch.randn(3, 4, 5, dtype=torch.double, generator=g, requires_grad=True)  # (H, n_out, n)
    assert torch.autograd.gradcheck(GridAttention.apply, (M, R))


def test_grid_training_gradient_equals_per_sample_gradient():
    torch.manual_seed(2)
    p = 5
    model = AttentionLayer(p, n_heads=2, d_model=8, d_head=2, residual=True)
    x = torch.from_numpy(all_inputs(p))
    y = torch.stack([(x[:, 1] + x[:, 2]) % p, (x[:, 2] + x[:, 0]) % p, (x[:, 0] + x[:, 1]) % p], -1)
    torch.nn.functional.cross_entropy(model(x).reshape(-1, p), y.reshape(-1), reduction="sum").backward()
    ref = {k: v.grad.clone() for k, v in model.named_parameters()}
    model.zero_grad()
    G = model.grid_logits().log_softmax(-1)
    b, c = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    target = torch.from_numpy((b + c) % p).expand(p, p, p)
    (-3 * G.gather(-1, target[..., None]).sum()).backward()  # every cell is 3 (input, position) pairs
    for k, v in model.named_parameters():
        torch.testing.assert_close(v.grad, ref[k], rtol=1e-4, atol=1e-4)


def _brute_eq(logp: torch.Tensor, inputs: np.ndarray, p: int, m: int = 2):
    """Direct definitions (docs/math.md): mean squared loss and max relative error over shifts."""
    x = torch.from_numpy(all_inputs(p))
    ell = torch.stack(
        [logp[x[:, 0], x[:, 1], x[:, 2]], logp[x[:, 1], x[:, 0], x[:, 2]], logp[x[:, 2], x[:, 0], x[:, 1]]], 1
    ).double()  # (N, 3, p)

    def flat(xx):
        return xx[:, 0] * p * p + xx[:, 1] * p + xx[:, 2]

    sel = torch.from_numpy(inputs)
    total, errs = 0.0, []
    for s in range(1, p):
        d = ell[flat((x[sel] + s) % p)] - torch.roll(ell[sel], m * s, dims=-1)
        total += float(d.pow(2).sum())
        full = ell[flat((x + s) % p)] - torch.roll(ell, m * s, dims=-1)
        errs.append(float(full.norm() / ell.norm()))
    return total / (len(inputs) * (p - 1)), max(errs)


@pytest.mark.parametrize("eq_inputs", ["all", "train"])
def test_eq_loss_and_error_match_direct_definition(eq_inputs):
    torch.manual_seed(0)
    task = OrbitTask(tiny_cfg(p=6, eq_inputs=eq_inputs))
    with torch.no_grad():
        logp = task.model.grid_logits().log_softmax(-1)
    inputs = np.arange(6**3) if eq_inputs == "all" else task.train_idx
    loss, err = _brute_eq(logp, inputs, 6)
    assert float(eq_loss(logp, task.gather, task.w_eq)) == pytest.approx(loss, rel=1e-5)
    assert eq_error_pooled(logp, task.gather) == pytest.approx(err, rel=1e-6)
    assert err > 0.05  # a random layer is far from equivariant


def exactly_equivariant_layer(p: int, m: int = 2, d_head: int = 2, seed: int = 0) -> AttentionLayer:
    """One regular orbit of p heads: W_E = W_U = I (d_model = p), head s = head 0 shifted by s,
    i.e. M_s = T_s M_0 T_s^-1 and R_s = T_{ms} R_0 T_s^-1 (docs/math.md, "The cyclic group and orbits")."""
    g = torch.Generator().manual_seed(seed)
    model = AttentionLayer(p, n_heads=p, d_model=p, d_head=d_head, residual=False)
    q0, k0, v0 = (torch.randn(p, d_head, generator=g) for _ in range(3))
    o0 = torch.randn(d_head, p, generator=g)
    with torch.no_grad():
        model.W_E.copy_(torch.eye(p))
        model.W_U.copy_(torch.eye(p))
        for s in range(p):
            model.W_Q[s] = torch.roll(q0, s, 0)  # W_Q[s][a+s] = W_Q[0][a]
            model.W_K[s] = torch.roll(k0, s, 0)
            model.W_V[s] = torch.roll(v0, s, 0)
            model.W_O[s] = torch.roll(o0, m * s, 1)  # W_O[s][:, c+ms] = W_O[0][:, c]
    return model


def _brute_worst_input(model: AttentionLayer, p: int, m: int = 2) -> np.ndarray:
    """||l(x+s) - roll_{ms} l(x)||_F / ||l(x)||_F [N, p] (s = 0..p-1) for every input, one by one
    through the per-sample path `AttentionLayer.forward` (no grid, no gather), in float64."""
    x = torch.from_numpy(all_inputs(p))
    with torch.no_grad():
        ell = model(x).log_softmax(-1).double()  # (N, 3, p)

    def flat(xx):
        return xx[:, 0] * p * p + xx[:, 1] * p + xx[:, 2]

    ratio = np.zeros((len(x), p))
    for s in range(p):
        for i in range(len(x)):
            d = ell[int(flat((x[i : i + 1] + s) % p))] - torch.roll(ell[i], m * s, dims=-1)
            ratio[i, s] = float(d.norm() / ell[i].norm())
    return ratio


@pytest.mark.parametrize("p,bump", [(6, 0.0), (6, 0.05), (7, 0.05), (5, 1.0)])
def test_worst_input_error_matches_per_input_brute_force(p, bump):
    """An exactly equivariant layer gives ~0; perturbed (one head's W_Q moved by `bump`), the grid
    computation gives the brute force's max over inputs and shifts, at a pair where the brute
    force reaches it, and never less than the pooled error."""
    model = exactly_equivariant_layer(p)
    with torch.no_grad():
        model.W_Q[0] += bump
        logp = model.grid_logits().log_softmax(-1)
    gather = orbit_gather_index(p, 2)
    err, x, s = eq_error_worst_input(logp, gather)
    brute = _brute_worst_input(model, p)
    if bump == 0:
        assert err < 1e-6 and brute.max() < 1e-6
        return
    assert brute.max() > 1e-3  # the perturbation is visible
    assert err == pytest.approx(brute.max(), rel=1e-4)
    assert brute[(x[0] * p + x[1]) * p + x[2], s] == pytest.approx(brute.max(), rel=1e-4)
    assert 1 <= s < p and all(0 <= v < p for v in x)
    assert err > eq_error_pooled(logp, gather)


@pytest.mark.parametrize("p", [6, 7, 24])
def test_equivariance_error_of_exact_layer_is_tiny(p):
    model = exactly_equivariant_layer(p)
    gather = orbit_gather_index(p, 2)
    with torch.no_grad():
        logp = model.grid_logits().log_softmax(-1)
        assert eq_error_pooled(logp, gather) < 1e-6 and eq_error_worst_input(logp, gather)[0] < 1e-6
        # the loss in float64, where an exact layer's is rounding (float32's floor, about 1e-10 at
        # p = 24, depends on the kernel's order of operations)
        w = torch.full((p, p * p), 3.0, dtype=torch.float64)
        assert float(eq_loss(model.double().grid_logits().log_softmax(-1), gather, w)) < 1e-24
        model.float()
        # breaking the orbit (perturb one head) makes the error large
        model.W_Q[0] += 1.0
        logp = model.grid_logits().log_softmax(-1)
        assert eq_error_worst_input(logp, gather)[0] > eq_error_pooled(logp, gather) > 1e-3


def test_sequence_equivariance_loss_vanishes_only_for_an_equivariant_layer():
    p = 6
    task = OrbitTask(tiny_cfg(p=p, n_heads=p, d_model=p, eq_seq_lens="5", eq_seq_batch=8))
    with torch.no_grad():
        random_loss = float(task._seq_eq_loss(5))
    task.model = exactly_equivariant_layer(p)
    with torch.no_grad():
        assert float(task._seq_eq_loss(5)) < 1e-10 < 1e-3 < random_loss


def test_index_select_gathers_give_advanced_indexings_gradients_bit_for_bit():
    """eq_loss and seq_eq_loss gather with index_select (fast) where the census runs were trained
    with advanced indexing, and seq_eq_loss sums attention per key token with scatter_add where
    they had a product with one-hot tokens; the runs reproduce only if both give the same
    gradients to the bit. Here with the default run's shapes (p = 24, 32 heads, 16 sequences of
    length 6: each QK cell collects about 24 terms, so a different summation order would show),
    one sequence with a token four times (three additions whose order would show)."""
    from headmovies.tasks.orbits import M_SHIFT
    from headmovies.train.orbits.losses import seq_eq_loss, seq_eq_loss_indexed

    n, H, B, L = 24, 32, 16, 6
    g = torch.Generator().manual_seed(0)
    M0, R0 = torch.randn(H, n, n, generator=g), torch.randn(H, n, n, generator=g)
    x = torch.randint(0, n, (B, L), generator=g)
    x[0] = torch.tensor([3, 3, 7, 3, 1, 3])

    grads = []
    for f in (seq_eq_loss, seq_eq_loss_indexed):  # M[:, t_i, t_j] as the census code has it
        M, R = M0.clone().requires_grad_(), R0.clone().requires_grad_()
        loss = f(M, R, x)
        loss.backward()
        grads.append((loss.detach(), M.grad, R.grad))
    assert all(torch.equal(a, b) for a, b in zip(*grads))
    assert float(grads[0][1].abs().max()) > 0

    gather, w = orbit_gather_index(n, M_SHIFT), torch.rand(n, n * n, generator=g)
    logp0 = torch.randn(n, n, n, n, generator=g).log_softmax(-1)
    grads = []
    for fast in (True, False):
        logp = logp0.clone().requires_grad_()
        if fast:
            loss = eq_loss(logp, gather, w)
        else:  # eq_loss with logp.reshape(-1)[gather]
            lr = logp.reshape(-1)[gather].view(n, n * n, n)
            mu = (w[:, :, None] * lr).sum(0) / w.sum(0).clamp_min(1e-12)[:, None]
            d2 = (lr - mu).pow(2).sum(-1)
            loss = (n * (w * d2).sum() + (w.sum(0) * d2).sum()) / (w.sum() / 3 * (n - 1))
        loss.backward()
        grads.append((loss.detach(), logp.grad))
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_sequence_terms_in_flight_together_keep_their_own_buffers():
    """seq_eq_loss reuses its large tensors from call to call (seq_attention.py): two terms
    built before one backward (a batch of runs does so) must each keep theirs, and give the
    gradients of two separate backwards (a second backward: tests/unit/test_seq_attention.py)."""
    from headmovies.train.orbits.losses import seq_eq_loss

    n, H, B, L = 24, 32, 16, 6
    g = torch.Generator().manual_seed(1)
    M0, R0 = torch.randn(H, n, n, generator=g), torch.randn(H, n, n, generator=g)
    xs = [torch.randint(0, n, (B, L), generator=g) for _ in range(2)]
    apart = []
    for x in xs:
        M, R = M0.clone().requires_grad_(), R0.clone().requires_grad_()
        seq_eq_loss(M, R, x).backward()
        apart.append((M.grad, R.grad))
    M, R = M0.clone().requires_grad_(), R0.clone().requires_grad_()
    first, second = (seq_eq_loss(M, R, x) for x in xs)
    with torch.no_grad():
        assert torch.equal(seq_eq_loss(M, R, xs[0]), first.detach())  # a third call between them
    (first + second).backward()
    assert torch.equal(M.grad, apart[0][0] + apart[1][0]) and torch.equal(R.grad, apart[0][1] + apart[1][1])


@pytest.mark.slow
def test_overlapped_step_trains_the_same_run_bit_for_bit():
    """`train --overlap` computes the grid term in a second thread beside the sequence terms; its
    gradients must enter autograd where the grid term's would, or runs (the default movie's, the
    census's) would not reproduce. Default shapes, sequence terms in both phases (two lengths in
    the second), pruning and the OV-bias penalty; compared after every step of both phases. The
    overlapped run asks for 2 threads (`make movie` does): its overlapped steps use one a term."""
    from headmovies.train.orbits.config import OrbitConfig
    from headmovies.train.orbits.task import OrbitTask

    cfg = OrbitConfig(
        epochs=40,
        eq_start=0,
        eq_ramp=5,
        refine_start=20,
        refine_ramp=5,
        eq_seq_lens="3",
        refine_seq_lens="2,6",
        refine_prune=0.25,
        refine_ov_bias_weight=0.01,
    )
    plain, overlapped = [OrbitTask(cfg) for _ in range(2)]
    overlapped.model.load_state_dict(plain.model.state_dict())
    overlapped.overlap, overlapped.threads = True, 2
    start = [p.detach().clone() for p in plain.model.parameters()]
    for epoch in range(1, cfg.epochs + 1):
        plain.step(epoch)
        overlapped.step(epoch)
        assert all(torch.equal(a, b) for a, b in zip(plain.model.parameters(), overlapped.model.parameters())), epoch
    with_seq_terms = [e for e in range(1, cfg.epochs + 1) if plain.schedule(e - 1)[2] > 0]  # lambda > 0
    assert with_seq_terms[0] < cfg.refine_start  # some in the first phase
    assert overlapped.overlapped_steps == len(with_seq_terms) and plain.overlapped_steps == 0
    assert all(not torch.equal(a, b) for a, b in zip(start, plain.model.parameters()))


@pytest.mark.parametrize("overlap", [True, False])
def test_only_grid_term_epochs_use_more_threads(overlap):
    """`train --threads 2` (`make movie`): the first phase (grid term alone) runs on 2 torch
    threads; the second phase's epochs, with sequence terms, on one (a term each when overlapped),
    overlap or not (a one-core machine has none), because more threads change their bits."""
    from headmovies.train.orbits.config import OrbitConfig
    from headmovies.train.orbits.task import OrbitTask

    cfg = OrbitConfig(
        p=5, n_heads=3, d_model=8, d_head=2, epochs=8, eq_start=0, eq_ramp=2, refine_start=4, refine_ramp=2
    )
    task = OrbitTask(cfg)
    task.overlap, task.threads = overlap, 2
    seen = []
    try:
        for epoch in range(1, cfg.epochs + 1):
            task.step(epoch)
            seen.append(torch.get_num_threads())
    finally:
        torch.set_num_threads(1)
    assert seen == [2] * 4 + [1] * 4 and task.overlapped_steps == (4 if overlap else 0)


def test_grid_term_gives_the_same_gradients_on_one_thread_and_on_two():
    """An overlapped second-phase step widens its grid term from one torch thread to `threads`
    once the sequence terms are done (`OrbitTask._grid_term_grads`), so its bits must not depend
    on the thread count. Default shapes, after a few first-phase steps; widened before the grid
    attention's backward, where a step widens it."""
    import threading

    from headmovies.train.orbits.config import OrbitConfig
    from headmovies.train.orbits.task import OrbitTask

    task = OrbitTask(OrbitConfig())
    task.threads = 2
    before = torch.get_num_threads()
    try:
        for epoch in (3000, 3001, 3002):
            task.step(epoch)
        narrow = task._grid_term_grads(10.0)
        assert torch.get_num_threads() == 1
        waiting = threading.Event()
        waiting.set()
        wide = task._grid_term_grads(10.0, waiting)
        assert torch.get_num_threads() == 2  # it widened
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(narrow, wide))
    assert float(narrow[0].abs().max()) > 0 and float(narrow[1].abs().max()) > 0


@pytest.mark.slow
def test_compiled_grid_kernel_agrees_with_the_hand_written_one():
    """grid_kernel=compiled (torch.compile of the same forward and backward; compiling takes tens
    of seconds) rounds differently, so its runs are other runs, but the same model: values and
    gradients within 1e-5 of the hand-written kernel's (relative to the largest), and a default-
    shape task's weights within 1e-4 after three steps of the first phase."""
    from headmovies.train.orbits.attention import CompiledGridAttention, GridAttention
    from headmovies.train.orbits.config import OrbitConfig
    from headmovies.train.orbits.task import OrbitTask

    g = torch.Generator().manual_seed(0)
    M0, R0 = 3 * torch.randn(32, 24, 24, generator=g), torch.randn(32, 24, 24, generator=g).mT
    grad = torch.randn(24, 24, 24, 24, generator=g)
    res = []
    for kernel in (GridAttention, CompiledGridAttention):
        M, R = M0.clone().requires_grad_(), R0.clone().requires_grad_()
        kernel.apply(M, R).backward(grad)
        res.append((kernel.apply(M0, R0), M.grad, R.grad))
    for ours, compiled in zip(*res):
        assert float((compiled - ours).abs().max()) <= 1e-5 * float(ours.abs().max())

    tasks = [OrbitTask(OrbitConfig(grid_kernel=k)) for k in ("eager", "compiled")]
    tasks[1].model.load_state_dict(tasks[0].model.state_dict())
    for epoch in (3000, 3001, 3002):
        for task in tasks:
            task.step(epoch)
    with torch.no_grad():
        for a, b in zip(*(t.model.parameters() for t in tasks)):
            assert float((a - b).abs().max()) <= 1e-4 * float(a.abs().max())


@pytest.mark.slow
def test_train_says_whether_overlap_took_effect(tmp_path, capsys):
    """The closing line counts the overlapped epochs, so a user sees `--overlap` work (or not)."""
    sets = sum(
        (
            ["--set", s]
            for s in TINY
            + ["epochs=40", "eq_start=0", "eq_ramp=5", "refine_start=20", "refine_ramp=5", "refine_seq_lens=2"]
        ),
        [],
    )
    for flag, expected in (
        ("--overlap", "; 20 epochs overlapped their grid term\n"),  # the second phase's
        ("--no-overlap", "s\n"),
    ):
        assert (
            pipeline_main(["train", "orbits", "--out", str(tmp_path / f"run{flag}.h5"), "--no-progress", flag, *sets])
            == 0
        )
        out = capsys.readouterr().out
        assert out.endswith(expected) and ("overlapped" in out) == (flag == "--overlap"), out
    assert (
        pipeline_main(
            [
                "train",
                "orbits",
                "--out",
                str(tmp_path / "r.h5"),
                "--no-progress",
                "--overlap",
                *sets,
                "--set",
                "residual=true",
            ]
        )
        == 0
    )
    assert "; --overlap had no effect (no epoch of this run has terms to overlap)" in capsys.readouterr().out


# --- run file -----------------------------------------------------------------------------------


def test_run_file_round_trip(tmp_path):
    out = tmp_path / "run.h5"
    cfg = tiny_cfg(epochs=60)
    result = train("orbits", cfg, out, progress=False)
    with runfile.open_for_reading(out) as f:
        assert f["snapshots/epoch"][()].tolist() == [0, 10, 20, 30, 50, 60]
        assert f["metrics/epoch"][()].tolist() == [0, 10, 20, 30, 50, 60]
        shapes = {k: f["snapshots"][k].shape for k in runfile.weight_names(f)}
        assert shapes == {
            "W_E": (6, 5, 8),
            "W_Q": (6, 3, 8, 2),
            "W_K": (6, 3, 8, 2),
            "W_V": (6, 3, 8, 2),
            "W_O": (6, 3, 2, 8),
            "W_U": (6, 8, 5),
        }
        assert all(f["snapshots"][k].dtype == np.float32 for k in shapes)
        assert f["snapshots/W_Q"].chunks[0] == 1
        assert set(f["metrics"]) == {
            "epoch",
            "train_loss",
            "train_acc",
            "heldout_loss",
            "heldout_acc",
            "eq_loss",
            "eq_error_pooled",
            "eq_error_worst_input",
        }
        a = f.attrs
        assert a["schema_version"] == 1 and a["experiment"] == "orbits" and a["seed"] == 0
        assert (a["n"], a["m"]) == (5, 2) and runfile.is_complete(f)
        assert json.loads(a["config"])["n_heads"] == 3
        assert {"torch", "headmovies"} <= set(json.loads(a["versions"])) and "created" in a and "git_commit" in a
        machine = json.loads(a["machine"])  # provenance: the CPU that trained it (census.md, "Provenance")
        assert machine["cores"] == len(os.sched_getaffinity(0)) and machine["cpu"] and machine["system"]
        train_idx, held_idx = f["split/train"][()], f["split/heldout"][()]
        assert len(train_idx) == round(0.3 * 125) and len(np.intersect1d(train_idx, held_idx)) == 0
        assert len(train_idx) + len(held_idx) == 125
        np.testing.assert_array_equal(f["snapshots/W_Q"][-1], result_weights(result.path)["W_Q"])
    assert result.metrics["train_acc"] == pytest.approx(float(h5py.File(out, "r")["metrics/train_acc"][-1]))


def result_weights(path):
    with runfile.open_for_reading(path) as f:
        return {k: f["snapshots"][k][-1] for k in runfile.weight_names(f)}


def test_same_seed_twice_gives_identical_weights(tmp_path):
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    train("orbits", tiny_cfg(epochs=40), a, progress=False)
    train("orbits", tiny_cfg(epochs=40), b, progress=False)
    wa, wb = result_weights(a), result_weights(b)
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k])
    train("orbits", tiny_cfg(epochs=40, seed=1), b, progress=False, force=True)
    assert not np.array_equal(result_weights(b)["W_Q"], wa["W_Q"])


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # tiny models: one thread is fastest


def _cli(out, *extra, epochs=3000):
    return [
        sys.executable,
        "-m",
        "headmovies",
        "train",
        "orbits",
        "--out",
        str(out),
        "--no-progress",
        "--checkpoint-every",
        "0",
        "--set",
        f"epochs={epochs}",
        *sum((["--set", s] for s in TINY), []),
        *extra,
    ]


def _wait_for_snapshots(path: Path, count: int, proc, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "training ended before the test could observe it"
        if path.exists():
            try:
                with runfile.open_for_reading(path) as f:
                    if f[runfile.SNAPSHOTS][runfile.EPOCH].shape[0] >= count:
                        return
            except RunFileError:
                pass
        time.sleep(0.05)
    raise AssertionError("no snapshots appeared")


@pytest.mark.slow
def test_reader_sees_only_complete_snapshots_while_run_grows(tmp_path):
    from headmovies.runfile.reader import Run

    out = tmp_path / "live.h5"
    proc = subprocess.Popen(
        _cli(out, epochs=800), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    seen = {}
    try:
        _wait_for_snapshots(out, 2, proc)
        with Run(out) as run:
            while proc.poll() is None:
                run.refresh()
                t = len(run) - 1
                seen[int(run.epochs[t])] = run.weights(t, ["W_Q", "W_U"])
                time.sleep(0.02)
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == 0 and len(seen) >= 3
    with Run(out) as run:
        final = {int(e): i for i, e in enumerate(run.epochs)}
        for epoch, w in seen.items():
            full = run.weights(final[epoch], ["W_Q", "W_U"])
            np.testing.assert_array_equal(w["W_Q"], full["W_Q"])
            np.testing.assert_array_equal(w["W_U"], full["W_U"])


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted_run(tmp_path):
    epochs = 600
    ref = tmp_path / "ref.h5"
    subprocess.run(_cli(ref, epochs=epochs), cwd=ROOT, env=ENV, check=True, capture_output=True)
    out = tmp_path / "killed.h5"
    proc = subprocess.Popen(
        _cli(out, epochs=epochs), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _wait_for_snapshots(out, 8, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with runfile.open_for_reading(out) as f:  # the killed file opens and holds its snapshots
        killed_at = f[runfile.SNAPSHOTS][runfile.EPOCH].shape[0]
        assert killed_at >= 8 and not runfile.is_complete(f)
    assert checkpoint_path(out).exists()
    done = subprocess.run(_cli(out, "--resume", epochs=epochs), cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with runfile.open_for_reading(ref) as a, runfile.open_for_reading(out) as b:
        np.testing.assert_array_equal(a["snapshots/epoch"][()], b["snapshots/epoch"][()])
        for k in runfile.weight_names(a):
            np.testing.assert_array_equal(a["snapshots"][k][()], b["snapshots"][k][()])
        np.testing.assert_array_equal(a["metrics/train_loss"][()], b["metrics/train_loss"][()])
        assert runfile.is_complete(b)


def test_resume_refuses_other_config_and_missing_checkpoint(tmp_path, capsys):
    out = tmp_path / "run.h5"
    train("orbits", tiny_cfg(epochs=20), out, progress=False)
    argv = ["train", "orbits", "--out", str(out), "--resume", "--no-progress"] + sum((["--set", s] for s in TINY), [])
    assert pipeline_main(argv + ["--set", "lr=0.5", "--set", "epochs=40"]) == 2
    assert "different config (lr)" in capsys.readouterr().err
    # extending the run is allowed; the closing line counts only the epochs this call trained
    assert pipeline_main(argv + ["--set", "epochs=40"]) == 0
    assert "epochs 21-40 in " in capsys.readouterr().out
    with runfile.open_for_reading(out) as f:
        assert f["snapshots/epoch"][()].tolist() == [0, 10, 20, 30, 40]
    # shrinking it is not: the checkpoint is already past the new final epoch
    before = out.read_bytes()
    assert pipeline_main(argv + ["--set", "epochs=30"]) == 2
    assert "checkpoint is already at epoch 40" in capsys.readouterr().err
    assert out.read_bytes() == before
    checkpoint_path(out).unlink()
    assert pipeline_main(argv + ["--set", "epochs=60"]) == 2
    assert "checkpoint" in capsys.readouterr().err


@pytest.mark.slow
def test_a_diverging_run_stops_with_one_line_and_keeps_its_snapshots(tmp_path):
    """A loss weight so large that the loss overflows: the trainer stops at the first snapshot whose
    loss is not finite, says so in one line (exit 2), and the file keeps the snapshots so far."""
    out = tmp_path / "nan.h5"
    done = subprocess.run(
        _cli(out, "--set", "ov_bias_weight=1e308", epochs=60), cwd=ROOT, env=ENV, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: training diverged by epoch 10 (") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
    with runfile.open_for_reading(out) as f:
        assert list(f["snapshots/epoch"][()]) == [0, 10] and not runfile.is_complete(f)
        assert not np.isfinite(f["metrics/train_loss"][-1])

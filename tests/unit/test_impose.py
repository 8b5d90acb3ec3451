"""The imposed-orbit experiment (train/orbits/impose.py, config impose_orbit_at): a deformed
layer whose frequency groups fit (a square at w = 6 and a 12-gon at w = 2) becomes exact orbits,
the head of a group that does not fit is left alone, and a run file says the orbits are imposed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from headmovies.render.orbits.check import check_orbits
from headmovies.train import config
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.impose import RULE, impose_orbits
from headmovies.train.orbits.model import AttentionLayer
from headmovies.train.orbits.task import OrbitTask

from equivariant import equivariant_weights

N, MS = 24, 2


def deformed_layer(noise: float = 0.05) -> AttentionLayer:
    """Seed 5 of `equivariant_weights`: heads 0-3 an exact square at w = 6, heads 4-15 an exact
    12-gon at w = 2, head 16 alone at w = 5; then W_Q, W_V of every orbit head get `noise`
    relative Gaussian noise, enough to break both orbits at 2 %."""
    W = [torch.from_numpy(w).float() for w in equivariant_weights(N, MS, (4, 12), 48, 4, seed=5, extra_heads=1)]
    layer = AttentionLayer(N, 17, 48, 4, False)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, w in zip(("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U"), W):
            getattr(layer, name).copy_(w)
        for name in ("W_Q", "W_V"):
            w = getattr(layer, name)
            w[:16] += noise * w[:16].std() * torch.randn(w[:16].shape, generator=gen)
    return layer


def report_of(layer: AttentionLayer):
    M, R = (x.detach().double().numpy() for x in layer.circuits())
    return check_orbits(M, R, N, MS)


def test_fitting_groups_become_exact_orbits_and_the_others_stay():
    layer = deformed_layer()
    before = report_of(layer)
    assert not [o for o in before.orbits if o.size > 1]  # both orbits broken by the noise
    assert sorted((g.omega, len(g.heads)) for g in before.groups) == [(2, 12), (5, 1), (6, 4)]
    extra = {k: getattr(layer, k)[16].clone() for k in ("W_Q", "W_K", "W_V", "W_O")}
    imposed = impose_orbits(layer, MS)
    assert imposed == {2: list(range(4, 16)), 6: [0, 1, 2, 3]}
    after = report_of(layer)
    assert sorted((o.size, o.heads[0]) for o in after.orbits if o.size > 1) == [(4, 0), (12, 4)]
    assert max(o.worst_error for o in after.orbits if o.size > 1) < 1e-5  # exact, to float32 rounding
    for g in after.groups:
        if g.omega in (2, 6):
            np.testing.assert_allclose(g.spectrum, 0, atol=1e-5)
    for k, w in extra.items():
        assert torch.equal(getattr(layer, k)[16], w), k  # the lone w = 5 head is not touched
    # the nearest orbit: the projection lands near the exact layer the noise was added to (the
    # centred QK circuits, which the softmax sees), nearer than the deformed layer was
    with torch.no_grad():
        exact, deformed, imposed_m = (x.circuits()[0][:16] for x in (deformed_layer(0.0), deformed_layer(), layer))
    centred = [m - m.mean(-1, keepdim=True) for m in (exact, deformed, imposed_m)]
    before_dist = float((centred[1] - centred[0]).norm() / centred[0].norm())
    after_dist = float((centred[2] - centred[0]).norm() / centred[0].norm())
    assert after_dist < before_dist


def test_nothing_fits_nothing_changes():
    layer = deformed_layer()
    with torch.no_grad():
        layer.W_V[4] = 0  # a dead head: the 12-gon's group has 11 live heads, no longer a multiple of 12
        layer.W_O[0] = 0  # and the square's 3
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    assert impose_orbits(layer, MS) == {}
    assert all(torch.equal(before[k], v) for k, v in layer.state_dict().items())


def test_a_run_imposes_at_its_epoch_and_says_so():
    # seed 3: at epoch 3 both heads sit at w = 2 of C_4, a group of 2 = N_2 (it fits)
    sets = {"p": "4", "n_heads": "2", "d_model": "8", "d_head": "2", "epochs": "5", "impose_orbit_at": "3", "seed": "3"}
    cfg = config.resolve(OrbitConfig, sets=sets)
    torch.manual_seed(cfg.seed)
    task = OrbitTask(cfg)
    attrs = task.attrs()
    assert json.loads(attrs["imposed_orbits"]) == {"epoch": 3, "rule": RULE}
    for epoch in range(1, 3):
        task.step(epoch)
    assert task.imposed == {}  # not before epoch 3
    task.step(3)  # epoch 3 ends with the projection: its snapshot shows the exact orbit
    assert task.imposed == {2: [0, 1]}
    M, R = (x.detach().double().numpy() for x in task.model.circuits())
    report = check_orbits(M, R, 4, MS)
    assert [(o.size, o.heads) for o in report.orbits] == [(2, [0, 1])] and report.orbits[0].worst_error < 1e-5
    assert len(task.optimizer.state) == 0  # fresh AdamW moments
    task.step(4)  # and training goes on from it
    assert "imposed_orbits" not in OrbitTask(config.resolve(OrbitConfig, sets={**sets, "impose_orbit_at": "0"})).attrs()


def test_impose_orbit_at_must_lie_inside_the_run():
    with pytest.raises(Exception, match="impose_orbit_at must be an epoch"):
        config.resolve(OrbitConfig, sets={"epochs": "100", "impose_orbit_at": "100"})


def test_the_rank_cut_keeps_equal_singular_values_together():
    """A matrix with singular values 5, 2, 2 cut to rank 2 keeps rank 1: half of the equal pair
    would depend on the SVD's arbitrary basis of their plane (a shift turns one into the other)."""
    from headmovies.train.orbits.impose import _low_rank

    Q1, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((6, 6)))
    Q2, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((6, 6)))
    X = Q1[:, :3] @ np.diag([5.0, 2.0, 2.0]) @ Q2[:, :3].T
    A, B = _low_rank(X, 2)
    assert A.shape == (6, 2) and not A[:, 1].any()
    np.testing.assert_allclose(A @ B.T, 5.0 * np.outer(Q1[:, 0], Q2[:, 0]), atol=1e-12)
    A, B = _low_rank(X, 3)
    np.testing.assert_allclose(A @ B.T, X, atol=1e-12)

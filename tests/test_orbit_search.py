"""The search helpers of bench/orbit_search.py and the equivariance-term options they explore
(eq_start / eq_ramp, eq_seq_len): exact values on hand-built cases."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from pipeline import config
from pipeline.experiments.orbits import M_SHIFT, OrbitConfig, OrbitTask
from tests.equivariant import equivariant_weights

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import orbit_search  # noqa: E402


def task_of(**sets) -> OrbitTask:
    cfg = config.resolve(OrbitConfig, sets={k: str(v) for k, v in sets.items()})
    torch.manual_seed(cfg.seed)
    return OrbitTask(cfg)


def load_equivariant(task: OrbitTask, **kw) -> None:
    names = ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")
    with torch.no_grad():
        for name, w in zip(names, equivariant_weights(**kw)):
            getattr(task.model, name).copy_(torch.from_numpy(w).float())


def test_eq_weight_is_zero_then_ramps_linearly():
    task = task_of(p=5, n_heads=2, d_model=8, eq_weight=2.0, eq_start=5, eq_ramp=4)
    assert [task._eq_weight(e) for e in (0, 4, 5, 6, 8, 100)] == [0.0, 0.0, 0.5, 1.0, 2.0, 2.0]
    no_ramp = task_of(p=5, n_heads=2, d_model=8, eq_weight=3.0, eq_start=0, eq_ramp=0)
    assert no_ramp._eq_weight(0) == 3.0


def test_sequence_term_equals_its_definition():
    """mean over x (every shift of each drawn sequence) and s != 0 of
    ||l(x+s) - roll_{2s} l(x)||^2, times 3 / L, from the layer's own per-sample path."""
    p, L, B = 6, 4, 3
    task = task_of(p=p, n_heads=3, d_model=8, eq_seq_len=L, eq_seq_batch=B)
    state = task.generator.get_state()
    with torch.no_grad():
        fast = float(task._seq_eq_loss())
    task.generator.set_state(state)
    x = torch.randint(0, p, (B, L), generator=task.generator)
    m = task.model

    def logp(tokens):  # per-sample attention, any length
        e = m.W_E[tokens]
        q, k, v = (torch.einsum("bid,hde->bhie", e, W) for W in (m.W_Q, m.W_K, m.W_V))
        att = (q @ k.transpose(-1, -2) / math.sqrt(m.d_head)).softmax(-1)
        return (torch.einsum("bhie,hed->bid", att @ v, m.W_O) @ m.W_U).log_softmax(-1)

    with torch.no_grad():
        total = sum(((logp((x + a + s) % p) - torch.roll(logp((x + a) % p), M_SHIFT * s, -1)) ** 2).sum()
                    for a in range(p) for s in range(1, p))
    assert fast == pytest.approx(float(total) / (B * p * (p - 1)) * 3 / L, rel=1e-5)


def test_search_helpers_see_exact_orbits_and_their_breaking():
    task = task_of(p=24, n_heads=16, d_model=32, d_head=4)
    load_equivariant(task, n=24, m=2, orbit_sizes=(12, 4), d_model=32, d_head=4)
    summary = orbit_search.orbit_summary(task, M_SHIFT, 0.02)
    assert summary["orbit_sizes"] == [12, 4] and summary["n_dead"] == 0
    assert orbit_search.seq_eq_error(task.model, M_SHIFT, length=5, n_seq=32) < 1e-5
    with torch.no_grad():
        task.model.W_Q[0] *= 1.5          # one head of the 12-orbit no longer matches its partners
    summary = orbit_search.orbit_summary(task, M_SHIFT, 0.02)
    assert summary["orbit_sizes"] == [4] and summary["closest"][0] < 0.02
    assert orbit_search.seq_eq_error(task.model, M_SHIFT, length=5, n_seq=32) > 1e-3

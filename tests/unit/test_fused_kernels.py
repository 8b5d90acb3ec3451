"""The fused kernels of the orbit experiment (config grid_kernel = "fused", the default): the
grid attention (`FusedGridAttention`), the grid losses (`FusedGridLosses`) and the sequence term
(`seq_eq_loss_fused`) against the eager forms, in float64, where both are the same function up
to rounding: values and gradients agree to about 1e-12 (relative to the largest), and
gradcheck holds. Also: a wide row of QK scores takes the per-cell maximum, per instance of a
batch, and the fused trainer's weights follow the eager one's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headmovies.tasks.orbits import M_SHIFT, cell_weights, make_split
from headmovies.train.orbits.attention import FUSED_MAX_SPREAD, FusedGridAttention, GridAttention
from headmovies.train.orbits.batch import OrbitBatch
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.losses import (
    FusedGridLosses,
    grid_losses,
    orbit_gather_index,
    seq_eq_loss,
    seq_eq_loss_fused,
)
from headmovies.train.orbits.task import OrbitTask

F64 = torch.float64


def close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-12) -> bool:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max()) <= rel * float(a.abs().max())


def circuits(lead: tuple, H: int, n: int, n_out: int, scale: float, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    M = scale * torch.randn(*lead, H, n, n, dtype=F64, generator=g)
    R = torch.randn(*lead, H, n_out, n, dtype=F64, generator=g)
    return M.requires_grad_(), R.requires_grad_()


@pytest.mark.parametrize("lead", [(), (3,)])
@pytest.mark.parametrize("scale", [3.0, 40.0])  # 40: rows wider than FUSED_MAX_SPREAD take the per-cell max
def test_fused_grid_attention_is_the_eager_one(lead, scale):
    M, R = circuits(lead, 4, 7, 5, scale)
    g = torch.randn(*lead, 7, 7, 7, 5, dtype=F64, generator=torch.Generator().manual_seed(1))
    eager = GridAttention.apply(M, R)
    fused = FusedGridAttention.apply(M, R)
    assert close(eager, fused)
    for a, b in zip(torch.autograd.grad(eager, (M, R), g), torch.autograd.grad(fused, (M, R), g)):
        assert close(a, b)
    spread = (M.detach().amax(-1) - M.detach().amin(-1)).max()
    assert (float(spread) > FUSED_MAX_SPREAD) == (scale == 40.0)  # both paths are exercised
    small = [t.detach()[..., :3, :4, :4].clone().requires_grad_() for t in (M, R)]
    assert torch.autograd.gradcheck(FusedGridAttention.apply, small)


def test_a_wide_row_switches_only_its_own_instance():
    """In a batch, the per-cell maximum is chosen per instance: an instance without wide rows gets
    its single run's bits, whatever its neighbours' rows."""
    (M, R), (Mw, Rw) = circuits((), 4, 7, 5, 3.0), circuits((), 4, 7, 5, 40.0, seed=2)
    M, R, Mw, Rw = (t.detach().float() for t in (M, R, Mw, Rw))
    alone = [FusedGridAttention.apply(m, r) for m, r in ((M, R), (Mw, Rw))]
    batch = FusedGridAttention.apply(torch.stack([M, Mw]), torch.stack([R, Rw]))
    assert torch.equal(batch[0], alone[0]) and torch.equal(batch[1], alone[1])


def grid_case(n: int):
    gather = orbit_gather_index(n, M_SHIFT)
    train, held = make_split(n, 0.3, "orbit", 0)
    w_train = torch.from_numpy(cell_weights(train, n)).to(F64)
    w_eq = (w_train + torch.from_numpy(cell_weights(held, n)).to(F64)).reshape(-1)[
        gather.view(n, n * n, n)[:, :, 0] // n
    ]
    b, c = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return torch.from_numpy((b + c) % n).expand(n, n, n), w_train, gather, torch.argsort(gather), w_eq


@pytest.mark.parametrize("lead", [(), (2,)])
@pytest.mark.parametrize("with_eq", [True, False])
def test_fused_grid_losses_are_grid_losses(lead, with_eq):
    n = 6
    target, w_train, gather, inverse, w_eq = grid_case(n)
    w_train, w_eq = w_train.expand(*lead, *w_train.shape), w_eq.expand(*lead, *w_eq.shape)
    logits = torch.randn(*lead, n, n, n, n, dtype=F64, generator=torch.Generator().manual_seed(0))
    logits.requires_grad_()
    _, _, ce, eq = grid_losses(logits, target, w_train, gather, w_eq, with_eq)
    ce_f, eq_f = FusedGridLosses.apply(logits, target, w_train, gather, inverse, w_eq, with_eq)
    assert close(ce, ce_f) and (close(eq, eq_f) if with_eq else float(eq_f.detach().abs().max()) == 0.0)
    weights = torch.rand(2, *ce.shape, dtype=F64, generator=torch.Generator().manual_seed(1))
    (d_eager,) = torch.autograd.grad((weights[0] * ce + weights[1] * eq).sum(), logits)
    (d_fused,) = torch.autograd.grad((weights[0] * ce_f + weights[1] * eq_f).sum(), logits)
    assert close(d_eager, d_fused)
    assert float(ce.detach().min()) > 0 and (float(eq.detach().min()) > 0) == with_eq


def test_fused_grid_losses_pass_gradcheck():
    target, w_train, gather, inverse, w_eq = grid_case(4)
    logits = torch.randn(4, 4, 4, 4, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x: FusedGridLosses.apply(x, target, w_train, gather, inverse, w_eq, True), (logits,)
    )


@pytest.mark.parametrize("residual", [False, True])
def test_fused_sequence_term_is_the_eager_one(residual):
    g = torch.Generator().manual_seed(0)
    H, n, dh = 5, 7, 3
    M = (2 * torch.randn(H, n, n, dtype=F64, generator=g)).requires_grad_()
    v = torch.randn(H, n, dh, dtype=F64, generator=g).requires_grad_()
    OU = torch.randn(H, dh, n, dtype=F64, generator=g).requires_grad_()
    x = torch.randint(0, n, (4, 6), generator=g)
    W_E, W_U = torch.randn(n, 8, dtype=F64, generator=g), torch.randn(8, n, dtype=F64, generator=g)
    direct = (W_E, W_U) if residual else None
    eager = seq_eq_loss(M, (v @ OU).mT, x, direct)
    fused = seq_eq_loss_fused(M, v, OU, x, direct)
    assert float(eager.detach()) > 1e-3 and close(eager, fused)
    for a, b in zip(torch.autograd.grad(eager, (M, v, OU)), torch.autograd.grad(fused, (M, v, OU))):
        assert close(a, b)
    small = (M.detach()[:2, :4, :4], v.detach()[:2, :4], OU.detach()[:2, :, :4])
    assert torch.autograd.gradcheck(
        lambda a, b, c: seq_eq_loss_fused(a, b, c, x[:2, :3] % 4), [t.clone().requires_grad_() for t in small]
    )


def test_fused_training_follows_the_eager_one():
    """The same task, both kernels, three steps of each phase from the same weights (float32):
    every weight within 1e-4 of the eager run's (relative to the largest), and the weights move."""
    sets = dict(p=7, n_heads=4, d_model=16, d_head=2, epochs=40, eq_start=5, eq_ramp=2)
    sets.update(refine_start=20, refine_seq_lens="4")
    tasks = []
    for kernel in ("eager", "fused"):
        torch.manual_seed(0)
        tasks.append(OrbitTask(OrbitConfig(**sets, grid_kernel=kernel)))
    start = [p.detach().clone() for p in tasks[0].model.parameters()]
    for epoch in (10, 11, 12, 25, 26, 27):  # the first phase (λ > 0 from eq_start), then the second
        for task in tasks:
            task.step(epoch)
    for a, b, s in zip(tasks[0].model.parameters(), tasks[1].model.parameters(), start):
        assert close(a.detach(), b.detach(), 1e-4) and not torch.equal(a.detach(), s)


def test_fused_kernels_refuse_a_gradient_of_a_gradient():
    """The hand-written backwards (and the eager grid attention's) are not themselves
    differentiable (they read the forward's saved attention as constants): a gradient of a
    gradient (create_graph, a gradient penalty) must raise, not return a wrong second derivative.
    Before the refusal gradgradcheck found second derivatives off by O(1) in all four Functions."""
    M, R = circuits((), 2, 3, 3, 1.0)
    target, w_train, gather, inverse, w_eq = grid_case(3)
    logits = torch.randn(3, 3, 3, 3, dtype=F64, requires_grad=True)
    v = torch.randn(2, 3, 2, dtype=F64, requires_grad=True)
    OU = torch.randn(2, 2, 3, dtype=F64, requires_grad=True)
    x = torch.randint(0, 3, (2, 3), generator=torch.Generator().manual_seed(0))
    terms = {
        "grid attention": (lambda: FusedGridAttention.apply(M, R).pow(2).sum(), M),
        "eager grid attention": (lambda: GridAttention.apply(M, R).pow(2).sum(), M),  # the same defect, older
        "grid losses": (
            lambda: FusedGridLosses.apply(logits, target, w_train, gather, inverse, w_eq, True)[1].pow(2),
            logits,
        ),
        "sequence term": (lambda: seq_eq_loss_fused(M, v, OU, x).pow(2), M),
    }
    for loss, wrt in terms.values():
        (grad,) = torch.autograd.grad(loss(), wrt, create_graph=True)
        with pytest.raises(RuntimeError, match="differentiate twice"):
            grad.pow(2).sum().backward()  # a loss with a gradient penalty


def test_a_fused_batch_steps_each_instance_as_its_single_run():
    """Fused AdamW's bits for an element depend on the tensor it lies in: stepped on tensors stacked
    over instances, this instance drifted from its single run (W_U's second moment at epoch 2,
    its weights at epoch 15). The batch steps each instance's slice as a tensor of its own:
    weights and moments equal bit for bit."""
    sets = dict(p=5, n_heads=3, d_model=12, d_head=2, epochs=40, eq_start=5, eq_ramp=5, refine_start=20)
    cfgs = [OrbitConfig(**sets, seed=0), OrbitConfig(**sets, seed=3, score_scale=60.0)]
    batch = OrbitBatch(cfgs)
    for epoch in range(1, 17):
        batch.step(epoch)
    for i, cfg in enumerate(cfgs):
        torch.manual_seed(cfg.seed)
        single = OrbitTask(cfg)
        for epoch in range(1, 17):
            single.step(epoch)
        view = batch.sync(i)
        for p, q in zip(single.model.parameters(), view.model.parameters()):
            assert torch.equal(p, q)
            s, v = single.optimizer.state[p], view.optimizer.state[q]
            assert all(torch.equal(s[k], v[k]) for k in ("step", "exp_avg", "exp_avg_sq"))

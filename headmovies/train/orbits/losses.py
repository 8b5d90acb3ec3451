"""The orbit experiment's loss terms: cross-entropy and the equivariance loss over the n^3 grid
(`grid_losses`, `eq_loss`), the equivariance loss on random sequences (`seq_eq_loss`) and the
OV-bias penalty (`ov_bias_penalty`); docs/experiments.md, "How training is fast".

The grid terms take an optional leading instance axis (a batch of runs, `batch.OrbitBatch`)
and reduce each instance alone, so each gets its single run's values and gradients bit for bit.
A shifted input grid is the same grid re-indexed, so the equivariance term over *all* inputs
and *all* shifts costs one gather (`orbit_gather_index`).
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch.autograd.function import once_differentiable
from torch.nn import functional

from headmovies.tasks.orbits import M_SHIFT
from headmovies.train.orbits.seq_attention import FusedSeqAttention, SeqAttention


def orbit_gather_index(n: int, m: int) -> torch.Tensor:
    """Flat index I [n^4] with G.flatten()[I].view(n, n*n, n)[a, o, k'] = G[a, a+b', a+c', k'+m*a],
    o = b' * n + c'. In these coordinates the shift x -> x+s, k -> k+ms moves only along a."""
    a, b, c, k = np.meshgrid(*(np.arange(n),) * 4, indexing="ij")
    flat = ((a * n + (a + b) % n) * n + (a + c) % n) * n + (k + m * a) % n
    return torch.from_numpy(flat.reshape(-1))


def grid_losses(
    logits: torch.Tensor,
    target: torch.Tensor,
    w_train: torch.Tensor,
    gather: torch.Tensor,
    w_eq: torch.Tensor,
    with_eq: bool = True,
):
    """(logp, nll, ce, eq) of grid logits [..., n, n, n, n_out] (`...`: none, or [B] instances).

    target: the class of each cell (a, b, c) [n, n, n]; w_train: cell weights of the training
    inputs [..., n, n, n] (from `cell_weights`); gather: `orbit_gather_index(n, M_SHIFT)`;
    w_eq: cell weights of the equivariance term's inputs in gathered coordinates [..., n, n*n].
    Returns log-probs [..., n, n, n, n_out], per-cell negative log-likelihood [..., n, n, n], the
    w_train-weighted cross-entropy [...] and `eq_loss` [...] (zeros when not with_eq)."""
    logp = logits.log_softmax(-1)
    target = target.expand(logp.shape[:-1])
    nll = -logp.gather(-1, target[..., None]).squeeze(-1)  # (..., a, b, c)
    cells = (-3, -2, -1)
    ce = (w_train * nll).sum(cells) / w_train.sum(cells)
    eq = eq_loss(logp, gather, w_eq) if with_eq else logp.new_zeros(logp.shape[:-4])
    return logp, nll, ce, eq


def eq_loss(logp: torch.Tensor, gather: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Equivariance loss: mean over inputs x (weighted by `w`) and shifts s != 0 of
    ||l(x+s) - roll_{ms} l(x)||^2, l = log-probabilities [3, n] of all positions.

    logp: grid log-probs [..., n, n, n, n]; w: cell weights in gathered coordinates [..., n, n*n]
    (from `cell_weights`, summing to 3 * #inputs); returns [...] (`...`: none, or [B]
    instances). Exact, all shifts at once: with d_a = l_a - mu (mu the w-weighted mean over a
    of an orbit o), sum_{a,a'} w_a ||l_a' - l_a||^2 = n sum_a w_a ||d_a||^2 + W_o sum_a ||d_a||^2.
    """
    n = logp.shape[-4]
    # index_select, not [gather]: the same values and (gather is a permutation) the same gradient,
    # bit for bit, at a fraction of advanced indexing's cost
    lr = logp.flatten(-4).index_select(-1, gather).unflatten(-1, (n, n * n, n))  # (..., a, orbit, k')
    W = w.sum(-2)  # (..., orbit)
    mu = (w[..., None] * lr).sum(-3) / W.clamp_min(1e-12)[..., None]  # (..., orbit, k')
    d2 = (lr - mu[..., None, :, :]).pow(2).sum(-1)  # (..., a, orbit)
    total = n * (w * d2).sum((-2, -1)) + (W[..., None, :] * d2).sum((-2, -1))
    n_inputs = w.sum((-2, -1)) / 3
    return total / (n_inputs * (n - 1))


class FusedGridLosses(torch.autograd.Function):
    """`grid_losses`' (ce, eq) [...] of grid logits [..., n, n, n, n_out] with the backward written
    out: the same values to float rounding (not the same bits), in about half the passes over the
    grid that autograd's backward of `grid_losses` takes (config grid_kernel = "fused").

    apply(logits, target, w_train, gather, inverse, w_eq, with_eq): the arguments of
    `grid_losses`, plus inverse = the permutation undoing `gather` (`torch.argsort(gather)`).
    With c = n w + W (cell weights w [..., a, orbit], W their sum over a) and D = l - mu, the
    equivariance loss is sum c |D|^2 / (#inputs (n - 1)) and its gradient w.r.t. the gathered
    log-probs 2 (c D - w sum_a c D / W) / (#inputs (n - 1))."""

    @staticmethod
    def forward(ctx, logits, target, w_train, gather, inverse, w_eq, with_eq: bool):
        n = logits.shape[-4]
        logp = logits.log_softmax(-1)
        target = target.expand(logp.shape[:-1])
        cells = (-3, -2, -1)
        share = w_train / w_train.sum(cells)[..., None, None, None]  # each cell's weight in ce
        ce = -(share * logp.gather(-1, target[..., None]).squeeze(-1)).sum(cells)
        ctx.with_eq, ctx.shape = with_eq, logp.shape
        if not with_eq:
            ctx.save_for_backward(logp, target, share)
            return ce, logp.new_zeros(logp.shape[:-4])
        lr = logp.flatten(-4).index_select(-1, gather).unflatten(-1, (n, n * n, n))  # (..., a, orbit, k')
        W = w_eq.sum(-2)  # (..., orbit)
        mu = (w_eq[..., None] * lr).sum(-3) / W.clamp_min(1e-12)[..., None]  # (..., orbit, k')
        D = lr.sub_(mu[..., None, :, :])
        c = n * w_eq + W[..., None, :]  # (..., a, orbit)
        scale = 3 / (w_eq.sum((-2, -1)) * (n - 1))  # 1 / (#inputs (n - 1))
        eq = scale * (c * torch.linalg.vecdot(D, D)).sum((-2, -1))
        ctx.save_for_backward(logp, target, share, inverse, D, c, W, w_eq, scale)
        return ce, eq

    @staticmethod
    @once_differentiable  # its formulas read the saved tensors as constants
    def backward(ctx, grad_ce, grad_eq):
        if ctx.with_eq:
            logp, target, share, inverse, D, c, W, w_eq, scale = ctx.saved_tensors
            k = (2 * scale * grad_eq)[..., None, None]
            g = D * (k * c)[..., None]  # (..., a, orbit, k')
            u = g.sum(-3) / W.clamp_min(1e-12)[..., None]  # (..., orbit, k')
            g -= w_eq[..., None] * u[..., None, :, :]
            grad_logp = g.flatten(-3).index_select(-1, inverse).view(ctx.shape)
        else:
            logp, target, share = ctx.saved_tensors
            grad_logp = logp.new_zeros(ctx.shape)
        grad_logp.scatter_add_(-1, target[..., None], (-grad_ce[..., None, None, None] * share)[..., None])
        grad = torch.ops.aten._log_softmax_backward_data(grad_logp, logp, -1, logp.dtype)
        return grad, None, None, None, None, None, None


def ov_bias_penalty(R: torch.Tensor, m: int) -> torch.Tensor:
    """n * sum_h ||beta_h - mean_s roll_{ms} beta_h||^2: the squared Frobenius norm of the part
    of each head's OV circuit that is the same for every key and that a shift moves.

    R: [H, n_out, n] (output class, key token). beta_h [n_out] = head h's class-centred OV
    circuit averaged over keys: the output it adds whatever it attends to (attention sums to 1).
    The layer sees only sum_h beta_h, so spreading that sum unevenly over the heads of an orbit
    changes nothing the loss can see, yet breaks the default orbit check (docs/math.md, "Orbit
    check", bias gauge). The average over shifts is the projection onto shift-invariant
    outputs (output frequencies k with m k = 0 mod n_out), the only part an equivariant layer's
    total bias has. The penalty leaves that part free and acts on the moved parts, which in an
    equivariant layer sum to zero over the heads. Returns a scalar (logits squared).
    Source: docs/notebook/2026-11-30-orbit-search.md, "Why orbits are rare here", item 7."""
    OV = R.mT  # key-major: the memory order the circuit was computed in
    centred = OV - OV.mean(-1, keepdim=True)
    beta = centred.mean(1)  # (H, n_out)
    return _MovedBias.apply(beta, m, OV.shape[1])


@functools.lru_cache(maxsize=16)
def _roll_index(H: int, n: int, m: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat indices into a [H, n] table b: forward [n * H * n] with b.flatten()[forward] =
    stack_s roll(b, m s) (s = 0 .. n-1), and back, the rolls back roll(b, -m s) for s = n-1 .. 0."""
    s, h, k = (
        torch.arange(n, device=device)[:, None, None],
        torch.arange(H, device=device)[:, None],
        torch.arange(n, device=device),
    )
    return (h * n + (k - m * s) % n).reshape(-1), (h * n + (k + m * s.flip(0)) % n).reshape(-1)


class _MovedBias(torch.autograd.Function):
    """N * ||beta - mean_s roll(beta, m s)||^2 of beta [H, n], its rolls one index_select. The
    same bits as the form with n torch.roll calls (`stack(rolls).mean(0)`), values and gradient:
    the backward adds the direct term and then the n rolled-back terms in the order autograd
    accumulates them (s = n-1 first), two terms at a time (tests/integration/test_orbit_search.py)."""

    @staticmethod
    def forward(ctx, beta: torch.Tensor, m: int, N: int) -> torch.Tensor:
        H, n = beta.shape
        invariant = beta.reshape(-1).index_select(0, _roll_index(H, n, m, beta.device)[0]).view(n, H, n).mean(0)
        d = beta - invariant
        ctx.save_for_backward(d)
        ctx.m, ctx.N = m, N
        return N * d.pow(2).sum()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (d,) = ctx.saved_tensors
        H, n = d.shape
        d_beta = (grad * ctx.N).expand(d.shape) * (2 * d)  # through N * sum and pow(2)
        d_roll = -d_beta / n  # each roll's share of the mean (the same for every s)
        rolled_back = d_roll.reshape(-1).index_select(0, _roll_index(H, n, ctx.m, d.device)[1]).view(n, H, n)
        for term in rolled_back:  # sequential, as autograd adds them (cumsum would add in double)
            d_beta += term
        return d_beta, None, None


def seq_eq_loss(
    M: torch.Tensor, R: torch.Tensor, x: torch.Tensor, direct: tuple[torch.Tensor, torch.Tensor] | None = None
) -> torch.Tensor:
    """Equivariance loss on token sequences x [B, L] (not task inputs; the layer has no
    positions, so any length is valid), each at all n shifts: mean over x and s != 0 of
    ||l(x+s) - roll_{ms} l(x)||^2, scaled to 3 positions so it matches `eq_loss`. Inputs of
    length 3 leave heads free to be equivariant together without forming orbits; other lengths
    pin each head down (docs/results/orbits.md, "Why orbits are rare here").

    M [H, n, n], R [H, n_out, n]: the circuits; direct: (W_E, W_U) when the layer has a residual
    stream. Returns a scalar."""
    n, B, L = M.shape[-1], x.shape[0], x.shape[1]
    x = x.to(M.device)
    t = ((x[None] + torch.arange(n, device=M.device)[:, None, None]) % n).reshape(n * B, L)  # row s*B+i: x_i + s
    OV = R.mT  # (H, n, n_out) key-major
    # M[:, t_i, t_j] as index_select on flat (query, key) cells: the same values, and its backward
    # (index_add_) sums the same terms in the same order as advanced indexing's, 8x faster
    cell = (t[:, :, None] * n + t[:, None, :]).reshape(-1)
    H = M.shape[0]
    # attention per key token: on_token[s, i, h, t_j] += att[s, i, h, j], j in order, as the one-hot
    # product att @ one_hot(t) sums it (`seq_eq_loss_indexed`), and its backward gathers where that
    # product's sums over tokens add exact zeros: the same bits, without the (pB, L*H, L) x (L, n) bmm
    index = t[:, None, None, :].expand(n * B, L, H, L)  # (pB, L, H, L): token of key j
    # softmax, per-token sum and the product with OV (sum over heads, tokens) in one autograd
    # Function: the same operations and bits, its backward written out (seq_attention.py)
    logits = SeqAttention.apply(M.reshape(H, n * n), OV.reshape(-1, OV.shape[-1]), cell, index)
    return _shift_spread(logits.view(n * B, L, -1), t, direct)


def _shift_spread(
    logits: torch.Tensor, t: torch.Tensor, direct: tuple[torch.Tensor, torch.Tensor] | None
) -> torch.Tensor:
    """`seq_eq_loss` from the logits [n * B, L, n] of the shifted sequences t [n * B, L] (row
    s * B + i: sequence i shifted by s)."""
    n, L = logits.shape[-1], logits.shape[1]
    B = logits.shape[0] // n
    if direct is not None:
        logits = logits + (direct[0] @ direct[1])[t]
    logp = logits.log_softmax(-1).view(n, B, L, n)
    # d_s[k] = l(x+s)[k + m s] equals l(x)[k] for an equivariant layer; loss = spread over s
    k = (torch.arange(n, device=t.device)[None, :] + M_SHIFT * torch.arange(n, device=t.device)[:, None]) % n  # (s, k)
    d = logp.gather(-1, k[:, None, None, :].expand(n, B, L, n))
    spread = (d - d.mean(0)).pow(2).sum((0, 2, 3))  # (B,)
    return 2 / (n - 1) * spread.mean() * 3 / L


def seq_eq_loss_fused(
    M: torch.Tensor,
    v: torch.Tensor,
    OU: torch.Tensor,
    x: torch.Tensor,
    direct: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """`seq_eq_loss` (the same value to float32 rounding, not the same bits) from the OV
    circuit's factors, through `FusedSeqAttention` (config grid_kernel = "fused").

    M [H, n, n]: the QK table; v [H, n, d_head]: each token's value per head (W_E W_V); OU
    [H, d_head, n_out]: W_O W_U per head (the OV circuit is v @ OU); x [B, L] tokens; direct as in
    `seq_eq_loss`. Returns a scalar."""
    n, B, L = M.shape[-1], x.shape[0], x.shape[1]
    H, dh = v.shape[0], v.shape[-1]
    x = x.to(M.device)
    t = ((x[None] + torch.arange(n, device=M.device)[:, None, None]) % n).reshape(n * B, L)  # row s*B+i: x_i + s
    key = t.t()  # (j, p): the token of key j of sequence p
    cell = (t.t()[None, :, :] * n + key[:, None, :]).reshape(-1)  # (j, i, p): query t[p, i], key t[p, j]
    logits = FusedSeqAttention.apply(
        M.reshape(H, n * n),
        v.transpose(1, 2).reshape(H * dh, n),
        OU.reshape(H * dh, -1),
        cell,
        key.reshape(-1),
    ).view(L, n * B, -1)  # (i, p, class)
    return _shift_spread(logits.transpose(0, 1), t, direct)


def seq_eq_loss_indexed(M: torch.Tensor, R: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """`seq_eq_loss` (no residual) with its QK gather written as advanced indexing M[:, t_i, t_j]
    and its attention per key token as a product with one-hot tokens, the form the census's first
    runs were trained with: the reference that tests and bench/train_speed.py hold `seq_eq_loss`
    to (the same loss and gradients, bit for bit)."""
    n, B, L = M.shape[-1], x.shape[0], x.shape[1]
    t = ((x[None] + torch.arange(n)[:, None, None]) % n).reshape(n * B, L)
    score = M[:, t[:, :, None], t[:, None, :]]
    e = (score - score.amax(-1, keepdim=True).detach()).exp()
    att = e / e.sum(-1, keepdim=True)
    on_token = torch.einsum("hnij,njb->nihb", att, functional.one_hot(t, n).to(att.dtype))
    logits = (on_token.reshape(n * B * L, -1) @ R.mT.reshape(-1, n)).view(n * B, L, -1)
    logp = logits.log_softmax(-1).view(n, B, L, n)
    k = (torch.arange(n)[None, :] + M_SHIFT * torch.arange(n)[:, None]) % n
    d = logp.gather(-1, k[:, None, None, :].expand(n, B, L, n))
    return 2 / (n - 1) * (d - d.mean(0)).pow(2).sum((0, 2, 3)).mean() * 3 / L

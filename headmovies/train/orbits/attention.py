"""The grid attention kernel of the orbit experiment, with its gradient written out by hand:
one code path for a single run (M [H, n, n]) and for a batch of runs (M [B, H, n, n], an
instance axis in front, `batch.OrbitBatch`), the same operations either way.

Inputs are one-hot tokens and the layer has no positions, so the output at a position depends
only on its own token a (the query) and the multiset of the three tokens (the keys): the grid
G[a, b, c] (query a, keys {a, b, c}) holds every input's outputs (docs/experiments.md, "Speed").

Three kernels (config grid_kernel, `GRID_KERNELS`), each with its own rounding, so the same
seed trains another run with each: `FusedGridAttention` (the default since 2026-12-08: fewer
passes, the attention laid out head last), `GridAttention` (eager: every earlier run, the
census's included) and `CompiledGridAttention` (eager's forward and backward through
`torch.compile`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.function import once_differentiable


def grid_forward(M: torch.Tensor, R: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`GridAttention`'s forward: (G [..., n, n, n, n_out], A_0 and A_1 [..., H, n, n, n]), the
    attention on the query's own token and on key b, kept for the backward."""
    s0 = torch.diagonal(M, dim1=-2, dim2=-1)[..., None, None]  # (..., H, a, 1, 1) self
    s1 = M[..., :, :, None]  # (..., H, a, b, 1)
    s2 = M[..., :, None, :]  # (..., H, a, 1, c)
    mx = torch.maximum(torch.maximum(s0, s1), s2)  # (..., H, a, b, c)
    a0 = (s0 - mx).exp_()
    a1 = (s1 - mx).exp_()
    z = (s2 - mx).exp_()
    z += a0
    z += a1
    r = z.reciprocal_()
    a0 *= r  # attention on the query's own token
    a1 *= r  # on key b (on key c: a1 transposed)
    t1 = torch.einsum("...habc,...hxb->...abcx", a1, R)
    out = torch.einsum("...habc,...hxa->...abcx", a0, R)  # (..., a, b, c, n_out)
    out += t1
    out += t1.transpose(-3, -2)
    return out, a0, a1


def grid_backward(
    g: torch.Tensor, a0: torch.Tensor, a1: torch.Tensor, R: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`GridAttention`'s backward: (dM [..., H, n, n], dR [..., H, n_out, n]) from the gradient g
    of G and `grid_forward`'s A_0, A_1."""
    g = 0.5 * (g + g.transpose(-3, -2))  # only the (b, c)-symmetric part of g reaches the weights
    d0 = torch.einsum("...abcx,...hxa->...habc", g, R)  # dL/dA_0
    d1 = torch.einsum("...abcx,...hxb->...habc", g, R)  # dL/dA_1 (dL/dA_2 = its transpose)
    p1 = a1 * d1
    S = a0 * d0
    S += p1
    S += p1.transpose(-2, -1)  # sum_j A_j dL/dA_j
    ds0 = a0 * (d0 - S)  # softmax backward
    ds1 = a1 * (d1 - S)
    dM = 2 * ds1.sum(-1) + torch.diag_embed(ds0.sum((-2, -1)))
    dR = torch.einsum("...habc,...abcx->...hax", a0, g) + 2 * torch.einsum(
        "...habc,...abcx->...hbx", a1, g
    )  # key-major (..., H, n, n_out)
    return dM, dR.transpose(-2, -1)


class GridAttention(torch.autograd.Function):
    """Attention output over the whole grid, G[..., a, b, c, x] = sum_h sum_j A_j R[..., h, x, key_j],
    keys (a, b, c), A = softmax of (M[h,a,a], M[h,a,b], M[h,a,c]).

    M [..., H, n, n] (QK table: query token, key token), R [..., H, n_out, n] (OV circuit: output
    class, key token) -> G [..., n, n, n, n_out]; `...` is empty for a single run and the
    instance axis [B] for a batch of runs. Every dimension is counted from the end, so each
    instance of a batch gets the single run's values and gradients bit for bit
    (tests/integration/test_sweep.py).

    Same values as the plain autograd version (tested with gradcheck) with about half the
    elementwise passes: the backward is written out by hand and uses the (b, c) symmetry
    (A_2[a,b,c] = A_1[a,c,b], G[a,b,c] = G[a,c,b]), so it keeps only A_0 and A_1."""

    @staticmethod
    def forward(ctx, M: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
        out, a0, a1 = grid_forward(M, R)
        ctx.save_for_backward(a0, a1, R)
        return out

    @staticmethod
    @once_differentiable  # its formulas read the saved tensors as constants
    def backward(ctx, g: torch.Tensor):
        return grid_backward(g, *ctx.saved_tensors)


_COMPILED: dict[str, Callable] = {}


def _compiled(name: str, fn: Callable) -> Callable:
    """`fn` through torch.compile, compiled once per process (at the first call: tens of seconds)."""
    if name not in _COMPILED:
        _COMPILED[name] = torch.compile(fn, dynamic=False)
    return _COMPILED[name]


class CompiledGridAttention(torch.autograd.Function):
    """`GridAttention` with its forward and backward through torch.compile (Inductor: fused
    elementwise loops in C++, needs a C++ compiler): the same shapes and formulas, not the same
    bits (fused operations round differently; gradients agree to about 1e-7 relative)."""

    @staticmethod
    def forward(ctx, M: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
        out, a0, a1 = _compiled("forward", grid_forward)(M, R)
        ctx.save_for_backward(a0, a1, R)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g: torch.Tensor):
        return _compiled("backward", grid_backward)(g.contiguous(), *ctx.saved_tensors)


# Above this spread of QK scores within a row of M (max - min over keys), `fused_forward`'s
# exponentials shifted by the row's maximum could underflow for all three keys of a cell
# (exp(-87) is float32's smallest normal number): such rows take the per-cell maximum instead.
FUSED_MAX_SPREAD = 60.0


def fused_forward(M: torch.Tensor, R: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`FusedGridAttention`'s forward: (G [..., n, n, n, n_out], A_1 [..., a, b, c, H] cell-major,
    D [..., a, b, H, n_out]) with D[a, b, h] = R[h, :, b] - R[h, :, a].

    The attention sums to 1 over the three keys, so G[a, b, c] = C[a] + T[a, b, c] + T[a, c, b]
    with C[a] = sum_h R[h, :, a] and T[a, b, c] = sum_h A_1[h, a, b, c] D[a, b, h]: one batched
    product per (a, b) and three passes over the [H, n^3] attention, all in the memory order the
    product reads (head last)."""
    H, n, n_out = M.shape[-3], M.shape[-1], R.shape[-2]
    lead = M.shape[:-3]
    Mc = M.movedim(-3, -1)  # (..., a, k, h)
    top = Mc.amax(-2, keepdim=True)
    E = (Mc - top).exp_().contiguous()  # (..., a, k, h), each row's largest entry 1
    a1 = torch.add(E[..., :, :, None, :], E[..., :, None, :, :])  # (..., a, b, c, h)
    a1 += torch.diagonal(E, dim1=-3, dim2=-2).transpose(-1, -2)[..., :, None, None, :]
    a1.reciprocal_().mul_(E[..., :, :, None, :])
    # per run (a batch's instances each as alone): a wide row takes the per-cell maximum instead
    wide = ((top - Mc.amin(-2, keepdim=True)) > FUSED_MAX_SPREAD).flatten(-3).any(-1)  # (...)
    if bool(wide.any()):
        s0 = torch.diagonal(Mc, dim1=-3, dim2=-2).transpose(-1, -2)[..., :, None, None, :]  # (..., a, 1, 1, h)
        s1, s2 = Mc[..., :, :, None, :], Mc[..., :, None, :, :]
        mx = torch.maximum(torch.maximum(s0, s1), s2)
        safe = (s1 - mx).exp_()
        z = (s0 - mx).exp_()
        z += safe
        z += (s2 - mx).exp_()
        safe /= z
        a1 = torch.where(wide[..., None, None, None, None], safe, a1).contiguous()
    Rk = R.movedim(-1, -3).contiguous()  # (..., key, h, x)
    D = torch.sub(Rk[..., None, :, :, :], Rk[..., :, None, :, :], out=M.new_empty(*lead, n, n, H, n_out))
    T = torch.bmm(a1.view(-1, n, H), D.view(-1, H, n_out)).view(*lead, n, n, n, n_out)
    out = torch.add(T, T.transpose(-3, -2))
    out += Rk.sum(-2)[..., :, None, None, :]
    return out, a1, D


def fused_backward(g: torch.Tensor, a1: torch.Tensor, D: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`FusedGridAttention`'s backward: (dM [..., H, n, n], dR [..., H, n_out, n]) from the
    gradient g of G and `fused_forward`'s A_1, D.

    With G = C + T + T^T (b, c swapped), dL/dT = g + g^T =: g_s, dL/dA_1 = g_s D (per (a, b))
    and dL/dD = A_1^T g_s. The softmax backward, with the attention on the query's own token
    eliminated (A_0 = 1 - A_1 - A_2) and A_2 = A_1^T, gives per cell P = A_1 dL/dA_1,
    dM[a, b] = sum_c (P - A_1 (P + P^T)) and, on the diagonal, minus that row's sum over b."""
    n, H, n_out = a1.shape[-2], a1.shape[-1], g.shape[-1]
    g = g.contiguous()
    gs = torch.add(g, g.transpose(-3, -2))  # (..., a, b, c, x)
    P = torch.bmm(gs.view(-1, n, n_out), D.view(-1, H, n_out).mT).view(a1.shape)
    dD = torch.bmm(a1.view(-1, n, H).mT, gs.view(-1, n, n_out)).view(D.shape)  # (..., a, b, h, x)
    P *= a1
    rows = torch.addcmul(P, a1, torch.add(P, P.transpose(-3, -2)), value=-1).sum(-2)  # (..., a, b, h)
    diagonal = torch.diagonal(rows, dim1=-3, dim2=-2)  # (..., h, a) view
    diagonal -= rows.sum(-2).transpose(-1, -2)
    dRk = dD.sum(-4) - dD.sum(-3) + g.sum((-3, -2))[..., :, None, :]  # (..., key, h, x)
    return rows.movedim(-1, -3), dRk.movedim(-3, -1)


class FusedGridAttention(torch.autograd.Function):
    """`GridAttention`'s values and gradients (to float32 rounding, not the same bits) with about
    a third of its passes over the grid (config grid_kernel = "fused", the default since
    2026-12-08): `fused_forward`, `fused_backward`. Same shapes, the same leading instance axis."""

    @staticmethod
    def forward(ctx, M: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
        out, a1, D = fused_forward(M, R)
        ctx.save_for_backward(a1, D)
        return out

    @staticmethod
    @once_differentiable  # its formulas read the saved tensors as constants
    def backward(ctx, g: torch.Tensor):
        return fused_backward(g, *ctx.saved_tensors)


# config grid_kernel -> the grid attention's autograd Function
GRID_KERNELS: dict[str, type[torch.autograd.Function]] = {
    "fused": FusedGridAttention,
    "eager": GridAttention,
    "compiled": CompiledGridAttention,
}

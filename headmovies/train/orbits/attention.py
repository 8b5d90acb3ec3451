"""The grid attention kernel of the orbit experiment, with its gradient written out by hand:
one code path for a single run (M [H, n, n]) and for a batch of runs (M [B, H, n, n], an
instance axis in front, `batch.OrbitBatch`), the same operations either way.

Inputs are one-hot tokens and the layer has no positions, so the output at a position depends
only on its own token a (the query) and the multiset of the three tokens (the keys): the grid
G[a, b, c] (query a, keys {a, b, c}) holds every input's outputs (docs/experiments.md, "Speed").

`CompiledGridAttention` runs the same forward and backward through `torch.compile` (config
grid_kernel = "compiled"): elementwise passes fused, faster on a CPU, other bits (rounding of
fused operations), so a run trained with it is another run.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


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
    def backward(ctx, g: torch.Tensor):
        return _compiled("backward", grid_backward)(g.contiguous(), *ctx.saved_tensors)

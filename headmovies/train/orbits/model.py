"""The orbit experiment's model (source 000): W_E -> one bidirectional attention layer (no
positional encoding, MLP, LayerNorm or biases; residual optional) -> W_U. The source's code is
due to Georg Bökman.

Inputs are one-hot tokens and there are no positions, so the output at a position depends only
on its own token a (the query) and the multiset of the three tokens (the keys). `grid_logits`
computes G[a, b, c] = logits at a query a attending to keys {a, b, c} for the whole n^3 grid
from the per-head n x n QK table M_h and OV table (`attention.GridAttention`); every input's
three outputs are cells of that grid ((x1,x2,x3), (x2,x1,x3), (x3,x1,x2)), and a shifted input
grid is the same grid re-indexed (`losses.eq_loss`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from headmovies.train.orbits.attention import GRID_KERNELS


def qk_ov(
    W_E: torch.Tensor,
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    W_V: torch.Tensor,
    W_O: torch.Tensor,
    W_U: torch.Tensor,
    score_scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """QK table M [H, n, n] (query token, key token; scaled by score_scale / sqrt(d_head) as the
    layer does) and key-major OV circuit [H, n, n_out] (key token, output class) of one layer's
    weights (`AttentionLayer`'s shapes), docs/math.md "QK and OV circuits". A batch of runs calls
    it per instance (`batch.OrbitBatch.circuits`): one product alone rounds as in the single run."""
    M, v, OU = qk_ov_factors(W_E, W_Q, W_K, W_V, W_O, W_U, score_scale)
    return M, v @ OU  # (H, n, n), (H, n, n_out)


def qk_ov_factors(
    W_E: torch.Tensor,
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    W_V: torch.Tensor,
    W_O: torch.Tensor,
    W_U: torch.Tensor,
    score_scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`qk_ov`'s QK table M [H, n, n] and its OV circuit's factors: each token's value per head
    v = W_E W_V [H, n, d_head] and W_O W_U [H, d_head, n_out] (OV = v @ W_O W_U)."""
    q = torch.einsum("nd,hde->hne", W_E, W_Q)  # (H, n, dh)
    k = torch.einsum("nd,hde->hne", W_E, W_K)  # (H, n, dh)
    M = q @ k.transpose(1, 2) / math.sqrt(W_Q.shape[-1])  # (H, n, n)
    if score_scale != 1.0:  # the lever (config score_scale); the default adds no operation
        M = M * score_scale
    v = torch.einsum("nd,hde->hne", W_E, W_V)  # (H, n, dh)
    return M, v, W_O @ W_U


class AttentionLayer(nn.Module):
    """W_E [n, d_model] -> heads (W_Q, W_K, W_V [H, d_model, d_head], W_O [H, d_head, d_model])
    -> W_U [d_model, n]. Row-vector convention (x @ W), TransformerLens names.

    Levers (docs/experiments.md, "Levers"; defaults leave the layer as it was): score_scale multiplies every attention
    score; qk_init multiplies the initial W_Q, W_K; frozen_embed makes W_E one-hot tokens in
    coordinates 0..n-1 (times sqrt(d_model), today's row norm) and W_U one-hot classes read from
    coordinates n..2n-1 (column norm 1, as today's), neither trainable: a shift of tokens and
    classes is then a permutation of coordinates, which AdamW and weight decay commute with.
    The random draws are the same either way (same later weights for the same seed). grid_kernel:
    which kernel computes the grid attention (`attention.GRID_KERNELS`, config grid_kernel): the
    same values, each with its own rounding."""

    def __init__(
        self,
        n: int,
        n_heads: int,
        d_model: int,
        d_head: int,
        residual: bool,
        init_scale: float = 1.0,
        score_scale: float = 1.0,
        qk_init: float = 1.0,
        frozen_embed: bool = False,
        grid_kernel: str = "fused",
    ):
        super().__init__()
        self.n, self.residual, self.d_head, self.score_scale = n, residual, d_head, score_scale
        # the grid attention's kernel (config grid_kernel): each gives its own bits
        self.grid_attention = GRID_KERNELS[grid_kernel]
        g = init_scale
        self.W_E = nn.Parameter(g * torch.randn(n, d_model))
        self.W_Q = nn.Parameter(g * qk_init * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_K = nn.Parameter(g * qk_init * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_V = nn.Parameter(g * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_O = nn.Parameter(g * torch.randn(n_heads, d_head, d_model) / math.sqrt(d_head * n_heads))
        self.W_U = nn.Parameter(g * torch.randn(d_model, n) / math.sqrt(d_model))
        if frozen_embed:
            if d_model < 2 * n:
                raise ValueError(f"frozen_embed needs d_model >= 2 n, got {d_model} < {2 * n}")
            with torch.no_grad():
                self.W_E.zero_()
                self.W_E[torch.arange(n), torch.arange(n)] = math.sqrt(d_model)
                self.W_U.zero_()
                self.W_U[n + torch.arange(n), torch.arange(n)] = 1.0
            self.W_E.requires_grad_(False)
            self.W_U.requires_grad_(False)

    def circuits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """QK table M [H, n, n] (query token, key token) and OV circuit R [H, n_out, n] (output
        class, key token), from `qk_ov`. R is a transposed view of the key-major product; `.mT`
        gives that product back."""
        M, OV = qk_ov(self.W_E, self.W_Q, self.W_K, self.W_V, self.W_O, self.W_U, self.score_scale)
        return M, OV.transpose(1, 2)  # (H, n, n), (H, n_out, n)

    def circuit_factors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """QK table M [H, n, n] and the OV circuit's factors v [H, n, d_head], W_O W_U [H, d_head,
        n_out] (`qk_ov_factors`)."""
        return qk_ov_factors(self.W_E, self.W_Q, self.W_K, self.W_V, self.W_O, self.W_U, self.score_scale)

    def grid_logits(self) -> torch.Tensor:
        """Logits G [a, b, c, class] at a query token a with keys {a, b, c}, for all n^3 cells."""
        M, R = self.circuits()
        out = self.grid_attention.apply(M, R)  # (n, n, n, n_out)
        if self.residual:
            out = out + (self.W_E @ self.W_U)[:, None, None, :]
        return out

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Straightforward per-sample path: tokens [B, 3] -> logits [B, 3, n]. Used as the
        reference in tests and bench/train_speed.py."""
        x = self.W_E[tokens]  # (B, 3, d)
        q = torch.einsum("bid,hde->bhie", x, self.W_Q)  # (B, H, 3, dh)
        k = torch.einsum("bid,hde->bhie", x, self.W_K)
        v = torch.einsum("bid,hde->bhie", x, self.W_V)
        att = (q @ k.transpose(-1, -2) / math.sqrt(self.d_head) * self.score_scale).softmax(-1)  # (B, H, 3, 3)
        z = torch.einsum("bhij,bhje->bhie", att, v)  # (B, H, 3, dh)
        out = torch.einsum("bhie,hed->bid", z, self.W_O)  # (B, 3, d)
        if self.residual:
            out = out + x
        return out @ self.W_U

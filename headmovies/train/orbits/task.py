"""Orbit experiment (seed 000; docs/experiments.md): one 32-head self-attention layer, penalised toward
C_n-equivariance, learning (x1, x2, x3) -> (x2+x3, x3+x1, x1+x2) mod n.

Model: W_E -> one bidirectional attention layer (no positional encoding, MLP, LayerNorm or
biases; residual optional) -> W_U. The seed's code is due to Georg Bökman.

Speed. Inputs are one-hot tokens and there are no positions, so the output at a position
depends only on its own token a (the query) and the multiset of the three tokens (the keys).
`grid_logits` computes G[a, b, c] = logits at a query a attending to keys {a, b, c} for the
whole n^3 grid from the per-head n x n QK table M_h and OV table, by dense tensor products;
every input's three outputs are cells of that grid ((x1,x2,x3), (x2,x1,x3), (x3,x1,x2)), and
a shifted input grid is the same grid re-indexed, so the equivariance term over *all* inputs
and *all* shifts costs one gather (see `eq_loss`).
"""
from __future__ import annotations

import math
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from headmovies.errors import ConfigError, UserError
from headmovies.tasks.orbits import M_SHIFT, cell_weights, make_split
from headmovies.train.config import TrainConfig, require_memory, require_signs
from headmovies.train.experiments import Task, register


@dataclass
class OrbitConfig(TrainConfig):
    epochs: int = 16000         # full-batch steps (docs/results/orbits.md: why these defaults)
    seed: int = 24              # the census's most seed-like run (docs/results/orbits.md, "The default run")
    p: int = 24                 # n: token values and the order of the group C_n (the config key is p)
    n_heads: int = 32
    d_model: int = 128
    d_head: int = 4
    residual: bool = False      # add the residual stream (direct path W_E W_U) to the layer output
    init_scale: float = 1.0     # multiplies every initial weight
    train_frac: float = 0.3     # fraction of the n^3 inputs used for cross-entropy
    split: str = "orbit"        # "random" inputs, or whole shift-"orbit"s of inputs held out together
    lr: float = 1e-3
    lr_schedule: str = "cosine"    # "constant" or "cosine" (decays to 0 at the final epoch)
    weight_decay: float = 0.1   # AdamW, decoupled
    eq_weight: float = 10.0     # lambda: loss = CE(train) + lambda * eq_loss
    eq_inputs: str = "all"      # inputs x the equivariance term sees: "all" n^3, or "train"
    eq_start: int = 500         # lambda is 0 before this epoch (fit first) ...
    eq_ramp: int = 2000         # ... then rises linearly to eq_weight over this many epochs
    eq_seq_lens: str = ""       # e.g. "2,4,8": the equivariance term also sees random sequences of these lengths ...
    eq_seq_batch: int = 16      # ... this many of each length per step, each at all n shifts
    ov_bias_weight: float = 0.0  # mu: + mu * ov_bias_penalty (the part of the OV biases a shift moves)
    # Optional second phase, a fine-tune of the first phase's weights within the same run:
    refine_start: int = 10000   # epoch at which it starts (the first phase's cosine ends here); off
                                # when 0 or >= epochs
    refine_lr: float = 3e-4     # AdamW moments reset; lr restarts here (cosine to 0 at `epochs`)
    refine_weight_decay: float = 0.1
    refine_eq_weight: float = 100.0  # lambda ramps from 0 to this over refine_ramp epochs
    refine_ramp: int = 2000
    refine_seq_lens: str = "6"  # sequence lengths of the equivariance term in this phase
    refine_prune: float = 0.0   # at its start, zero the heads whose centred OV norm is below this
                                # fraction of the largest head's (0: keep all; 0.25 in the census's
                                # with-additions recipe)
    refine_ov_bias_weight: float = 0.01  # mu of ov_bias_penalty in this phase

    def validate(self) -> None:
        super().validate()
        if self.p < 2:
            raise ConfigError(f"p must be >= 2, got {self.p}")
        for key in ("n_heads", "d_model", "d_head"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, key)}")
        if not 0 < self.train_frac <= 1:
            raise ConfigError(f"train_frac must be in (0, 1], got {self.train_frac}")
        require_signs(self, positive=("lr", "init_scale"), nonnegative=("weight_decay", "eq_weight"))
        for key in ("ov_bias_weight", "refine_ov_bias_weight"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{key} must be >= 0 (0: no OV-bias penalty), got {getattr(self, key)}")
        if not 0 <= self.refine_prune < 1:
            raise ConfigError(f"refine_prune must be in [0, 1) (0: prune nothing), got {self.refine_prune}")
        if self.eq_start < 0 or self.eq_ramp < 0 or self.eq_seq_batch < 1:
            raise ConfigError("eq_start and eq_ramp must be >= 0, eq_seq_batch >= 1")
        for key in ("eq_seq_lens", "refine_seq_lens"):
            text = getattr(self, key).replace(" ", "")
            if text and not re.fullmatch(r"[0-9]+(,[0-9]+)*", text) or any(
                    not 1 <= n <= MAX_SEQ_LEN for n in seq_lengths(text)):
                raise ConfigError(f"{key} must be a comma-separated list of lengths from 1 to {MAX_SEQ_LEN} "
                                  f"(e.g. '4' or '2,4,8'), got {getattr(self, key)!r}")
        if self.refine_start < 0:
            raise ConfigError(f"refine_start must be >= 0 (0: no second phase), got {self.refine_start}")
        if self.refine_lr <= 0 or self.refine_weight_decay < 0 or self.refine_eq_weight < 0 or self.refine_ramp < 0:
            raise ConfigError("refine_lr must be > 0; refine_weight_decay, refine_eq_weight and refine_ramp >= 0")
        choices = {"split": ("random", "orbit"), "eq_inputs": ("all", "train"),
                   "lr_schedule": ("constant", "cosine")}
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ConfigError(f"{key} must be one of {allowed}, got {getattr(self, key)!r}")
        require_memory(self.memory_bytes(), "p, n_heads, d_model, d_head, eq_seq_batch or the sequence lengths")

    def memory_bytes(self) -> int:
        """Estimated bytes of the largest tensors of a step: weights with gradients and AdamW
        moments, the n^4 grid (gather index, its meshgrid, logits and their gradients), the grid
        attention [H, n, n, n] and its backward, and the sequence term [H, n B, L, L]."""
        n, H = self.p, self.n_heads
        params = 2 * n * self.d_model + 4 * H * self.d_model * self.d_head
        L = max(seq_lengths(self.eq_seq_lens) + seq_lengths(self.refine_seq_lens) + [0])
        seq = 24 * H * n * self.eq_seq_batch * L * L + 8 * n * n * self.eq_seq_batch * L * H
        return 16 * params + 96 * n ** 4 + 40 * H * n ** 3 + seq

    def refines(self) -> bool:
        """True if the run has a second phase: 0 < refine_start < epochs (a shorter run, e.g.
        --set epochs=2000, is the first phase alone, its cosine ending at `epochs`)."""
        return 0 < self.refine_start < self.epochs


MAX_SEQ_LEN = 64   # the sequence term holds n_heads x 24 x eq_seq_batch x L^2 scores (L = 64: ~0.2 GB)


def seq_lengths(text: str) -> list[int]:
    """'2,4,8' -> [2, 4, 8] ([] when empty). Raises ValueError on a non-integer."""
    return [int(t) for t in text.replace(" ", "").split(",") if t]




class GridAttention(torch.autograd.Function):
    """Attention output over the whole grid, G[a, b, c, x] = sum_h sum_j A_j R[h, x, key_j], keys
    (a, b, c), A = softmax of (M[h,a,a], M[h,a,b], M[h,a,c]); M [H, n, n], R [H, n_out, n].

    Same values as the plain autograd version (tested with gradcheck) with about half the
    elementwise passes: the backward is written out by hand and uses the (b, c) symmetry
    (A_2[a,b,c] = A_1[a,c,b], G[a,b,c] = G[a,c,b]), so it keeps only A_0 and A_1."""

    @staticmethod
    def forward(ctx, M: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
        s0 = torch.diagonal(M, dim1=1, dim2=2)[:, :, None, None]      # (H, a, 1, 1) self
        s1 = M[:, :, :, None]                                         # (H, a, b, 1)
        s2 = M[:, :, None, :]                                         # (H, a, 1, c)
        mx = torch.maximum(torch.maximum(s0, s1), s2)                 # (H, a, b, c)
        a0 = (s0 - mx).exp_()
        a1 = (s1 - mx).exp_()
        z = (s2 - mx).exp_()
        z += a0
        z += a1
        r = z.reciprocal_()
        a0 *= r                                                       # attention on the query's own token
        a1 *= r                                                       # on key b (on key c: a1 transposed)
        t1 = torch.einsum("habc,hxb->abcx", a1, R)
        out = torch.einsum("habc,hxa->abcx", a0, R)
        out += t1
        out += t1.transpose(1, 2)
        ctx.save_for_backward(a0, a1, R)
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        a0, a1, R = ctx.saved_tensors
        g = 0.5 * (g + g.transpose(1, 2))        # only the (b, c)-symmetric part of g reaches the weights
        d0 = torch.einsum("abcx,hxa->habc", g, R)                     # dL/dA_0
        d1 = torch.einsum("abcx,hxb->habc", g, R)                     # dL/dA_1 (dL/dA_2 = its transpose)
        p1 = a1 * d1
        S = a0 * d0
        S += p1
        S += p1.transpose(2, 3)                                       # sum_j A_j dL/dA_j
        ds0 = a0 * (d0 - S)                                           # softmax backward
        ds1 = a1 * (d1 - S)
        dM = 2 * ds1.sum(3) + torch.diag_embed(ds0.sum((2, 3)))
        dR = torch.einsum("habc,abcx->hax", a0, g) + 2 * torch.einsum("habc,abcx->hbx", a1, g)  # key-major (H, n, n_out)
        return dM, dR.transpose(1, 2)


class AttentionLayer(nn.Module):
    """W_E [n, d_model] -> heads (W_Q, W_K, W_V [H, d_model, d_head], W_O [H, d_head, d_model])
    -> W_U [d_model, n]. Row-vector convention (x @ W), TransformerLens names."""

    def __init__(self, n: int, n_heads: int, d_model: int, d_head: int, residual: bool, init_scale: float = 1.0):
        super().__init__()
        self.n, self.residual, self.d_head = n, residual, d_head
        g = init_scale
        self.W_E = nn.Parameter(g * torch.randn(n, d_model))
        self.W_Q = nn.Parameter(g * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_K = nn.Parameter(g * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_V = nn.Parameter(g * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_O = nn.Parameter(g * torch.randn(n_heads, d_head, d_model) / math.sqrt(d_head * n_heads))
        self.W_U = nn.Parameter(g * torch.randn(d_model, n) / math.sqrt(d_model))

    def circuits(self) -> tuple[torch.Tensor, torch.Tensor]:
        """QK table M [H, n, n] (query token, key token; scaled by 1/sqrt(d_head) as the layer
        does) and OV circuit R [H, n_out, n] (output class, key token), docs/math.md "QK and OV
        circuits". R is a transposed view of a key-major product; `.mT` gives that product back."""
        q = torch.einsum("nd,hde->hne", self.W_E, self.W_Q)           # (H, n, dh)
        k = torch.einsum("nd,hde->hne", self.W_E, self.W_K)           # (H, n, dh)
        M = q @ k.transpose(1, 2) / math.sqrt(self.d_head)            # (H, n, n)
        v = torch.einsum("nd,hde->hne", self.W_E, self.W_V)           # (H, n, dh)
        R = (v @ (self.W_O @ self.W_U)).transpose(1, 2)               # (H, n_out, n)
        return M, R

    def grid_logits(self) -> torch.Tensor:
        """Logits G [a, b, c, class] at a query token a with keys {a, b, c}, for all n^3 cells."""
        M, R = self.circuits()
        out = GridAttention.apply(M, R)                               # (n, n, n, n_out)
        if self.residual:
            out = out + (self.W_E @ self.W_U)[:, None, None, :]
        return out

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Straightforward per-sample path: tokens [B, 3] -> logits [B, 3, n]. Used as the
        reference in tests and bench/train_speed.py."""
        x = self.W_E[tokens]                                          # (B, 3, d)
        q = torch.einsum("bid,hde->bhie", x, self.W_Q)                # (B, H, 3, dh)
        k = torch.einsum("bid,hde->bhie", x, self.W_K)
        v = torch.einsum("bid,hde->bhie", x, self.W_V)
        att = (q @ k.transpose(-1, -2) / math.sqrt(self.d_head)).softmax(-1)  # (B, H, 3, 3)
        z = torch.einsum("bhij,bhje->bhie", att, v)                   # (B, H, 3, dh)
        out = torch.einsum("bhie,hed->bid", z, self.W_O)              # (B, 3, d)
        if self.residual:
            out = out + x
        return out @ self.W_U


def orbit_gather_index(n: int, m: int) -> torch.Tensor:
    """Flat index I [n^4] with G.flatten()[I].view(n, n*n, n)[a, o, k'] = G[a, a+b', a+c', k'+m*a],
    o = b' * n + c'. In these coordinates the shift x -> x+s, k -> k+ms moves only along a."""
    a, b, c, k = np.meshgrid(*(np.arange(n),) * 4, indexing="ij")
    flat = ((a * n + (a + b) % n) * n + (a + c) % n) * n + (k + m * a) % n
    return torch.from_numpy(flat.reshape(-1))


def eq_loss(logp: torch.Tensor, gather: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Equivariance loss: mean over inputs x (weighted by `w`) and shifts s != 0 of
    ||l(x+s) - roll_{ms} l(x)||^2, l = log-probabilities [3, n] of all positions.

    logp: grid log-probs [n, n, n, n]; w: cell weights in gathered coordinates [n, n*n]
    (from `cell_weights`, summing to 3 * #inputs). Exact, all shifts at once: with
    d_a = l_a - mu (mu the w-weighted mean over a of an orbit o),
    sum_{a,a'} w_a ||l_a' - l_a||^2 = n sum_a w_a ||d_a||^2 + W_o sum_a ||d_a||^2.
    """
    n = logp.shape[0]
    # index_select, not [gather]: the same values and (gather is a permutation) the same gradient,
    # bit for bit, at a fraction of advanced indexing's cost
    lr = logp.reshape(-1).index_select(0, gather).view(n, n * n, n)       # (a, orbit, k')
    W = w.sum(0)                                                          # (orbit,)
    mu = (w[:, :, None] * lr).sum(0) / W.clamp_min(1e-12)[:, None]        # (orbit, k')
    d2 = (lr - mu).pow(2).sum(-1)                                         # (a, orbit)
    total = n * (w * d2).sum() + (W * d2).sum()
    n_inputs = w.sum() / 3
    return total / (n_inputs * (n - 1))


def eq_error_pooled(logp: torch.Tensor, gather: torch.Tensor) -> float:
    """The pooled equivariance error (docs/math.md, "Equivariance loss and equivariance errors"):
    max_s ||Delta(., s)||_F / ||l(.)||_F, all n^3 inputs pooled into one norm before the ratio,
    with the autocorrelation along the shift axis computed by FFT in float64.

    logp: grid log-probs [n, n, n, n]; gather: `orbit_gather_index(n, m)`. Stored as
    `eq_error_pooled` (`eq_error` in run files made before both errors were stored)."""
    n = logp.shape[0]
    lr = logp.reshape(-1).index_select(0, gather).view(n, -1).double()    # (a, rest)
    power = torch.fft.rfft(lr, dim=0).abs().pow(2).sum(1)
    corr = torch.fft.irfft(power, n=n)                                    # corr[s] = sum_a <l_{a+s}, l_a>
    total = lr.pow(2).sum()
    diff = (2 * total - 2 * corr[1:]).clamp_min(0)
    return float((diff.max() / total).sqrt()) if n > 1 else 0.0


def input_cells(n: int) -> torch.Tensor:
    """[n^3, 3] int64: for input x = (x1, x2, x3) in C order (x1 * n^2 + x2 * n + x3), the cells
    of its three positions as o * n + a, (a, o) the `orbit_gather_index` coordinates: position i
    reads query x_i with keys {x_j, x_k} (j < k, the other two), i.e. a = x_i and orbit
    o = (x_j - x_i) * n + (x_k - x_i) (mod n each). A shift x -> x+s moves each cell along a only."""
    x = np.stack(np.meshgrid(*(np.arange(n),) * 3, indexing="ij"), -1).reshape(-1, 3)
    cells = []
    for i, (j, k) in ((0, (1, 2)), (1, (0, 2)), (2, (0, 1))):
        a, b, c = x[:, i], (x[:, j] - x[:, i]) % n, (x[:, k] - x[:, i]) % n
        cells.append((b * n + c) * n + a)
    return torch.from_numpy(np.stack(cells, 1))


def eq_error_worst_input(logp: torch.Tensor, gather: torch.Tensor,
                         cells: torch.Tensor | None = None) -> tuple[float, tuple[int, int, int], int]:
    """The worst single input's equivariance error (docs/math.md, "Equivariance loss and
    equivariance errors"): max over inputs x and shifts s != 0 of ||Delta(x, s)||_F / ||l(x)||_F,
    Delta(x, s) = l(x+s) - roll_{ms} l(x), l(x) [3, n] the log-probs of all three positions.

    logp: grid log-probs [n, n, n, n]; gather: `orbit_gather_index(n, m)`; cells: `input_cells(n)`
    (built when None). Every input's three rows are grid cells, and in gathered coordinates a
    shift moves a cell along its first axis only, so all n^3 inputs at all shifts cost one
    n x n Gram matrix per orbit of cells (float64): ||l_{a+s} - l_a||^2 = |l_{a+s}|^2 + |l_a|^2 -
    2 <l_{a+s}, l_a>. Returns (error, x, s) of the worst pair; the first of equal maxima (inputs
    in C order, then s) when there are ties."""
    n = logp.shape[0]
    if n < 2:
        return 0.0, (0, 0, 0), 0
    cells = input_cells(n) if cells is None else cells
    X = logp.reshape(-1).index_select(0, gather).view(n, n * n, n).double().transpose(0, 1)   # (orbit, a, k')
    gram = (X @ X.mT).reshape(n * n, n * n)                               # (orbit, a * n + a')
    sq = gram[:, ::n + 1]                                                 # |l|^2 (orbit, a)
    a = torch.arange(n)[:, None]
    shifted = (a + torch.arange(1, n)[None, :]) % n                      # (a, s - 1): a + s
    d2 = (sq[:, :, None] + sq[:, shifted] - 2 * gram[:, a * n + shifted]).reshape(n ** 3, n - 1)
    sq = sq.reshape(-1)                                                   # cell o * n + a
    num = d2[cells[:, 0]] + d2[cells[:, 1]] + d2[cells[:, 2]]            # (x, s - 1)
    ratio = num.clamp_min(0) / (sq[cells[:, 0]] + sq[cells[:, 1]] + sq[cells[:, 2]])[:, None]
    i = int(ratio.argmax())
    x, s = divmod(i, n - 1)
    return float(ratio.view(-1)[i].sqrt()), (x // (n * n), x // n % n, x % n), s + 1


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
    Source: docs/results/orbits.md."""
    OV = R.mT                     # key-major: the memory order the circuit was computed in
    centred = OV - OV.mean(-1, keepdim=True)
    beta = centred.mean(1)                                                # (H, n_out)
    n_out = beta.shape[-1]
    invariant = torch.stack([torch.roll(beta, m * s, -1) for s in range(n_out)]).mean(0)
    return OV.shape[1] * (beta - invariant).pow(2).sum()


def seq_eq_loss(M: torch.Tensor, R: torch.Tensor, x: torch.Tensor,
                direct: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Equivariance loss on token sequences x [B, L] (not task inputs; the layer has no
    positions, so any length is valid), each at all n shifts: mean over x and s != 0 of
    ||l(x+s) - roll_{ms} l(x)||^2, scaled to 3 positions so it matches `eq_loss`. Inputs of
    length 3 leave heads free to be equivariant together without forming orbits; other lengths
    pin each head down (docs/results/orbits.md, "Why orbits are rare here").

    M [H, n, n], R [H, n_out, n]: the circuits; direct: (W_E, W_U) when the layer has a residual
    stream. Returns a scalar."""
    n, B, L = M.shape[-1], x.shape[0], x.shape[1]
    x = x.to(M.device)
    t = ((x[None] + torch.arange(n, device=M.device)[:, None, None]) % n).reshape(n * B, L)   # row s*B+i: x_i + s
    OV = R.mT                                                               # (H, n, n_out) key-major
    # M[:, t_i, t_j] as index_select on flat (query, key) cells: the same values, and its backward
    # (index_add_) sums the same terms in the same order as advanced indexing's, 8x faster
    cell = (t[:, :, None] * n + t[:, None, :]).reshape(-1)
    score = M.reshape(M.shape[0], n * n).index_select(1, cell).view(-1, n * B, L, L)   # (H, pB, L, L)
    e = (score - score.amax(-1, keepdim=True).detach()).exp()               # softmax (faster
    att = e / e.sum(-1, keepdim=True)                                       # than .softmax for small L)
    onehot = F.one_hot(t, n).to(att.dtype)                                   # (pB, L, n)
    on_token = torch.einsum("hnij,njb->nihb", att, onehot)                   # attention per key token
    logits = on_token.reshape(n * B * L, -1) @ OV.reshape(-1, OV.shape[-1])   # sum over heads, tokens
    logits = logits.view(n * B, L, -1)                                       # (pB, L, n)
    if direct is not None:
        logits = logits + (direct[0] @ direct[1])[t]
    logp = logits.log_softmax(-1).view(n, B, L, n)
    # d_s[k] = l(x+s)[k + m s] equals l(x)[k] for an equivariant layer; loss = spread over s
    k = (torch.arange(n, device=M.device)[None, :] + M_SHIFT * torch.arange(n, device=M.device)[:, None]) % n   # (s, k)
    d = logp.gather(-1, k[:, None, None, :].expand(n, B, L, n))
    spread = (d - d.mean(0)).pow(2).sum((0, 2, 3))                           # (B,)
    return 2 / (n - 1) * spread.mean() * 3 / L


def seq_eq_loss_indexed(M: torch.Tensor, R: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """`seq_eq_loss` (no residual) with its QK gather written as advanced indexing M[:, t_i, t_j],
    the form the census's first runs were trained with: the reference that tests and
    bench/train_speed.py hold `seq_eq_loss` to (the same loss and gradients, bit for bit)."""
    n, B, L = M.shape[-1], x.shape[0], x.shape[1]
    t = ((x[None] + torch.arange(n)[:, None, None]) % n).reshape(n * B, L)
    score = M[:, t[:, :, None], t[:, None, :]]
    e = (score - score.amax(-1, keepdim=True).detach()).exp()
    att = e / e.sum(-1, keepdim=True)
    on_token = torch.einsum("hnij,njb->nihb", att, F.one_hot(t, n).to(att.dtype))
    logits = (on_token.reshape(n * B * L, -1) @ R.mT.reshape(-1, n)).view(n * B, L, -1)
    logp = logits.log_softmax(-1).view(n, B, L, n)
    k = (torch.arange(n)[None, :] + M_SHIFT * torch.arange(n)[:, None]) % n
    d = logp.gather(-1, k[:, None, None, :].expand(n, B, L, n))
    return 2 / (n - 1) * (d - d.mean(0)).pow(2).sum((0, 2, 3)).mean() * 3 / L


_GRID_POOL: ThreadPoolExecutor | None = None
# a forked child has the pool object but not its thread: make it start a new one
os.register_at_fork(after_in_child=lambda: globals().__setitem__("_GRID_POOL", None))


def _grid_pool() -> ThreadPoolExecutor:
    """The one thread that computes grid terms under `Task.overlap`, on one torch thread."""
    global _GRID_POOL
    if _GRID_POOL is None:
        _GRID_POOL = ThreadPoolExecutor(1, thread_name_prefix="grid-term", initializer=torch.set_num_threads,
                                        initargs=(1,))
    return _GRID_POOL


def _use_threads(n: int) -> None:
    """torch intra-op threads of this thread, set only when they change (a step asks every time)."""
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


class _Precomputed(torch.autograd.Function):
    """A loss term on the circuits (M, R) whose gradients another thread computes: forward
    returns 0 (a step never reads its loss's value), backward waits for the future's (dM, dR)."""

    @staticmethod
    def forward(ctx, M: torch.Tensor, R: torch.Tensor, future: Future) -> torch.Tensor:
        ctx.future = future
        return M.new_zeros(())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        dM, dR = ctx.future.result()
        if not bool(grad == 1):          # a step's loss is a plain sum: grad is exactly 1
            dM, dR = grad * dM, grad * dR
        return dM, dR, None


@register
class OrbitTask(Task):
    name = "orbits"
    description = "seed 000: 32-head equivariance-penalised attention layer on modular addition (C_24)"
    Config = OrbitConfig

    def __init__(self, cfg: OrbitConfig):
        super().__init__(cfg)
        n = cfg.p
        self.model = AttentionLayer(n, cfg.n_heads, cfg.d_model, cfg.d_head, cfg.residual, cfg.init_scale)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)
        self.train_idx, self.heldout_idx = make_split(n, cfg.train_frac, cfg.split, cfg.seed)
        self.gather = orbit_gather_index(n, M_SHIFT)
        g = self.gather.view(n, n * n, n)[:, :, 0] // n                       # cell index of (a, orbit)
        w_train = torch.from_numpy(cell_weights(self.train_idx, n)).float()
        w_held = torch.from_numpy(cell_weights(self.heldout_idx, n)).float()
        self.w_train, self.w_held = w_train, w_held
        eq_w = w_train + w_held if cfg.eq_inputs == "all" else w_train
        self.w_eq = eq_w.reshape(-1)[g]                                       # (a, orbit)
        b, c = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        self.target = torch.from_numpy((b + c) % n).expand(n, n, n)           # target of cell (a,b,c)
        self.seq_lens = (seq_lengths(cfg.eq_seq_lens), seq_lengths(cfg.refine_seq_lens))  # per phase
        self.overlapped_steps = 0         # steps whose grid term ran in the second thread (`Task.overlap`)

    FORK_KEYS = ("epochs", "refine_lr", "refine_weight_decay", "refine_eq_weight", "refine_ramp",
                 "refine_seq_lens", "refine_prune", "refine_ov_bias_weight")

    @classmethod
    def fork_epoch(cls, cfg: OrbitConfig) -> int:
        """refine_start: the second phase starts from the weights alone (fresh AdamW moments, see
        `step`), provided the first phase drew nothing from the generator (no eq_seq_lens)."""
        if not cfg.refines():
            raise UserError(f"only a run with a second phase can fork (0 < refine_start < epochs); this one has "
                            f"refine_start={cfg.refine_start}, epochs={cfg.epochs}")
        if seq_lengths(cfg.eq_seq_lens):
            raise UserError(f"a run with a first-phase sequence term (eq_seq_lens={cfg.eq_seq_lens!r}) cannot fork: "
                            "its random sequences are not in the source's run file")
        return cfg.refine_start

    @classmethod
    def batching(cls):
        from headmovies.train.orbits.batch import OrbitBatch   # it imports this module
        return OrbitBatch

    def _losses(self, logits: torch.Tensor, with_eq: bool = True):
        logp = logits.log_softmax(-1)
        nll = -logp.gather(-1, self.target[..., None]).squeeze(-1)            # (a, b, c)
        ce = (self.w_train * nll).sum() / self.w_train.sum()
        eq = eq_loss(logp, self.gather, self.w_eq) if with_eq else logp.new_zeros(())
        return logp, nll, ce, eq

    def schedule(self, epoch: int) -> tuple[float, float, float, list[int], float]:
        """(lr, weight decay, lambda, sequence lengths, mu) of the step taken after `epoch` steps.

        First phase (to refine_start, or to `epochs` without a second phase): lr, weight_decay,
        lambda = 0 before eq_start then a linear ramp of eq_ramp epochs to eq_weight,
        eq_seq_lens, ov_bias_weight. Second phase: refine_lr, refine_weight_decay, lambda ramped
        from 0 to refine_eq_weight over refine_ramp epochs, refine_seq_lens,
        refine_ov_bias_weight. With lr_schedule "cosine" each phase's lr decays to 0 at its own end."""
        cfg = self.cfg
        if cfg.refines() and epoch >= cfg.refine_start:
            e, length = epoch - cfg.refine_start, cfg.epochs - cfg.refine_start
            lam = cfg.refine_eq_weight * min(1.0, (e + 1) / max(1, cfg.refine_ramp))
            return (self._cosine(cfg.refine_lr, e, length), cfg.refine_weight_decay, lam, self.seq_lens[1],
                    cfg.refine_ov_bias_weight)
        length = cfg.refine_start if cfg.refines() else cfg.epochs
        lam = 0.0 if epoch < cfg.eq_start else \
            cfg.eq_weight * min(1.0, (epoch - cfg.eq_start + 1) / max(1, cfg.eq_ramp))
        return self._cosine(cfg.lr, epoch, length), cfg.weight_decay, lam, self.seq_lens[0], cfg.ov_bias_weight

    def _cosine(self, lr: float, epoch: int, length: int) -> float:
        if self.cfg.lr_schedule == "cosine":
            return lr * 0.5 * (1 + math.cos(math.pi * min(epoch, length) / max(1, length)))
        return lr

    def _seq_eq_loss(self, L: int) -> torch.Tensor:
        """`seq_eq_loss` on eq_seq_batch fresh random sequences of length L (from the task's generator)."""
        x = torch.randint(0, self.cfg.p, (self.cfg.eq_seq_batch, L), generator=self.generator)
        M, R = self.model.circuits()
        direct = (self.model.W_E, self.model.W_U) if self.model.residual else None
        return seq_eq_loss(M, R, x, direct)

    @torch.no_grad()
    def prune_heads(self, fraction: float) -> list[int]:
        """Zero W_V and W_O of every head whose class-centred OV circuit has Frobenius norm below
        `fraction` x the largest head's; returns those heads. They stay zero: with W_V = W_O = 0
        a head gets no gradient, and AdamW (with fresh moments) and weight decay keep zeros."""
        if fraction <= 0:
            return []
        OV = self.model.circuits()[1].mT                                         # (H, n, n_out) key-major
        norm = (OV - OV.mean(-1, keepdim=True)).flatten(1).norm(dim=1)
        weak = torch.nonzero(norm < fraction * norm.max()).flatten()
        self.model.W_V[weak] = 0
        self.model.W_O[weak] = 0
        return weak.tolist()

    def step(self, epoch: int) -> None:
        lr, weight_decay, lam, lengths, mu = self.schedule(epoch - 1)
        if self.cfg.refines() and epoch - 1 == self.cfg.refine_start:
            self.optimizer.state.clear()         # second phase: fresh AdamW moments (a fine-tune)
            self.prune_heads(self.cfg.refine_prune)
        for group in self.optimizer.param_groups:
            group["lr"], group["weight_decay"] = lr, weight_decay
        with_seq = lam > 0 and bool(lengths)
        overlapped = self.overlap and with_seq and not self.model.residual
        # epochs with sequence terms on one thread, a term each when overlapped: more threads split
        # the OV gradient's product differently (other bits); `threads` for the grid term alone
        _use_threads(1 if with_seq else self.threads)
        if overlapped:
            # the grid term in a second thread while this one does the sequence terms: its
            # gradients w.r.t. (M, R) enter the graph where the grid term's would, so autograd
            # adds the same terms in the same order (the same bits; tests/test_pipeline.py)
            grid = _grid_pool().submit(self._grid_term_grads, lam)
            loss = _Precomputed.apply(*self.model.circuits(), grid)
            self.overlapped_steps += 1
        else:
            _, _, ce, eq = self._losses(self.model.grid_logits(), with_eq=lam > 0)
            loss = ce + lam * eq
        if lam > 0:
            for L in lengths:
                loss = loss + lam * self._seq_eq_loss(L)
        if mu > 0:
            loss = loss + mu * ov_bias_penalty(self.model.circuits()[1], M_SHIFT)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()

    def _grid_term_grads(self, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Gradients of ce + lam * eq w.r.t. the circuits (M, R): `step`'s grid term, run alone."""
        with torch.no_grad():
            M, R = self.model.circuits()
        M.requires_grad_(), R.requires_grad_()
        with torch.enable_grad():
            _, _, ce, eq = self._losses(GridAttention.apply(M, R))
            return torch.autograd.grad(ce + lam * eq, (M, R))

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        logits = self.model.grid_logits()
        logp, nll, ce, eq = self._losses(logits)
        correct = (logits.argmax(-1) == self.target).float()
        held = self.w_held.sum().clamp_min(1)
        return {
            "train_loss": float(ce),
            "train_acc": float((self.w_train * correct).sum() / self.w_train.sum()),
            "heldout_loss": float((self.w_held * nll).sum() / held),
            "heldout_acc": float((self.w_held * correct).sum() / held),
            "eq_loss": float(eq),
            "eq_error_pooled": eq_error_pooled(logp, self.gather),
            "eq_error_worst_input": eq_error_worst_input(logp, self.gather)[0],
        }

    def split(self) -> dict[str, np.ndarray]:
        return {"train": self.train_idx, "heldout": self.heldout_idx}

    def attrs(self) -> dict:
        return {"n": self.cfg.p, "m": M_SHIFT}

    def progress(self, metrics: dict[str, float]) -> dict[str, float]:
        return {"loss": f"{metrics['train_loss']:.3g}", "train": f"{metrics['train_acc']:.3f}",
                "held": f"{metrics['heldout_acc']:.3f}", "eq_pooled": f"{metrics['eq_error_pooled']:.1e}",
                "eq_worst": f"{metrics['eq_error_worst_input']:.1e}"}

    def summary(self, metrics: dict[str, float]) -> str:
        return (f"train acc {metrics['train_acc']:.2%}, held-out acc {metrics['heldout_acc']:.2%}, "
                f"equivariance error {metrics['eq_error_pooled']:.2e} pooled, "
                f"{metrics['eq_error_worst_input']:.2e} worst input")

"""The orbit experiment's equivariance errors, stored as metrics with every snapshot: pooled
over all inputs (`eq_error_pooled`) and of the worst single input (`eq_error_worst_input`);
docs/math.md, "Equivariance loss and equivariance errors". Both read the grid in the
coordinates of `losses.orbit_gather_index`, where a shift moves along one axis only.
"""

from __future__ import annotations

import numpy as np
import torch


def eq_error_pooled(logp: torch.Tensor, gather: torch.Tensor) -> float:
    """The pooled equivariance error (docs/math.md, "Equivariance loss and equivariance errors"):
    max_s ||Delta(., s)||_F / ||l(.)||_F, all n^3 inputs pooled into one norm before the ratio,
    with the autocorrelation along the shift axis computed by FFT in float64.

    logp: grid log-probs [n, n, n, n]; gather: `orbit_gather_index(n, m)`. Stored as
    `eq_error_pooled` (`eq_error` in run files made before both errors were stored)."""
    n = logp.shape[0]
    lr = logp.reshape(-1).index_select(0, gather).view(n, -1).double()  # (a, rest)
    power = torch.fft.rfft(lr, dim=0).abs().pow(2).sum(1)
    corr = torch.fft.irfft(power, n=n)  # corr[s] = sum_a <l_{a+s}, l_a>
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


def eq_error_worst_input(
    logp: torch.Tensor, gather: torch.Tensor, cells: torch.Tensor | None = None
) -> tuple[float, tuple[int, int, int], int]:
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
    X = logp.reshape(-1).index_select(0, gather).view(n, n * n, n).double().transpose(0, 1)  # (orbit, a, k')
    gram = (X @ X.mT).reshape(n * n, n * n)  # (orbit, a * n + a')
    sq = gram[:, :: n + 1]  # |l|^2 (orbit, a)
    a = torch.arange(n)[:, None]
    shifted = (a + torch.arange(1, n)[None, :]) % n  # (a, s - 1): a + s
    d2 = (sq[:, :, None] + sq[:, shifted] - 2 * gram[:, a * n + shifted]).reshape(n**3, n - 1)
    sq = sq.reshape(-1)  # cell o * n + a
    num = d2[cells[:, 0]] + d2[cells[:, 1]] + d2[cells[:, 2]]  # (x, s - 1)
    ratio = num.clamp_min(0) / (sq[cells[:, 0]] + sq[cells[:, 1]] + sq[cells[:, 2]])[:, None]
    i = int(ratio.argmax())
    x, s = divmod(i, n - 1)
    return float(ratio.view(-1)[i].sqrt()), (x // (n * n), x // n % n, x % n), s + 1

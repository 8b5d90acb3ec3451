"""The modular-addition task of the orbit experiment (source 000; docs/math.md).

Inputs (x1, x2, x3) in Z_n^3 (n = 24: the config key `p`), targets (x2+x3, x3+x1, x1+x2) mod n
at the three positions. All n^3 inputs exist; a seeded train / held-out split of them is
stored in the run. Shifting every input token by s shifts every target by m*s with m = 2
(`M_SHIFT`), the action under which a layer can be equivariant (docs/math.md, "The cyclic
group and orbits").
"""

from __future__ import annotations

import numpy as np

EXPERIMENTS = ("orbits",)
M_SHIFT = 2  # shifting every input by s shifts every output by 2s


def all_inputs(n: int) -> np.ndarray:
    """All n^3 inputs [n^3, 3] in C order: row i = (i // n^2, i // n % n, i % n)."""
    return np.stack(np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij"), -1).reshape(-1, 3)


def targets(x: np.ndarray, n: int) -> np.ndarray:
    """(x2+x3, x3+x1, x1+x2) mod n for inputs x [N, 3]: int [N, 3]."""
    return np.stack([x[:, 1] + x[:, 2], x[:, 2] + x[:, 0], x[:, 0] + x[:, 1]], -1) % n


def make_split(n: int, train_frac: float, mode: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (train, heldout) int64 index arrays into `all_inputs(n)`. Mode "orbit" keeps each
    diagonal-shift orbit {x + s} (n inputs) wholly on one side; "random" splits inputs."""
    rng = np.random.default_rng(seed)
    N = n**3
    if mode == "orbit":
        x = all_inputs(n)
        orbit = ((x[:, 1] - x[:, 0]) % n) * n + (x[:, 2] - x[:, 0]) % n
        chosen = rng.permutation(n * n)[: max(1, round(train_frac * n * n))]
        mask = np.isin(orbit, chosen)
    else:
        mask = np.zeros(N, bool)
        mask[rng.permutation(N)[: max(1, round(train_frac * N))]] = True
    return np.flatnonzero(mask), np.flatnonzero(~mask)


def cell_weights(idx: np.ndarray, n: int) -> np.ndarray:
    """How often each grid cell (a, b, c) is an (input, position) of the inputs `idx`: [n, n, n].
    The output at a position depends only on its own token a and the multiset {a, b, c} of keys,
    so every input's three outputs are cells (x1,x2,x3), (x2,x1,x3), (x3,x1,x2) of this grid."""
    x = all_inputs(n)[idx]
    w = np.zeros((n, n, n))
    for cells in (x[:, [0, 1, 2]], x[:, [1, 0, 2]], x[:, [2, 0, 1]]):
        np.add.at(w, (cells[:, 0], cells[:, 1], cells[:, 2]), 1.0)
    return w

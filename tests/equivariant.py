"""Hand-built, exactly C_n-equivariant attention layers, and tiny run files holding them.

`equivariant_weights(n, m, orbit_sizes, d_model, d_head, seed)` returns the weights of one
attention layer whose heads form exact orbits of the given sizes (docs/math.md, "The cyclic group and orbits"):

    M_{s.h} = T_s M_h T_s^{-1},   R_{s.h} = T_{ms} R_h T_s^{-1}.

Construction. W_E = E Q and W_U = Q^T E^T with E = [I_n | 0] (n x d_model) and Q a random
orthogonal d_model x d_model matrix, so token a embeds as w_a = e_a Q. With Pi_s the
permutation of the first n coordinates (e_a Pi_s = e_{a+s}) and G_s = Q^T Pi_s Q (orthogonal),
w_a G_s = w_{a+s} and G_k^T u_c = u_{c+k} for the unembedding columns u_c. An orbit of size k
(k | n) starts from a head h0 whose weights are invariant under its stabiliser kZ_n:

    W_Q0 = sum_j G_{jk}^T X_Q (same for W_K0, W_V0),   W_O0 = sum_j Y G_{mjk},

and head j of the orbit (j = 0..k-1) is the shift s = j of h0:

    W_Q[j] = G_j^T W_Q0,  W_K[j] = G_j^T W_K0,  W_V[j] = G_j^T W_V0,  W_O[j] = W_O0 G_{mj}.

Then M_j = T_j M_0 T_j^{-1} and R_j = T_{mj} R_0 T_j^{-1} exactly (up to float rounding), for
every j mod k. Orbits are laid out one after the other: heads 0..k1-1 are the first orbit in
shift order, and so on; `extra_heads` random heads (in no orbit) follow.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from headmovies import runfile


def _shift_perm(n: int, d_model: int, s: int) -> np.ndarray:
    """Pi_s [d_model, d_model]: e_a Pi_s = e_{(a+s) mod n} for a < n, identity on the rest."""
    P = np.eye(d_model)
    a = np.arange(n)
    P[:n, :n] = 0
    P[a, (a + s) % n] = 1
    return P


def equivariant_weights(
    n: int = 24,
    m: int = 2,
    orbit_sizes=(12, 4),
    d_model: int = 32,
    d_head: int = 4,
    seed: int = 0,
    extra_heads: int = 0,
    scale: float = 1.0,
):
    """(W_E [n, d], W_Q, W_K, W_V [H, d, d_head], W_O [H, d_head, d], W_U [d, n]) float64, with
    H = sum(orbit_sizes) + extra_heads; heads form exact C_n orbits of `orbit_sizes` (each must
    divide n), in shift order, followed by `extra_heads` random heads. d_model >= n."""
    if d_model < n:
        raise ValueError(f"d_model must be >= n ({n}), got {d_model}")
    for k in orbit_sizes:
        if k < 1 or n % k:
            raise ValueError(f"orbit size {k} does not divide n = {n}")
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d_model, d_model)))
    E = np.eye(n, d_model)
    W_E = E @ Q  # [n, d]
    W_U = Q.T @ E.T  # [d, n]
    G = [Q.T @ _shift_perm(n, d_model, s) @ Q for s in range(n)]  # G[s] = Q^T Pi_s Q

    def g(s):
        return G[s % n]

    W_Q, W_K, W_V, W_O = [], [], [], []
    for k in orbit_sizes:
        stab = range(0, n, k)  # kZ_n
        X = [scale * rng.standard_normal((d_model, d_head)) for _ in range(3)]
        Y = scale * rng.standard_normal((d_head, d_model))
        q0, k0, v0 = (sum(g(s).T @ x for s in stab) / len(stab) for x in X)
        o0 = sum(Y @ g(m * s) for s in stab) / len(stab)
        for j in range(k):
            W_Q.append(g(j).T @ q0)
            W_K.append(g(j).T @ k0)
            W_V.append(g(j).T @ v0)
            W_O.append(o0 @ g(m * j))
    for _ in range(extra_heads):
        W_Q.append(scale * rng.standard_normal((d_model, d_head)))
        W_K.append(scale * rng.standard_normal((d_model, d_head)))
        W_V.append(scale * rng.standard_normal((d_model, d_head)))
        W_O.append(scale * rng.standard_normal((d_head, d_model)))
    return W_E, np.stack(W_Q), np.stack(W_K), np.stack(W_V), np.stack(W_O), W_U


NAMES = ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")


def write_run(
    path,
    epochs,
    snapshots,
    n: int | None = 24,
    m: int | None = 2,
    metrics: dict | None = None,
    experiment: str = "orbits",
    complete: bool = True,
    config: dict | None = None,
) -> Path:
    """Write a run file following `runfile`'s schema with plain h5py.

    epochs: [T] ints; snapshots: list of T dicts name -> array (same shapes across T);
    metrics: optional name -> [T] floats, logged at the same epochs; config: extra config keys."""
    path = Path(path)
    with h5py.File(path, "w", libver="latest") as f:
        f.attrs.update(
            {
                "schema_version": runfile.SCHEMA_VERSION,
                "experiment": experiment,
                "config": json.dumps({"p": n, "hand_built": True, **(config or {})}),
                "seed": 0,
                "created": "2026-01-01T00:00:00",
                "versions": json.dumps({}),
            }
        )
        if n is not None:
            f.attrs["n"], f.attrs["m"] = n, m
        snaps = f.create_group(runfile.SNAPSHOTS)
        for name in snapshots[0]:
            snaps.create_dataset(
                name,
                data=np.stack([s[name] for s in snapshots]).astype(np.float32),
                chunks=(1, *np.shape(snapshots[0][name])),
                maxshape=(None, *np.shape(snapshots[0][name])),
            )
        snaps.create_dataset(runfile.EPOCH, data=np.asarray(epochs, np.int64), maxshape=(None,))
        mets = f.create_group(runfile.METRICS)
        mets.create_dataset(runfile.EPOCH, data=np.asarray(epochs, np.int64), maxshape=(None,))
        for name, values in (metrics or {}).items():
            mets.create_dataset(name, data=np.asarray(values, np.float64), maxshape=(None,))
        f.create_group(runfile.SPLIT).create_dataset("train", data=np.arange(3, dtype=np.int64))
        if hasattr(runfile, "COMPLETE"):
            f.create_dataset(runfile.COMPLETE, data=np.array([int(complete)], np.int8), maxshape=(1,))
        else:
            f.attrs["complete"] = complete
    return path


def equivariant_run(
    path,
    epochs,
    n: int = 24,
    m: int = 2,
    orbit_sizes=(12, 4),
    extra_heads: int = 0,
    d_model: int = 32,
    d_head: int = 4,
    seed: int = 0,
    config: dict | None = None,
    dead_heads=(),
) -> Path:
    """A run whose weights move from random (first epoch) to the exactly equivariant layer
    (last epoch) along a straight line, then stay; metrics included. `dead_heads`: heads whose
    W_O is zero from the middle snapshot T // 2 on (pruned, as phase 2 of the orbit experiment
    does)."""
    target = dict(zip(NAMES, equivariant_weights(n, m, orbit_sizes, d_model, d_head, seed, extra_heads)))
    rng = np.random.default_rng(seed + 1)
    start = {k: rng.standard_normal(v.shape) * 0.3 * np.abs(v).mean() for k, v in target.items()}
    start["W_E"], start["W_U"] = target["W_E"], target["W_U"]  # keep the embedding: only heads move
    epochs = np.asarray(epochs)
    T = len(epochs)
    snaps = []
    for t in range(T):
        w = min(1.0, t / max(1, T - 2))  # reaches the target one snapshot before the end
        snaps.append({k: (1 - w) * start[k] + w * target[k] for k in NAMES})
        if dead_heads and t >= T // 2:
            snaps[-1]["W_O"][list(dead_heads)] = 0.0
    metrics = {
        "train_acc": np.linspace(0.1, 1.0, T),
        "heldout_acc": np.linspace(0.05, 0.76, T),
        "eq_error_pooled": np.geomspace(1e-1, 1e-4, T),
        "eq_error_worst_input": np.geomspace(3e-1, 3e-4, T),
    }
    return write_run(path, epochs, snaps, n, m, metrics, config=config)

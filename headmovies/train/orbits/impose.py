"""An imposed-orbit experiment (docs/experiments.md, "Levers"; config key impose_orbit_at): at one epoch,
each frequency group whose size fits is projected onto its nearest exact orbit, and training
goes on from there. It answers "what does the source's 12-gon look like, and how long does
training keep it"; an orbit made so is imposed, not emergent, and the run file (attribute
`imposed_orbits`) and the movie's caption say so. Never the default.

The rule (RULE, stored with the epoch in the run file), for a layer of C_n (n tokens, outputs
shifting by m s):

1. Frequency groups: each live head (centred OV norm above DEAD_TOL of the largest) has a
   frequency omega in 1..n/2, the key frequency with most of its query-averaged centred QK
   power; its phase is phi = arg X^(0, omega) of its centred QK circuit (docs/math.md, "Orbit
   spectrum"; computed here, as training does not load the rendering code). A group fits when
   its size c is a multiple of N = n / gcd(omega, n).
2. Orbits: sorted by phase, the heads are dealt into c / N orbits round-robin; in each, the
   k-th head by phase takes slot k (phase phi_0 + 2 pi k / N, phi_0 their circular mean offset),
   reached from slot 0 by the shift s_k = k (omega / g)^-1 mod N (g = gcd(omega, n)).
3. Template: the mean of the members' circuits shifted back to slot 0 (T_-s M T_s, T_-ms R T_s),
   averaged over the stabiliser N Z_n, QK rows and OV columns centred (the softmax gauges),
   each cut to rank d_head (its largest singular values; where the cut would split equal
   singular values, which the stabiliser's shifts turn into each other, below them).
4. Each member gets the template shifted to its slot, written back into its weights:
   W_Q, W_K from the QK factors through pinv(W_E), W_V through pinv(W_E) and W_O through
   pinv(W_U) (balanced square-root factors of the SVD). W_E and W_U are left as they are.
   The circuits are then an exact orbit up to rounding (when d_model >= n, W_E of full rank).

The projection ends the step of epoch E (`OrbitTask.step`), so the snapshot of epoch E shows the
imposed orbits, and AdamW's moments are reset: the old moments belong to the old weights.
"""

from __future__ import annotations

import math

import numpy as np
import torch

DEAD_TOL = 0.01  # as the orbit check's: OV norm below 1 % of the largest head's is dead
RULE = (
    "each frequency group of live heads whose size is a multiple of N = n/gcd(w, n), dealt into "
    "orbits by QK phase, projected onto the exact orbit of the slot-aligned mean template "
    "(stabiliser-averaged, centred, rank d_head), written back through pinv(W_E) and pinv(W_U); "
    "AdamW moments reset"
)


def _shift(X: np.ndarray, a: int, b: int) -> np.ndarray:
    """X [..., n, n] with out[i + a, j + b] = X[i, j]."""
    return np.roll(X, (a, b), axis=(-2, -1))


def _low_rank(X: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """(A [n, r], B [n', r]) with A B^T the best approximation of X of rank at most r that keeps
    every singular value equal to the last one kept (a cut through equal singular values would
    pick one direction of a pair that a shift rotates into each other, breaking the orbit);
    balanced square-root factors, zero columns where the rank is below r."""
    U, S, Vt = np.linalg.svd(X)
    k = min(r, len(S))
    while 0 < k < len(S) and S[k - 1] - S[k] <= 1e-6 * S[0]:
        k -= 1
    root = np.sqrt(S[:k])
    A, B = np.zeros((X.shape[0], r)), np.zeros((X.shape[1], r))
    A[:, :k], B[:, :k] = U[:, :k] * root, Vt[:k].T * root
    return A, B


def frequency_groups(M: np.ndarray, R: np.ndarray) -> dict[int, list[int]]:
    """{omega: live heads} from uncentred circuits M [H, n, n] (query, key), R [H, n_out, n]
    (output class, key), as the module docstring's step 1 defines them."""
    n = M.shape[-1]
    Mc = M - M.mean(-1, keepdims=True)
    Rc = R - R.mean(-2, keepdims=True)
    r_norm = np.linalg.norm(Rc.reshape(len(R), -1), axis=1)
    live = r_norm > DEAD_TOL * r_norm.max() if len(R) and r_norm.max() > 0 else np.zeros(len(R), bool)
    power = np.abs(np.fft.ifft(Mc.mean(1), axis=-1)) ** 2  # [H, key frequency]
    freq = power[:, 1 : n // 2 + 1].argmax(1) + 1
    groups: dict[int, list[int]] = {}
    for h in np.flatnonzero(live):
        groups.setdefault(int(freq[h]), []).append(int(h))
    return groups


def orbit_targets(M: np.ndarray, R: np.ndarray, m: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{head: (M_h, R_h)} of the projected heads: exact-orbit circuits (centred) for every head
    of every fitting frequency group (module docstring, steps 1-3, before the rank cut)."""
    n = M.shape[-1]
    out = {}
    for omega, heads in frequency_groups(M, R).items():
        g = math.gcd(omega, n)
        N = n // g
        if len(heads) % N:
            continue
        a = np.arange(n)
        z = (M[heads] - M[heads].mean(-1, keepdims=True)).mean(1) @ np.exp(2j * np.pi * omega * a / n)
        order = [heads[i] for i in np.argsort(np.angle(z))]
        inv = pow(omega // g, -1, N) if N > 1 else 0
        for j in range(len(heads) // N):
            members = order[j :: len(heads) // N]  # N heads, in phase order
            shifts = [(k * inv) % N for k in range(N)]
            M0 = np.mean([_shift(M[h], -s, -s) for h, s in zip(members, shifts)], 0)
            R0 = np.mean([_shift(R[h], -m * s, -s) for h, s in zip(members, shifts)], 0)
            stab = range(0, n, N)
            M0 = np.mean([_shift(M0, s, s) for s in stab], 0)
            R0 = np.mean([_shift(R0, m * s, s) for s in stab], 0)
            M0 = M0 - M0.mean(-1, keepdims=True)
            R0 = R0 - R0.mean(-2, keepdims=True)
            for h, s in zip(members, shifts):
                out[h] = (_shift(M0, s, s), _shift(R0, m * s, s))
    return out


@torch.no_grad()
def impose_orbits(model, m: int) -> dict[int, list[int]]:
    """Project the fitting frequency groups of `model` (an `AttentionLayer`: W_E [n, d],
    W_Q, W_K, W_V [H, d, d_head], W_O [H, d_head, d], W_U [d, n]) onto exact orbits, in place
    (module docstring). Returns {omega: heads} of the projected groups ({} when none fits).
    ValueError if d_model < n (W_E cannot carry every token's own row)."""
    W_E = model.W_E.detach().double().numpy()
    W_U = model.W_U.detach().double().numpy()
    n, d = W_E.shape
    if d < n:
        raise ValueError(f"impose_orbit_at needs d_model >= n ({n}), got {d}")
    Mt, OVt = model.circuits()  # M [H, n, n] (score scale included), R [H, n_out, n]
    M, R = Mt.double().numpy(), OVt.double().numpy()
    targets = orbit_targets(M, R, m)
    if not targets:
        return {}
    d_head = model.W_Q.shape[-1]
    scale = math.sqrt(d_head) / getattr(model, "score_scale", 1.0)  # M = E W_Q W_K^T E^T * score_scale / sqrt(d_head)
    E_pinv, U_pinv = np.linalg.pinv(W_E), np.linalg.pinv(W_U)
    dtype = model.W_Q.dtype
    for h, (Mh, Rh) in targets.items():
        A, B = _low_rank(Mh * scale, d_head)  # E W_Q = A, E W_K = B
        V, Out = _low_rank(Rh.T, d_head)  # key-major OV: E W_V = V, W_O W_U = Out^T
        model.W_Q[h] = torch.from_numpy(E_pinv @ A).to(dtype)
        model.W_K[h] = torch.from_numpy(E_pinv @ B).to(dtype)
        model.W_V[h] = torch.from_numpy(E_pinv @ V).to(dtype)
        model.W_O[h] = torch.from_numpy(Out.T @ U_pinv).to(dtype)
    groups = frequency_groups(M, R)
    return {w: hs for w, hs in groups.items() if hs[0] in targets}

"""Orbit check: do a layer's heads fall into orbits of C_n, checked on the full matrices?

Source: source 000 ("Attention heads forming orbits"); docs/math.md, "Orbit check". A layer is exactly
C_n-equivariant iff its heads fall into orbits: the shift s sends head h to a head s.h with

    M_{s.h} = T_s M_h T_s^{-1},   R_{s.h} = T_{ms} R_h T_s^{-1}
    (in indices: M_{s.h}[a+s, b+s] = M_h[a, b],  R_{s.h}[c+ms, b+s] = R_h[c, b]),

where M_h [n, n] is head h's QK circuit and R_h [n, n] its OV circuit (`render.core.circuits`).

The check, step by step (docs/math.md, "Orbit check", states the same):

1. Gauge. M_h is centred over keys (each row), R_h over output classes (each column): the
   two softmaxes ignore exactly those constants.
2. Dead heads. A head whose centred R_h has Frobenius norm <= dead_tol x the largest head's
   adds (almost) nothing to the logits whatever its attention does; it is set apart and
   takes no part in merging or orbits.
3. Merging. Live heads whose centred M_h agree (||M_h - M_g||_F <= tol x max(the larger
   norm, nu), nu as in 4) attend identically, so the layer sees only the sum of their R_h:
   they are merged into one unit with M = their mean and R = the sum of their centred R_h
   (transitively: chains of agreeing heads form one unit). A merged unit whose summed R
   cancels (<= dead_tol x the largest head's R) is dead as a whole.
4. Matching. For every shift s and unit u, s.u is the unit v nearest to (T_s M_u T_s^{-1},
   T_{ms} R_u T_s^{-1}) in the error
       e(s, u, v) = max( ||T_s M_u T_s^-1 - M_v||_F / max(||M_u||_F, nu),
                         ||T_ms R_u T_s^-1 - R_v||_F / ||R_u||_F ),
   relative to the source unit, M and R each on its own scale: they enter the layer
   differently (through a softmax, linearly) and have unrelated norms, so stacking them
   would let the larger hide an error in the smaller. nu = dead_tol x the largest ||M_u||
   (and at least 1e-9 logits) keeps a uniform-attention unit (M ~ 0) from dividing by ~0.
5. Orbits. The orbit of u is {s.u : s in C_n}. It is verified when it is closed (every shift
   sends each member onto a member), every such match has e <= tol, each shift permutes its
   members, and |orbit| x |stabiliser| = n with the stabiliser {s : s.u = u} the subgroup
   of multiples of |orbit| (e.g. a 12-unit orbit of C_24 has stabiliser {0, 12}: those
   shifts send each member onto itself). Its size counts units, so merged duplicates count
   once; `heads` lists every original head.

Bias gauge (`gauge="bias"`, off by default; the default gauge is "spec"). Attention sums to 1, so a
key-independent part of R_h (the same column beta_h for every key) adds beta_h to the output
whatever head h attends to: the layer depends only on sum_h beta_h, and moving a beta from
one head to another changes nothing. The default check keeps beta_h in R_h and so can reject an
exactly equivariant layer whose biases are spread unevenly over an orbit (trained layers do
this: docs/results/orbits.md). With gauge="bias" each centred R_h also loses its mean
over keys before steps 2-5 (a head whose remaining, key-dependent part is below dead_tol of the
largest head's centred R_h is dead), and `bias_error` reports whether the total bias
B = sum_h beta_h is itself equivariant: max_s ||roll_{ms} B - B|| / ||B|| (0 when B is at
rounding level).

Works for any n >= 1 and any m (odd n included). Pure numpy. All n x U x U errors come from
inner products computed for every shift at once in Fourier space (`shifted_inner_products`);
errors below 1e-4, where that form loses digits, are recomputed from the shifted matrices.
32 heads of C_24 take a few milliseconds (bench/orbit_check.py).
"""

from __future__ import annotations

import numpy as np

from headmovies.render.core.circuits import centre_ov, centre_qk
from headmovies.render.orbits.check_report import (
    DEAD_TOL,
    GAUGES,
    M_FLOOR,
    MARGIN,
    TOL,
    Orbit,
    OrbitReport,
    format_error,
    heads,
    is_marginal,
    sig6,
)
from headmovies.render.orbits.spectrum import orbit_spectrum, scale_amplitudes

# the report's names, re-exported: callers import the check and its report from here
__all__ = [
    "DEAD_TOL",
    "GAUGES",
    "MARGIN",
    "M_FLOOR",
    "TOL",
    "Orbit",
    "OrbitReport",
    "check_orbits",
    "format_error",
    "heads",
    "is_marginal",
    "shift_ov",
    "shift_qk",
    "shifted_inner_products",
    "sig6",
]


def shift_qk(M: np.ndarray, s: int) -> np.ndarray:
    """T_s M T_s^{-1} for M [..., n, n]: out[a+s, b+s] = M[a, b]."""
    return np.roll(M, (s, s), axis=(-2, -1))


def shift_ov(R: np.ndarray, s: int, m: int) -> np.ndarray:
    """T_{ms} R T_s^{-1} for R [..., n, n]: out[c+ms, b+s] = R[c, b]."""
    return np.roll(R, (m * s, s), axis=(-2, -1))


def _merge(Mc: np.ndarray, live: np.ndarray, tol: float, floor: float) -> list[list[int]]:
    """Connected components of live heads whose centred M agree within tol (relative)."""
    idx = np.flatnonzero(live)
    X = Mc[idx].reshape(len(idx), -1)
    norms = np.linalg.norm(X, axis=1)
    d2 = (norms[:, None] ** 2 + norms[None, :] ** 2 - 2 * X @ X.T).clip(0)
    scale = np.maximum(np.maximum(norms[:, None], norms[None, :]), floor)
    close = np.sqrt(d2) <= tol * scale
    parent = list(range(len(idx)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(np.triu(close, 1))):
        parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(idx)):
        groups.setdefault(root(i), []).append(int(idx[i]))
    return sorted(groups.values())


def check_orbits(
    M: np.ndarray,
    R: np.ndarray,
    n: int,
    m: int,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
    gauge: str = "spec",
    group_match: bool = False,
    score_scale: float = 1.0,
) -> OrbitReport:
    """Orbit check of one snapshot (module docstring gives the definition).

    M: QK circuits [H, n, n] (query token, key token); R: OV circuits [H, n, n] (output class,
    key token), both uncentred, as `render.core.circuits` gives them. n: order of C_n (= d_vocab =
    d_vocab_out); m: outputs shift by m*s when inputs shift by s. tol: relative Frobenius
    tolerance for a match (and for merging); dead_tol: OV norm, relative to the largest head's,
    below which a head is dead. gauge: "spec" (the default: centre QK rows and OV columns) or
    "bias" (also remove each head's key-independent OV part; module docstring). group_match: also
    give each frequency group its within-group match error (`spectrum.group_match`; a loop over
    the shifts, costlier than the check, so `orbits check` asks for it and a movie's pass does not).
    score_scale: the run's attention score scale (`check_run.score_scale_of`): each group's
    amplitude is the one its softmax sees (`spectrum.scale_amplitudes`). Raises ValueError on
    mismatched shapes or an unknown gauge.
    """
    if gauge not in GAUGES:
        raise ValueError(f"gauge must be one of {GAUGES}, got {gauge!r}")
    M = np.asarray(M, np.float64)
    R = np.asarray(R, np.float64)
    H = M.shape[0]
    if M.shape != (H, n, n) or R.shape != (H, n, n):
        raise ValueError(f"expected M and R of shape [n_heads, {n}, {n}], got {M.shape} and {R.shape}")
    Mc, Rc = centre_qk(M), centre_ov(R)
    r_scale = np.linalg.norm(Rc.reshape(H, -1), axis=1).max() if H else 0.0  # before the bias gauge
    bias_error = None
    if gauge == "bias":
        beta = Rc.mean(2)  # [H, n]: output added whatever the attention
        Rc = Rc - beta[:, :, None]
        B = beta.sum(0)
        nB = np.linalg.norm(B)
        # a total bias at rounding level (relative to the largest head's OV) counts as none
        bias_error = (
            0.0
            if nB <= 1e-9 * max(r_scale, M_FLOOR)
            else max((np.linalg.norm(np.roll(B, m * s) - B) / nB for s in range(1, n)), default=0.0)
        )
    r_norm = np.linalg.norm(Rc.reshape(H, -1), axis=1)
    live = r_norm > dead_tol * r_scale if r_scale > 0 else np.zeros(H, bool)
    m_scale = np.linalg.norm(Mc[live].reshape(int(live.sum()), -1), axis=1).max() if live.any() else 0.0
    m_floor = max(dead_tol * m_scale, M_FLOOR)

    groups = _merge(Mc, live, tol, m_floor) if live.any() else []
    dead = set(np.flatnonzero(~live).tolist())
    units = []
    for g in groups:
        if np.linalg.norm(Rc[g].sum(0)) > dead_tol * r_scale:
            units.append(g)
        else:  # the merged heads' OV cancel: together they add nothing
            dead.update(g)
    merged = [g for g in groups if len(g) > 1]
    U = len(units)
    UM = np.stack([Mc[g].mean(0) for g in units]) if U else np.zeros((0, n, n))
    UR = np.stack([Rc[g].sum(0) for g in units]) if U else np.zeros((0, n, n))

    sigma, err = _match(UM, UR, n, m, m_floor)  # [n, U] each
    orbits, in_orbit = [], np.zeros(U, bool)
    for u in range(U):
        if in_orbit[u]:
            continue
        orbit = _verify(u, sigma, err, n, tol)
        if orbit is not None:
            members, stab, worst = orbit
            in_orbit[members] = True
            orbits.append(Orbit([units[k] for k in members], stab, worst))
    orbits.sort(key=lambda o: (-o.size, o.heads[0]))
    near_misses = []  # would verify at (1 + MARGIN) tol: fail on the tolerance alone, by a hair
    for u in range(U):
        near = None if in_orbit[u] else _verify(u, sigma, err, n, tol * (1 + MARGIN))
        if near is not None and not in_orbit[near[0]].any():
            in_orbit[near[0]] = True
            near_misses.append(Orbit([units[k] for k in near[0]], near[1], near[2]))

    match = np.full((n, H), -1)
    match_error = np.full((n, H), np.nan)
    for u, g in enumerate(units):
        match[:, g] = np.array([units[v][0] for v in sigma[:, u]])[:, None]
        match_error[:, g] = err[:, u][:, None]
    head_error = np.full(H, np.nan)
    alive = [h for g in units for h in g]
    head_error[alive] = match_error[:, alive].max(0)
    verified = {h for o in orbits for h in o.heads}
    unassigned = sorted(h for g in units for h in g if h not in verified)
    return OrbitReport(
        n,
        m,
        tol,
        dead_tol,
        H,
        orbits,
        merged,
        sorted(dead),
        unassigned,
        match,
        match_error,
        head_error,
        gauge=gauge,
        bias_error=None if bias_error is None else float(bias_error),
        near_misses=near_misses,
        groups=scale_amplitudes(orbit_spectrum(M, R, n, m, np.isfinite(head_error), match=group_match), score_scale),
    )


def shifted_inner_products(X: np.ndarray, c: int) -> np.ndarray:
    """G [n, U, U] with G[s, u, v] = <T_cs X_u T_s^-1, X_v> (Frobenius) for X [U, n, n], every
    shift s at once, without forming a shifted copy.

    With F = fft2(X), the shift multiplies F_u[k, l] by exp(-2 pi i (c k + l) s / n), so by
    Parseval G[s] = Re sum_j P_j exp(-2 pi i j s / n) / n^2 with
    P_j = sum over (k, l) with c k + l = j (mod n) of F_u[k, l] conj(F_v[k, l]):
    n products of [U, n] x [n, U] and one FFT over j. Cost O(U^2 n^2 + U^2 n log n).
    """
    n = X.shape[-1]
    F = np.fft.fft2(X)  # [U, k, l]
    k = np.arange(n)
    l = (np.arange(n)[:, None] - c * k[None, :]) % n  # noqa: E741 - the docstring's index l: c k + l = j
    A = F[:, k[None, :], l].transpose(1, 0, 2)  # [j, U, k]
    P = A @ np.conj(A).transpose(0, 2, 1)  # [j, U, V]
    return np.fft.fft(P, axis=0).real / n**2  # [s, U, V]


def _match(UM: np.ndarray, UR: np.ndarray, n: int, m: int, m_floor: float) -> tuple[np.ndarray, np.ndarray]:
    """For each shift s and unit u: sigma[s, u], the nearest unit to s.u, and err[s, u], the
    relative error e of that match."""
    U = len(UM)
    if U == 0:  # no live head: nothing to match
        return np.zeros((n, 0), int), np.zeros((n, 0))
    XM, XR = UM.reshape(U, -1), UR.reshape(U, -1)
    nM, nR = np.linalg.norm(XM, axis=1), np.linalg.norm(XR, axis=1)
    dM = np.maximum(nM, m_floor)
    # squared distances from inner products (shifts preserve norms): ||a - b||^2 = |a|^2 + |b|^2 - 2<a, b>
    eM2 = (nM[None, :, None] ** 2 + nM**2 - 2 * shifted_inner_products(UM, 1)) / dM[None, :, None] ** 2
    eR2 = (nR[None, :, None] ** 2 + nR**2 - 2 * shifted_inner_products(UR, m)) / nR[None, :, None] ** 2
    e2 = np.maximum(eM2, eR2)  # [s, u, v]
    sigma = e2.argmin(-1)  # [s, u]
    err = np.sqrt(np.take_along_axis(e2, sigma[..., None], -1)[..., 0].clip(0))
    # the inner-product form loses digits below ~1e-7: redo tiny errors by difference
    tiny = err < 1e-4
    for s in np.flatnonzero(tiny.any(1)):
        u = np.flatnonzero(tiny[s])
        v = sigma[s, u]
        SM = shift_qk(UM[u], int(s)).reshape(len(u), -1)
        SR = shift_ov(UR[u], int(s), m).reshape(len(u), -1)
        err[s, u] = np.maximum(np.linalg.norm(SM - XM[v], axis=1) / dM[u], np.linalg.norm(SR - XR[v], axis=1) / nR[u])
    return sigma, err


def _verify(u: int, sigma: np.ndarray, err: np.ndarray, n: int, tol: float):
    """(members in shift order, stabiliser, worst error) if u's orbit is verified, else None."""
    members = list(dict.fromkeys(sigma[:, u].tolist()))
    size = len(members)
    if members[0] != u or n % size:  # the identity must send u to itself
        return None
    images = sigma[:, members]  # [n, size]
    member_set = set(members)
    for row in images.tolist():  # closed, and each shift permutes the members
        if len(set(row)) != size or not member_set.issuperset(row):
            return None
    worst = float(err[:, members].max())
    stab = np.flatnonzero(sigma[:, u] == u).tolist()
    if worst > tol or stab != list(range(0, n, size)):
        return None
    # members in shift order: k.u for k = 0..size-1 (distinct, as the stabiliser is size Z_n)
    return [int(sigma[k, u]) for k in range(size)], stab, worst

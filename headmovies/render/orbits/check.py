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

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from headmovies.errors import RunFileError, UserError
from headmovies.render.core.circuits import centre_ov, centre_qk, circuits

if TYPE_CHECKING:
    from headmovies.runfile.reader import Run

TOL = 0.02  # source 000: "within 2 % in relative Frobenius norm"
DEAD_TOL = 0.01  # a head whose centred OV norm is below 1 % of the largest head's is dead
M_FLOOR = 1e-9  # logits: a centred QK circuit this small is uniform attention
GAUGES = ("spec", "bias")


@dataclass
class Orbit:
    """One verified orbit.

    units: merged units in shift order: units[k] = k.units[0] for k < size (each a list of
        original head indices; a unit of more than one head is a merged group).
    heads: all original heads of the orbit, sorted. size: number of units = n / |stabiliser|.
    stabiliser: the shifts fixing each member. worst_error: max over members and shifts of e.
    """

    units: list[list[int]]
    stabiliser: list[int]
    worst_error: float

    @property
    def size(self) -> int:
        return len(self.units)

    @property
    def heads(self) -> list[int]:
        return sorted(h for unit in self.units for h in unit)


@dataclass
class OrbitReport:
    """Result of `check_orbits`. Shapes use H = number of heads, n = group order.

    orbits: verified orbits, largest first. merged: groups of >= 2 heads merged into one unit
    (identical centred M_h). dead: heads set apart (negligible OV). unassigned: live heads in
    no verified orbit. match [n, H] int: for head h and shift s, the head (first of its unit)
    that s sends h's unit onto (-1 for dead heads). match_error [n, H]: that match's relative
    error e (NaN for dead heads). head_error [H]: max over s of match_error (NaN if dead).
    """

    n: int
    m: int
    tol: float
    dead_tol: float
    n_heads: int
    orbits: list[Orbit]
    merged: list[list[int]]
    dead: list[int]
    unassigned: list[int]
    match: np.ndarray
    match_error: np.ndarray
    head_error: np.ndarray
    epoch: int | None = field(default=None)
    gauge: str = "spec"
    bias_error: float | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict: errors to 6 significant digits, NaN written as null."""

        def num(v):
            return None if not np.isfinite(v) else sig6(v)

        return {
            "epoch": self.epoch,
            "n": self.n,
            "m": self.m,
            "tol": self.tol,
            "dead_tol": self.dead_tol,
            "n_heads": self.n_heads,
            "gauge": self.gauge,
            "bias_error": None if self.bias_error is None else num(self.bias_error),
            "orbits": [
                {
                    "size": o.size,
                    "stabiliser": o.stabiliser,
                    "worst_error": num(o.worst_error),
                    "heads": o.heads,
                    "units": o.units,
                }
                for o in self.orbits
            ],
            "merged": self.merged,
            "dead": self.dead,
            "unassigned": self.unassigned,
            "head_error": [num(v) for v in self.head_error],
            "match": self.match.tolist(),
            "match_error": [[num(v) for v in row] for row in self.match_error],
        }

    def to_json(self) -> str:
        """JSON text, one top-level key (and one orbit) per line."""
        lines = []
        for key, value in self.to_dict().items():
            if key == "orbits" and value:
                value = "[\n  " + ",\n  ".join(json.dumps(o) for o in value) + "\n ]"
            else:
                value = json.dumps(value)
            lines.append(f" {json.dumps(key)}: {value}")
        return "{\n" + ",\n".join(lines) + "\n}"

    def text(self) -> str:
        """A few lines in words."""
        at = f" at epoch {self.epoch:,}" if self.epoch is not None else ""
        lines = [
            f"orbit check{at}: C_{self.n} acting on {heads(self.n_heads)} (outputs shift by "
            f"{self.m}s), tolerance {self.tol:.1%} relative Frobenius norm"
            + (", bias gauge (each head's key-independent OV part removed)" if self.gauge == "bias" else "")
        ]
        if not self.orbits:
            lines.append("  no verified orbit")
        for i, o in enumerate(self.orbits, 1):
            extra = f" ({len(o.heads)} heads after merging)" if len(o.heads) != o.size else ""
            lines.append(
                f"  orbit {i}: size {o.size}{extra}, stabiliser {{{', '.join(map(str, o.stabiliser))}}}, "
                f"worst error {format_error(o.worst_error, self.tol)}: heads in shift order {_units_text(o.units)}"
            )
        if self.merged:
            lines.append(f"  merged (same centred QK, OV summed): {_units_text(self.merged)}")
        lines.append(
            f"  dead (OV norm < {self.dead_tol:.0%} of the largest): "
            + (f"{heads(len(self.dead))} {self.dead}" if self.dead else "none")
        )
        if self.unassigned:
            errs = self.head_error[self.unassigned]
            lines.append(
                f"  in no orbit: {heads(len(self.unassigned))} {self.unassigned} "
                f"(their worst-shift match error: {np.nanmin(errs):.1%} to {np.nanmax(errs):.1%})"
            )
        else:
            lines.append("  in no orbit: none")
        if self.bias_error is not None:
            lines.append(f"  total bias sum_h beta_h: {format_error(self.bias_error)} from equivariant (worst shift)")
        return "\n".join(lines)


def heads(k: int) -> str:
    """'1 head', '3 heads'."""
    return f"{k} head" if k == 1 else f"{k} heads"


def format_error(x: float, tol: float = TOL) -> str:
    """A relative error in words: 1.23% or, below 0.01%, 1.2e-07. An error that two decimals
    would print as the tolerance itself gets the digits that tell on which side it lies
    (1.996%, 2.003%), and one closer than five decimals a sign (<2.00000%, >2.00000%)."""
    if x < 1e-4:
        return f"{x:.1e}"
    digits = 2
    while digits < 5 and x != tol and f"{x:.{digits}%}" == f"{tol:.{digits}%}":
        digits += 1
    text = f"{x:.{digits}%}"
    if x != tol and text == f"{tol:.{digits}%}":
        text = ("<" if x < tol else ">") + text
    return text


def _units_text(units: list[list[int]]) -> str:
    return "[" + ", ".join("+".join(map(str, u)) for u in units) + "]"


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


def sig6(v: float) -> float:
    """`v` to 6 significant digits: how reports and census rows store errors (one rounding before display)."""
    return float(f"{v:.6g}")


def check_orbits(
    M: np.ndarray, R: np.ndarray, n: int, m: int, tol: float = TOL, dead_tol: float = DEAD_TOL, gauge: str = "spec"
) -> OrbitReport:
    """Orbit check of one snapshot (module docstring gives the definition).

    M: QK circuits [H, n, n] (query token, key token); R: OV circuits [H, n, n] (output class,
    key token), both uncentred, as `render.core.circuits` gives them. n: order of C_n (= d_vocab =
    d_vocab_out); m: outputs shift by m*s when inputs shift by s. tol: relative Frobenius
    tolerance for a match (and for merging); dead_tol: OV norm, relative to the largest head's,
    below which a head is dead. gauge: "spec" (the default: centre QK rows and OV columns) or
    "bias" (also remove each head's key-independent OV part; module docstring). Raises ValueError
    on mismatched shapes or an unknown gauge.
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

    match = np.full((n, H), -1)
    match_error = np.full((n, H), np.nan)
    for u, g in enumerate(units):
        match[:, g] = np.array([units[v][0] for v in sigma[:, u]])[:, None]
        match_error[:, g] = err[:, u][:, None]
    head_error = np.full(H, np.nan)
    alive = [h for g in units for h in g]
    head_error[alive] = match_error[:, alive].max(0)
    unassigned = sorted(h for u, g in enumerate(units) if not in_orbit[u] for h in g)
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


# ---- one snapshot of a run file ----

CIRCUIT_NAMES = ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")


def snapshot_index(run: Run, epoch: int | None) -> int:
    """Index of the snapshot at `epoch` (the last one if None). UserError names the nearest."""
    if epoch is None:
        return len(run) - 1
    hits = np.flatnonzero(run.epochs == epoch)
    if not len(hits):
        near = run.epochs[np.argsort(np.abs(run.epochs - epoch))[:3]]
        raise UserError(
            f"{run.path} has no snapshot at epoch {epoch}; nearest: "
            f"{', '.join(map(str, sorted(near.tolist())))} (of {run.epochs[0]}..{run.epochs[-1]})"
        )
    return int(hits[0])


def group_of(run: Run) -> tuple[int, int]:
    """(n, m) of the run, after checking it holds what the orbit check needs."""
    if run.n is None or run.m is None:
        raise RunFileError(
            f"{run.path} ({run.experiment}) has no group data (n, m): the orbit check needs a "
            "run of a C_n-symmetric experiment such as orbits"
        )
    run.require(*CIRCUIT_NAMES)
    shape_e = run.shape("W_E")
    shape_u = run.shape("W_U")
    if shape_e[0] != run.n or shape_u[-1] != run.n:
        raise RunFileError(
            f"{run.path}: the orbit check needs {run.n} tokens and {run.n} output classes (C_{run.n}); "
            f"W_E is {shape_e}, W_U is {shape_u}"
        )
    return run.n, run.m


def check_tolerances(tol: float, dead_tol: float) -> None:
    """UserError (one line) unless 0 < tol < 1 and 0 <= dead_tol < 1."""
    if not 0 < tol < 1 or not 0 <= dead_tol < 1:
        raise UserError(f"--tol must be in (0, 1) and --dead-tol in [0, 1), got {tol} and {dead_tol}")


def snapshot_circuits(run: Run, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Uncentred QK and OV circuits M, R [H, n, n] of snapshot index t."""
    w = run.weights(t, list(CIRCUIT_NAMES))
    c = circuits(w)
    return c["qk"], c["ov"]


def run_report(
    run: Run, epoch: int | None = None, tol: float = TOL, dead_tol: float = DEAD_TOL, gauge: str = "spec"
) -> OrbitReport:
    """The orbit report of one snapshot of an open run (the last one by default)."""
    check_tolerances(tol, dead_tol)
    n, m = group_of(run)
    t = snapshot_index(run, epoch)
    M, R = snapshot_circuits(run, t)
    report = check_orbits(M, R, n, m, tol=tol, dead_tol=dead_tol, gauge=gauge)
    report.epoch = int(run.epochs[t])
    return report

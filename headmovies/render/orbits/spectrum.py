"""The orbit spectrum of each frequency group: how far a group of heads at one frequency is from
an orbit, harmonic by harmonic (docs/math.md, "Orbit spectrum"; docs/glossary.md).

Frequency groups. Each live head h has a frequency omega_h in 1..n/2: the key frequency holding
most of its centred QK power in the planes (0, omega) (`head_frequencies`). The heads sharing
omega form its frequency group. A shift s turns the group's planes by 2 pi omega s / n, so an
orbit at omega has N = n / gcd(omega, n) units (a multiple of N heads) and the stabiliser
N Z_n (the shifts 0, N, 2N, ...) fixes each member.

Per head of a group (M_h, R_h [n, n] its QK and OV circuits, centred as the orbit check centres
them: M over keys, R over output classes; X^(u, v) the irrep coordinate of
`render.core.projections.irrep_coordinate`):

    QK coordinate  z_h = X^(0, omega)(M_h),  phase phi_h = arg z_h,
    score amplitude A_h = 2 |z_h| / n (|z_h| / n at omega = n / 2, a real plane): the
        query-averaged scores' (0, omega) part is A_h cos(2 pi omega b / n - phi_h) over keys b
        (logits), so A is the amplitude the attention kernel e^{A cos} expands in modified
        Bessel functions I_k(A) (A, not r: r is a plane's rotation frequency, docs/math.md),
    OV weight     |rho_h| = |X^(omega, (1 - m) omega)(R_h)|: the OV plane that a shift turns by
        the same angle as (0, omega) (rotation frequency m u + v = omega); for source 000's
        m = 2 it is the (omega, -omega) plane.

Group spectrum, k = 1 .. N - 1 (the OV-weighted phase moments):

    mu_k = sum_h |rho_h| e^{i k phi_h},   spectrum_k = |mu_k| / sum_h |rho_h|   (in [0, 1]).

An exact orbit (or several at omega) has equal weights on N evenly spaced phases, so every
spectrum_k is 0 (to rounding). The equivariance loss sees mode k through about I_k(A) / I_0(A),
so a group whose low modes vanish but high ones do not is "equivariant to the order the data
sees", not an orbit (docs/math.md, "Orbit spectrum").

Stabiliser-odd fraction of a head: the part of its circuit that the group's stabiliser should
fix but does not, ||X - P X||_F / ||X||_F with P X the mean of X over the stabiliser's shifts
(T_s M T_s^-1 for QK, T_ms R T_s^-1 for OV): 0 for a member of an exact orbit of size N; for a
stabiliser of two shifts it is ||X - T X|| / (2 ||X||). 0 when N = n.

Within-group match error: what the orbit check would find inside the group alone. For every
head h of the group and every shift s, the head j of the group that T_s M_h T_s^-1 and
T_ms R_h T_s^-1 match best (the larger of the two relative Frobenius errors, as the check
matches); match_qk and match_ov are the largest such errors over heads and shifts (0 on an
exact orbit, within the check's tolerance on a verified one). Where the mismatch
D = T X_h T^-1 - X_j lies, as shares of sum ||D||_F^2 over heads and shifts (from the Fourier
coefficients of D at each frequency pair (u, v)): in_plane_qk, in_plane_ov in
the group's own planes ((0, +-omega) for QK, +-(omega, (1 - m) omega) for OV: what the spectrum
measures); key_independent_ov in the key-independent OV part (v = 0: what the orbit check's bias gauge
sets aside); the rest lies in the heads' other components. A group whose mismatch lies in its
planes is irregular in phase or weight (the spectrum shows it); one whose mismatch lies outside
has the right phases but differs elsewhere.

Pure numpy; all inputs are the uncentred circuits of `render.core.circuits`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from headmovies.render.core.circuits import centre_ov, centre_qk
from headmovies.render.core.projections import Panel, irrep_coordinate


def head_frequencies(M: np.ndarray) -> np.ndarray:
    """int [H]: each head's frequency w in 1..n/2, the key frequency holding most of its
    centred QK power in the planes (0, w). M: QK circuits [H, n, n] (n >= 2)."""
    n = M.shape[-1]
    a = np.arange(n)
    key_power = np.abs(centre_qk(M).sum(1) @ np.exp(2j * np.pi * np.outer(a, a) / n)) ** 2  # (H, w)
    return key_power[:, 1 : n // 2 + 1].argmax(1) + 1


@dataclass
class FrequencyGroup:
    """The live heads at one frequency omega and their orbit spectrum (module docstring).

    omega: the frequency; order: N = n / gcd(omega, n); heads: head indices, ascending.
    spectrum float [N - 1]: |mu_k| / sum |rho_h| for k = 1..N-1 (NaN if every |rho_h| is 0).
    amplitude, phase, weight, odd_qk, odd_ov float [len(heads)]: score amplitude A_h (logits), phase
    phi_h (radians), OV weight |rho_h|, and the stabiliser-odd fractions of M_h and R_h.
    match: the within-group match error (module docstring) {match_qk, match_ov, in_plane_qk,
    in_plane_ov, key_independent_ov}, fractions (the shares NaN where nothing is mismatched).
    """

    omega: int
    order: int
    heads: list[int]
    spectrum: np.ndarray
    amplitude: np.ndarray
    phase: np.ndarray
    weight: np.ndarray
    odd_qk: np.ndarray
    odd_ov: np.ndarray
    match: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready: numbers to 4 significant digits (NaN as null); the score amplitudes under
        the key "r", the name census rows store them by."""

        def nums(x):
            return [None if not np.isfinite(v) else float(f"{v:.4g}") for v in np.asarray(x, float)]

        return {
            "omega": self.omega,
            "order": self.order,
            "heads": self.heads,
            "spectrum": nums(self.spectrum),
            "r": nums(self.amplitude),
            "odd_qk": nums(self.odd_qk),
            "odd_ov": nums(self.odd_ov),
            "within_group_match": dict(zip(self.match, nums(list(self.match.values())))),
        }

    def text(self) -> str:
        """One line in words, e.g. 'frequency group w = 6: 4 heads [..], spectrum |mu_k|/sum|rho|
        k = 1..3: 0 0 0; score amplitude A 1.2-1.4; stabiliser-odd QK <= 0.1%, OV <= 0.0%'."""
        spec = " ".join(f"{v:.3f}" if np.isfinite(v) else "-" for v in self.spectrum)
        return (
            f"frequency group w = {self.omega} (orbit size {self.order}): {len(self.heads)} "
            f"head{'s' if len(self.heads) != 1 else ''} {self.heads}; spectrum |mu_k|/sum|rho| "
            f"k = 1..{self.order - 1}: {spec}; "
            f"score amplitude A {self.amplitude.min():.2f}-{self.amplitude.max():.2f}; "
            f"stabiliser-odd QK <= {self.odd_qk.max():.1%}, OV <= {self.odd_ov.max():.1%}"
            + (f"; {self.match_text()}" if self.match else "")
        )

    def match_text(self) -> str:
        """'within-group match error QK 17.5%, OV 2.4%; the QK mismatch lies 7% in the group's
        planes, 93% elsewhere; the OV mismatch 0% in its plane, 100% in the key-independent OV
        part, 0% elsewhere' ('no QK mismatch' where that error shows as 0.0 %)."""
        m = self.match

        def parts(name: str, shares: list[tuple[str, float]]) -> str:
            if not m[f"match_{name}"] >= 5e-4 or not all(np.isfinite(v) for _, v in shares):
                return f"no {name.upper()} mismatch"
            rest = max(0.0, 1 - sum(v for _, v in shares))
            where = [f"{v:.0%} {place}" for place, v in shares] + [f"{rest:.0%} elsewhere"]
            return f"the {name.upper()} mismatch lies " + ", ".join(where)

        return (
            f"within-group match error QK {m['match_qk']:.1%}, OV {m['match_ov']:.1%}; "
            + parts("qk", [("in the group's planes", m["in_plane_qk"])])
            + "; "
            + parts(
                "ov", [("in its plane", m["in_plane_ov"]), ("in the key-independent OV part", m["key_independent_ov"])]
            )
        )


def low_high(spectrum) -> tuple[float | None, float | None]:
    """(max |mu_k| / sum |rho| over k = 1..3, over k >= 4) of a group's spectrum (|mu_k| / sum
    |rho| for k = 1..N_w - 1; None or NaN entries skipped, after the split, so an entry keeps its
    k); None where there is no such k. The census tables, the gallery and the movie's panel
    lines report the spectrum this way."""

    def top(part) -> float | None:
        s = [float(v) for v in part if v is not None and np.isfinite(v)]
        return max(s) if s else None

    spectrum = list(spectrum)
    return top(spectrum[:3]), top(spectrum[3:])


def panel_lines(groups: list[FrequencyGroup], panels: list[Panel], n: int, m: int) -> list[str]:
    """Per panel, the orbit spectrum of the frequency group whose own plane it shows (QK (0, +-w),
    OV +-(w, (1 - m) w); the first such panel of each group, QK panels first), in two lines:
    'frequency group w = 2: 12 heads\n|mu_k|/sum|rho| <= 0.025 (k <= 3), <= 0.41 (k >= 4)' (the
    largest over k = 1..3 and over k >= 4, `low_high`; '< 1e-6' at rounding level); if no live
    head is at w: 'frequency group w = 2: empty\n(w = 2 is no live head's dominant frequency)' (the
    panel may still show live heads of other frequencies, even a verified orbit). '' for every
    other panel. `groups`: one snapshot's (`orbit_spectrum`); panels: [P]; m: outputs shift by m s."""
    by_omega = {g.omega: g for g in groups}

    def omega_of(p: Panel) -> int | None:
        for w in range(1, n // 2 + 1):
            qk = {(0, w % n), (0, -w % n)}
            ov = {(w % n, (1 - m) * w % n), (-w % n, -(1 - m) * w % n)}
            if (p.u % n, p.v % n) in (qk if p.circuit == "qk" else ov):
                return w
        return None

    out = [""] * len(panels)
    seen: set[int] = set()
    for i in sorted(range(len(panels)), key=lambda i: panels[i].circuit != "qk"):
        w = omega_of(panels[i])
        if w is None or w in seen:
            continue
        seen.add(w)
        g = by_omega.get(w)
        if g is None:
            out[i] = f"frequency group ω = {w}: empty\n(ω = {w} is no live head's dominant frequency)"
            continue
        low, high = low_high(g.spectrum)
        heads = f"{len(g.heads)} head{'s' * (len(g.heads) != 1)}"
        if low is None:
            out[i] = f"frequency group ω = {w}: {heads}\n|μ̂_k|/Σ|ρ| undefined (no OV weight)"
            continue
        spec = f"|μ̂_k|/Σ|ρ| {_bound(low)} (k ≤ {min(3, g.order - 1)})"
        if high is not None:
            spec += f", {_bound(high)} (k ≥ 4)"
        out[i] = f"frequency group ω = {w}: {heads}\n{spec}"
    return out


SPECTRUM_FLOOR = 1e-6  # a spectrum value below this is rounding (an exact orbit): shown as '< 1e-6'


def spectrum_text(v: float) -> str:
    """A spectrum value as the movie's panel lines and the sweep table show it: '0.025' (2
    significant digits), or '< 1e-6' at rounding level (`SPECTRUM_FLOOR`)."""
    return "< 1e-6" if v < SPECTRUM_FLOOR else f"{v:.2g}"


def _bound(v: float) -> str:
    """'≤ 0.025', or '< 1e-6' at rounding level (`spectrum_text`)."""
    text = spectrum_text(v)
    return text if text.startswith("<") else f"≤ {text}"


def scale_amplitudes(groups: list[FrequencyGroup], score_scale: float) -> list[FrequencyGroup]:
    """The groups with A multiplied by `score_scale` (in place; returned): a run trained with the
    config key score_scale attends with score_scale times the scores its weights give, and
    A is the amplitude its softmax sees. Circuits from the weights alone leave it out."""
    if score_scale != 1.0:
        for g in groups:
            g.amplitude = g.amplitude * score_scale
    return groups


def stabiliser_odd(X: np.ndarray, n: int, order: int, c: int) -> np.ndarray:
    """float [H]: ||X_h - P X_h|| / ||X_h|| for X [H, n, n] (0 for a zero X_h), P the mean over
    the stabiliser shifts s = 0, order, 2 order, ... of T_cs X T_s^-1 (c = 1 for QK, m for OV)."""
    shifts = range(0, n, order)
    P = np.mean([np.roll(X, (c * s, s), axis=(-2, -1)) for s in shifts], axis=0)
    norm = np.linalg.norm(X.reshape(len(X), -1), axis=1)
    odd = np.linalg.norm((X - P).reshape(len(X), -1), axis=1)
    return np.divide(odd, norm, out=np.zeros_like(odd), where=norm > 0)


MATCH_FLOOR = 1e-6  # a within-group match error below this is rounding: its shares are NaN


def _shifted_products(F: np.ndarray, c: int) -> np.ndarray:
    """[s, G, G]: <T_cs X_g T_s^-1, X_h> for every shift s, with F = fft2(X) [G, n, n] (as
    `check.shifted_inner_products`)."""
    n = F.shape[-1]
    k = np.arange(n)
    l = (np.arange(n)[:, None] - c * k[None, :]) % n  # noqa: E741 - c k + l = j (mod n)
    A = F[:, k[None, :], l].transpose(1, 0, 2)  # [j, G, k]
    return np.fft.fft(A @ np.conj(A).transpose(0, 2, 1), axis=0).real / n**2


def _mismatch(F: np.ndarray, c: int, best: np.ndarray, masks: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """By difference, for D = T_cs X_g T_s^-1 - X_best[s, g] (F = fft2(X) [G, n, n], best [s, G]):
    ||D||^2 [s, G] and, per mask [n, n] of frequency pairs (k, l), the sum over s, g of ||P D||^2."""
    n = F.shape[-1]
    k = np.arange(n)
    roots, j = np.exp(-2j * np.pi * k / n), (c * k[:, None] + k[None, :]) % n
    power, parts = np.empty(best.shape), np.zeros(len(masks))
    for s in range(n):  # a shift multiplies F[k, l] by exp(-2 pi i (c k + l) s / n)
        E = F * roots[j * s % n] - F[best[s]]
        D = (E.real**2 + E.imag**2) / n**2  # [G, k, l]: |fft2(D)|^2 / n^2
        power[s] = D.sum((1, 2))
        parts += [D[:, mask].sum() for mask in masks]
    return power, parts


def group_match(Mc: np.ndarray, Rc: np.ndarray, omega: int, m: int) -> dict[str, float]:
    """The within-group match error of one frequency group (module docstring).

    Mc, Rc: the group's centred QK and OV circuits [G, n, n] (G >= 1); omega: its frequency; m:
    outputs shift by m s. Returns {match_qk, match_ov, in_plane_qk, in_plane_ov, key_independent_ov}:
    errors relative to each head's own norm (0 for a zero circuit), shares of the mismatch power
    (NaN when the error is below MATCH_FLOOR). Each head's partner under every shift from inner
    products (squared distances ||a - b||^2 = |a|^2 + |b|^2 - 2 <a, b>, as the check matches);
    the errors and their parts then by difference from the Fourier coefficients (the
    inner-product form loses digits on small errors)."""
    n = Mc.shape[-1]
    w, v = omega % n, (1 - m) * omega % n
    plane_qk = np.zeros((n, n), bool)
    plane_qk[0, [w, -w % n]] = True
    plane_ov = np.zeros((n, n), bool)
    plane_ov[w, v] = plane_ov[-w % n, -v % n] = True
    key_free = np.zeros((n, n), bool)
    key_free[:, 0] = True
    key_free &= ~plane_ov
    FM, FR = np.fft.fft2(Mc), np.fft.fft2(Rc)

    def relative_e2(F: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
        """[s, g, h]: ||T_cs X_g T_s^-1 - X_h||^2 / ||X_g||^2 (0 for a zero X_g); and ||X_g|| [G]."""
        own = (np.abs(F) ** 2).sum((1, 2)) / n**2  # [G]: ||X_g||^2, the same shifted
        d2 = own[None, :, None] + own[None, None, :] - 2 * _shifted_products(F, c)
        return d2.clip(0) / np.where(own > 0, own, np.inf)[None, :, None], np.sqrt(own)

    (eM2, norm_qk), (eR2, norm_ov) = relative_e2(FM, 1), relative_e2(FR, m)
    best = np.maximum(eM2, eR2).argmin(-1)  # [s, g]: each head's partner under s
    DM, parts_qk = _mismatch(FM, 1, best, [plane_qk])
    DR, parts_ov = _mismatch(FR, m, best, [plane_ov, key_free])
    worst_qk = float((np.sqrt(DM) / np.where(norm_qk > 0, norm_qk, np.inf)).max())
    worst_ov = float((np.sqrt(DR) / np.where(norm_ov > 0, norm_ov, np.inf)).max())

    def share(part: float, total: np.ndarray, worst: float) -> float:
        # where the mismatch is at rounding level its parts mean nothing
        return float(part / total.sum()) if worst > MATCH_FLOOR else float("nan")

    return {
        "match_qk": worst_qk,
        "match_ov": worst_ov,
        "in_plane_qk": share(parts_qk[0], DM, worst_qk),
        "in_plane_ov": share(parts_ov[0], DR, worst_ov),
        "key_independent_ov": share(parts_ov[1], DR, worst_ov),
    }


def orbit_spectrum(
    M: np.ndarray, R: np.ndarray, n: int, m: int, live: np.ndarray | None = None, match: bool = True
) -> list[FrequencyGroup]:
    """The frequency groups of the live heads, by omega, each with its orbit spectrum.

    M: QK circuits [H, n, n]; R: OV circuits [H, n, n] (uncentred, as `render.core.circuits`
    gives them); m: outputs shift by m s; live: bool [H] (default: every head), e.g. the orbit
    check's live heads; match: also each group's within-group match error (`group_match`; else
    its `match` is empty). Groups have order N > 1 (every omega in 1..n/2 does). Empty for n < 2.
    Raises ValueError on mismatched shapes.
    """
    M = np.asarray(M, np.float64)
    R = np.asarray(R, np.float64)
    H = M.shape[0]
    if M.shape != (H, n, n) or R.shape != (H, n, n):
        raise ValueError(f"expected M and R of shape [n_heads, {n}, {n}], got {M.shape} and {R.shape}")
    if n < 2 or H == 0:
        return []
    live = np.ones(H, bool) if live is None else np.asarray(live, bool)
    Mc, Rc = centre_qk(M), centre_ov(R)
    freq = head_frequencies(M)
    groups = []
    for omega in sorted(set(freq[live].tolist())):
        heads = np.flatnonzero(live & (freq == omega))
        order = n // math.gcd(omega, n)
        z = irrep_coordinate(Mc[heads], 0, omega)
        rho = np.abs(irrep_coordinate(Rc[heads], omega, (1 - m) * omega))
        phase = np.angle(z)
        total = rho.sum()
        k = np.arange(1, order)
        mu = np.abs((rho[None, :] * np.exp(1j * k[:, None] * phase[None, :])).sum(1))
        spectrum = mu / total if total > 0 else np.full(order - 1, np.nan)
        groups.append(
            FrequencyGroup(
                int(omega),
                order,
                heads.tolist(),
                spectrum,
                (1 if 2 * omega == n else 2) * np.abs(z) / n,
                phase,
                rho,
                stabiliser_odd(Mc[heads], n, order, 1),
                stabiliser_odd(Rc[heads], n, order, m),
                group_match(Mc[heads], Rc[heads], int(omega), m) if match else {},
            )
        )
    return groups

"""A run's orbit outcome in a few numbers, for tables across runs (search and sweep rows;
`sweep_summary` is what `headmovies sweep` records per run, docs/sweeps.md).

`orbit_summary` runs the orbit check (`orbits.check`) and adds the frequency groups: each live
head settles at one frequency w early in training, and an orbit at w has n / gcd(w, n) heads,
so the group sizes say which orbits can form (docs/results/orbits.md, "Why orbits are rare
here").
"""

from __future__ import annotations

import numpy as np

from headmovies.render.core.circuits import centre_qk
from headmovies.render.orbits.check import DEAD_TOL, TOL, OrbitReport, check_orbits
from headmovies.render.orbits.check_run import group_of, score_scale_of, snapshot_circuits
from headmovies.render.orbits.spectrum import (
    FrequencyGroup,
    head_frequencies,
    low_high,
    spectrum_text,
)


def frequency_groups(M: np.ndarray, report: OrbitReport) -> dict[int, int]:
    """{w: number of live heads} with w = `head_frequencies`. M: QK circuits [H, n, n]."""
    freq = head_frequencies(M)
    groups: dict[int, int] = {}
    for h in np.flatnonzero(np.isfinite(report.head_error)):
        groups[int(freq[h])] = groups.get(int(freq[h]), 0) + 1
    return dict(sorted(groups.items()))


def orbit_summary(
    M: np.ndarray, R: np.ndarray, n: int, m: int, tol: float = TOL, dead_tol: float = DEAD_TOL, score_scale: float = 1.0
) -> dict:
    """The orbit check of one snapshot (circuits M, R [H, n, n]) summarised as a JSON-ready
    dict: orbit sizes (largest first), the non-trivial ones, each orbit's worst error and r-free
    stabiliser size, dead and merged head counts, the six smallest per-head worst-shift errors
    of live heads, the largest |centred QK score|, the frequency groups {w: heads}, and for each
    group of two or more heads its orbit spectrum in brief (`spectrum_brief`)."""
    report = check_orbits(M, R, n, m, tol=tol, dead_tol=dead_tol, score_scale=score_scale)
    live = np.isfinite(report.head_error)
    return {
        "orbit_sizes": [o.size for o in report.orbits],
        "nontrivial": [o.size for o in report.orbits if o.size > 1],
        "worst": [round(o.worst_error, 4) for o in report.orbits],
        "n_dead": len(report.dead),
        "n_merged": sum(len(g) for g in report.merged),
        "closest": sorted(float(e) for e in report.head_error[live])[:6],
        "max_score": float(np.abs(centre_qk(M)).max()),
        "groups": frequency_groups(M, report),
        "spectrum": [spectrum_brief(g) for g in report.groups if len(g.heads) >= 2],
    }


def spectrum_brief(g: FrequencyGroup) -> dict:
    """A frequency group's orbit spectrum in a few numbers (`spectrum.orbit_spectrum`): omega,
    head count, the largest |mu_k| / sum |rho| over k <= 3 ("low", what the loss sees) and over
    k >= 4 ("high"; None when N_w <= 4), and the largest score amplitude A (key "r_max"); 4 significant digits."""

    def sig(x):
        return None if x is None or not np.isfinite(x) else float(f"{x:.4g}")

    low, high = low_high(g.spectrum)
    return {
        "omega": g.omega,
        "heads": len(g.heads),
        "low": sig(low),
        "high": sig(high),
        "r_max": sig(float(g.amplitude.max())),
    }


SWEEP_OUTCOME = "orbit structure: sizes of the verified orbits of 2 or more heads ('none': no such orbit)"
SWEEP_DETAIL = (
    "largest frequency groups: the three largest frequency groups of 2 or more heads at the snapshot the "
    "run is summarised at (its last; a stopped run's --stop-at epoch), each as 'ω = w, h heads: a / b', a "
    "and b the largest orbit spectrum |μ̂_k|/Σ|ρ| over k ≤ 3 (what the equivariance loss sees) and over "
    'k ≥ 4 (only for groups of order N_ω > 4), 0 on an exact orbit, shown as "< 1e-6" (docs/math.md, '
    '"Orbit spectrum"); empty for a failed run and for rows recorded before the spectrum was'
)


def spectrum_detail(summary: dict) -> str:
    """The three largest frequency groups of a sweep row's summary (`orbit_summary`'s 'spectrum',
    groups of 2 or more heads; most heads first, then lower w) with their orbit spectrum in
    brief: 'ω = 2, 12 heads: 0.018 / 0.74; ω = 6, 4 heads: 0.00093' (the k >= 4 part only where
    the row has it: groups of order N_w > 4 with a finite one; '< 1e-6' at rounding level, '-'
    for an undefined k <= 3 part, e.g. a group with no OV weight). 'no
    group of 2 or more heads' when there is none; '' for a summary without 'spectrum' (rows
    written before it)."""
    if "spectrum" not in summary:
        return ""
    groups = sorted(summary["spectrum"], key=lambda g: (-g["heads"], g["omega"]))[:3]

    def num(x) -> str:
        return "-" if x is None else spectrum_text(x)

    parts = [
        f"ω = {g['omega']}, {g['heads']} heads: {num(g['low'])}"
        + (f" / {num(g['high'])}" if g["high"] is not None else "")
        for g in groups
    ]
    return "; ".join(parts) or "no group of 2 or more heads"


def outcome(summary: dict) -> str:
    """The orbit structure of an `orbit_summary`: its non-trivial orbit sizes joined by '+',
    largest first (e.g. '4+2'), or 'none'."""
    return "+".join(map(str, summary["nontrivial"])) or "none"


def sweep_summary(run) -> dict:
    """A sweep row's summary of an orbits run (a `runfile.reader.Run`): `orbit_summary` of
    its final snapshot at the default tolerances, the frequency groups with string keys (JSON),
    the epoch, and "outcome" (`outcome`). Raises RunFileError for a run without group data."""
    n, m = group_of(run)
    t = len(run) - 1
    M, R = snapshot_circuits(run, t)
    summary = orbit_summary(M, R, n, m, score_scale=score_scale_of(run))
    summary["groups"] = {str(w): count for w, count in summary["groups"].items()}
    return {"epoch": int(run.epochs[t]), "outcome": outcome(summary), **summary}

"""Which irrep planes a movie shows: the source's four, or planes chosen from the data.

A verified orbit of size k (render.orbits.check) draws a regular k-gon exactly in the planes
(circuit, u, v) whose rotation frequency r has polygon order n / gcd(r, n) = k (docs/math.md, "Irrep coordinates"), and
it has power only in planes whose order divides k. `auto_panels` picks, for each orbit, the
QK plane and the OV plane of order k in which its heads carry the most power, so that each
orbit shows as its own polygon (source 000 shows the 12-orbit at ω = 10 and the 4-orbit at
r = 6 in this way). Power is that of the merged units (mean centred M, summed centred R),
the matrices the orbit check verifies.

`default_panels` keeps the source's four panels when the run's orbits live in them (each
orbit of size > 1 has, in a seed QK panel and a seed OV panel of its order, at least
LIVES_IN of the power of its best plane of that order), and the automatic panels otherwise.
`check_panels` says whether a run can supply the planes chosen.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headmovies.errors import RunFileError, UserError
from headmovies.render.core.circuits import CIRCUIT_WEIGHTS, centre_ov, centre_qk
from headmovies.render.core.projections import CIRCUITS, Panel, fourier_power, parse_panel
from headmovies.render.orbits.check import Orbit, OrbitReport
from headmovies.runfile.reader import Run

PANEL_KEYWORDS = ("default", "auto", "source")  # the --panels words that are not planes
OLD_PANEL_KEYWORDS = {"seed": "source"}  # old names, still accepted
SOURCE_PANELS = (Panel("qk", 0, 10), Panel("ov", 10, -10), Panel("qk", 0, 6), Panel("ov", 6, -6))  # source 000's four
LIVES_IN = 0.5  # an orbit lives in a seed plane holding >= half the power of its best plane
MAX_ORBITS = 2  # auto: panels for the two largest orbits (QK and OV each): four panels
SOURCE_WORDS = "source 000's planes"  # the notes' first words: which planes, in plain words
AUTO_WORDS = "planes where this run's orbits are strongest"


def signed(f: int, n: int) -> int:
    """Frequency f mod n as a signed integer in (-n/2, n/2]."""
    f %= n
    return f - n if f > n // 2 else f


def canonical(panel: Panel, n: int, m: int) -> Panel:
    """Of the plane and its complex conjugate (-u, -v) (same power, mirrored polygon), the one
    with r mod n in [0, n/2], frequencies written in (-n/2, n/2]: e.g. qk:0,10, ov:10,-10."""
    a = Panel(panel.circuit, signed(panel.u, n), signed(panel.v, n))
    b = Panel(panel.circuit, signed(-panel.u, n), signed(-panel.v, n))
    return min((a, b), key=lambda p: (p.r(n, m) > n / 2, p.r(n, m) == n / 2 and p.u < 0, p.u < 0))


def orbit_power(orbit: Orbit, M: np.ndarray, R: np.ndarray) -> dict[str, np.ndarray]:
    """{'qk': P, 'ov': P}: the orbit's power |X^(u, v)|^2 summed over its merged units,
    P [n, n] indexed [u mod n, v mod n]. M, R: uncentred circuits [H, n, n]."""
    Mc, Rc = centre_qk(np.asarray(M, np.float64)), centre_ov(np.asarray(R, np.float64))
    UM = np.stack([Mc[u].mean(0) for u in orbit.units])
    UR = np.stack([Rc[u].sum(0) for u in orbit.units])
    return {"qk": fourier_power(UM).sum(0), "ov": fourier_power(UR).sum(0)}


def _planes(circuit: str, n: int, m: int) -> list[Panel]:
    """Every plane of a circuit outside the gauge (QK v = 0 and OV u = 0 are centred away)."""
    return [
        Panel(circuit, u, v)
        for u in range(n)
        for v in range(n)
        if not (circuit == "qk" and v == 0) and not (circuit == "ov" and u == 0)
    ]


def best_plane(power: np.ndarray, circuit: str, n: int, m: int, order: int | None) -> tuple[Panel, float] | None:
    """The plane of `circuit` with the most power among those of polygon order `order` (any
    order > 1 if None), canonicalised; None if no such plane holds power."""
    best, best_p = None, 0.0
    total = power.sum()
    for p in _planes(circuit, n, m):
        k = p.order(n, m)
        if (k == order if order is not None else k > 1) and power[p.u, p.v] > best_p:
            best, best_p = p, float(power[p.u, p.v])
    if best is None or best_p <= 1e-12 * total:
        return None
    return canonical(best, n, m), best_p


def orbit_panels(orbit: Orbit, M: np.ndarray, R: np.ndarray, n: int, m: int) -> list[Panel]:
    """[QK plane, OV plane] where `orbit` shows as its polygon: most power among the planes of
    polygon order = its size, or of any order > 1 if none holds power."""
    power = orbit_power(orbit, M, R)
    out = []
    for circuit in CIRCUITS:
        hit = best_plane(power[circuit], circuit, n, m, orbit.size) or best_plane(power[circuit], circuit, n, m, None)
        if hit:
            out.append(hit[0])
    return out


def auto_panels(
    report: OrbitReport, M: np.ndarray, R: np.ndarray, n: int, m: int, max_orbits: int = MAX_ORBITS
) -> list[Panel]:
    """Panels chosen for the data: for each of the `max_orbits` largest verified orbits of size
    > 1, its best QK plane then its best OV plane (`orbit_panels`), duplicates dropped; then,
    up to four panels, the QK planes of order > 1 where all live heads carry the most power,
    each with the strongest OV plane of the same polygon order (so one orbit, or none, still
    leaves a 2 x 2 movie). M, R: uncentred circuits [H, n, n] of the snapshot the report checked."""
    panels: list[Panel] = []
    for orbit in [o for o in report.orbits if o.size > 1][:max_orbits]:
        panels += [p for p in orbit_panels(orbit, M, R, n, m) if p not in panels]
    if len(panels) >= 4:
        return panels
    live = sorted(set(range(report.n_heads)) - set(report.dead))
    if not live:
        return panels or (list(SOURCE_PANELS) if n == 24 else [])
    power = {
        "qk": fourier_power(centre_qk(np.asarray(M, np.float64)[live])).sum(0),
        "ov": fourier_power(centre_ov(np.asarray(R, np.float64)[live])).sum(0),
    }
    ranked = {}
    for circuit in CIRCUITS:
        ranked[circuit] = [
            p
            for p in sorted(
                {canonical(p, n, m) for p in _planes(circuit, n, m) if p.order(n, m) > 1},
                key=lambda p: -power[circuit][p.u % n, p.v % n],
            )
            if p not in panels
        ]
    for qk in ranked["qk"]:  # each QK plane with the strongest OV plane of its order
        if len(panels) >= 4:
            break
        ov = next((p for p in ranked["ov"] if p.order(n, m) == qk.order(n, m) and p not in panels), None)
        if ov is not None:
            panels += [qk, ov]
    return panels


def lives_in_source_panels(report: OrbitReport, M: np.ndarray, R: np.ndarray, n: int, m: int) -> tuple[bool, str]:
    """(True, why) if every orbit of size > 1 shows as its polygon in the source's panels with
    at least LIVES_IN of its best plane's power, per circuit; else (False, why not)."""
    if n != 24:
        return False, f"source 000's planes are for addition mod 24; this run is mod {n}"
    orbits = [o for o in report.orbits if o.size > 1]
    if not orbits:
        return True, "no orbit yet"
    for o in orbits:
        power = orbit_power(o, M, R)
        for circuit in CIRCUITS:
            best = best_plane(power[circuit], circuit, n, m, o.size)
            seed = [p for p in SOURCE_PANELS if p.circuit == circuit and p.order(n, m) == o.size]
            got = max((power[circuit][p.u % n, p.v % n] for p in seed), default=0.0)
            if best is None or got < LIVES_IN * best[1]:
                return False, (
                    f"its {o.size}-orbit is faint in source 000's {circuit.upper()} planes: "
                    f"less than {'half' if LIVES_IN == 0.5 else f'{LIVES_IN:.0%}'} as strong as in its best one"
                )
    return True, "every orbit draws its polygon in them"


def default_panels(report: OrbitReport, M: np.ndarray, R: np.ndarray, n: int, m: int) -> tuple[list[Panel], str]:
    """(panels, note): the source's four if the orbits live in them, else `auto_panels`."""
    ok, why = lives_in_source_panels(report, M, R, n, m)
    if ok:
        return list(SOURCE_PANELS), f"{SOURCE_WORDS} ({why})"
    return auto_panels(report, M, R, n, m), f"{AUTO_WORDS} ({why})"


def resolve_panels(
    words: Sequence[str] | None, report: OrbitReport | None, M: np.ndarray | None, R: np.ndarray | None, n: int, m: int
) -> tuple[list[Panel], str]:
    """Panels from a `--panels` value: None or ['default'] (source 000's if the orbits live
    there, else auto), ['auto'], ['source'] (['seed'], its old name, still works), or
    CIRCUIT:U,V words. `report`, M, R (final snapshot) are needed only for default and auto.
    Returns (panels, note in words)."""
    words = [w.strip().lower() for w in words] if words else ["default"]
    renamed = [w for w in words if w in OLD_PANEL_KEYWORDS]
    words = [OLD_PANEL_KEYWORDS.get(w, w) for w in words]
    keyword = words[0] if len(words) == 1 and words[0] in PANEL_KEYWORDS else None
    if keyword is None:
        if any(w in PANEL_KEYWORDS for w in words):
            raise UserError("--panels takes one of default, auto, source, or a list of CIRCUIT:U,V planes, not both")
        return [parse_panel(w, n) for w in words], "the planes given (--panels)"
    if keyword == "source":
        old = "; --panels seed is its old name" if renamed else ""
        return list(SOURCE_PANELS), f"{SOURCE_WORDS} (--panels source{old})"
    if report is None or M is None or R is None:  # a report comes with both circuits
        if keyword == "default" and n == 24:
            return list(SOURCE_PANELS), f"{SOURCE_WORDS} (no orbit check: the run lacks its weights)"
        raise UserError(
            f"--panels {keyword} needs the orbit check of the final snapshot (a run with all six "
            "weights); give planes such as qk:0,10 ov:10,-10"
        )
    if keyword == "auto":
        return auto_panels(report, M, R, n, m), f"{AUTO_WORDS} (--panels auto)"
    return default_panels(report, M, R, n, m)


def recorded_hint(run: Run) -> str:
    """What to run instead, ending a message about a recorded run (docs/recording.md) that
    needs a built-in symmetric experiment; '' for any other run."""
    if run.experiment != "recorded":
        return ""
    return "; a recorded run's heads are drawn by `headmovies movie`, `figures` and `view` (docs/recording.md)"


def require_group(run: Run) -> tuple[int, int]:
    """(n, m) of the run's symmetry group; RunFileError if the run has none."""
    if run.n is None or run.m is None:
        raise RunFileError(
            f"{run.path} ({run.experiment}) has no group data (n, m): irrep panels need "
            f"a run of a C_n-symmetric experiment such as orbits{recorded_hint(run)}"
        )
    return run.n, run.m


def check_panels(run: Run, panels: Sequence[Panel]) -> tuple[int, int]:
    """(n, m) of `run` after checking that every panel can be drawn from it: the run has group
    data, the weights of each panel's circuit, and token-indexed circuits of size n x n.
    Raises RunFileError / UserError with one line."""
    if not panels:
        raise UserError("no panels given")
    n, m = require_group(run)
    shapes = {name: run.shape(name) for name in run.weight_names}
    for panel in panels:
        names = CIRCUIT_WEIGHTS[panel.circuit]
        missing = [w for w in names if w not in shapes]
        if missing:
            raise RunFileError(
                f"{run.path} ({run.experiment}) has no weights {missing}, so panel {panel} "
                f"({panel.circuit.upper()} circuit) cannot be drawn"
            )
        if shapes["W_E"][0] != n or (panel.circuit == "ov" and shapes["W_U"][-1] != n):
            raise RunFileError(
                f"{run.path}: panel {panel} needs {n} tokens and {n} output classes "
                f"(C_{n}); W_E is {shapes['W_E']}, W_U is {shapes.get('W_U')}"
            )
    return n, m

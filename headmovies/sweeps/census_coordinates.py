"""Where each head sits at a run's last snapshot, compactly, for the census gallery
(`census_gallery`, docs/sweeps.md "Census gallery"): the `final_planes` field of a census row.

For each of the run's largest frequency groups (live heads sharing a frequency ω,
`summary.head_frequencies`; the groups of the verified orbits first, largest orbit first, then
the largest other groups, GROUPS in all) the row keeps each head's irrep coordinate
X^(u, v) (`render.core.projections.irrep_coordinate` of its centred circuit) in the two planes
the source's movie shows for that frequency: QK (0, ω) and OV (ω, -ω) (source 000's
qk:0,10 / ov:10,-10 and qk:0,6 / ov:6,-6). An orbit of k heads at frequency ω draws a regular
k-gon there when k = n / gcd(r, n) (k / n * gcd(r, n) heads on each vertex when the orbit
is larger). Coordinates are divided by the largest |X| in that plane of the heads of the
verified orbits at ω, or of the whole group when no orbit is (kept as `scale`, 6 significant
digits), so an orbit fills its plane whatever the other heads do there (theirs may exceed 1),
and rounded to DIGITS decimals: a few bytes a head. `head_orbit` says which verified orbit each
head is in (its index in the row's `orbits`, largest first, so the movie's colour
`colours.orbit_colour(i)`), -1 for a live head in none, -2 for a dead head.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from headmovies.render.core.circuits import centre_ov, centre_qk
from headmovies.render.core.projections import irrep_coordinate
from headmovies.render.orbits.check import sig6

GROUPS = 3  # planes for at most this many frequency groups
DIGITS = 3  # decimals of the scaled coordinates
NO_ORBIT, DEAD = -1, -2


def group_frequencies(omega: Sequence[int], orbits: Sequence[dict], groups: int = GROUPS) -> list[int]:
    """The frequencies whose planes a row keeps, at most `groups`: those of the verified orbits
    (`orbits`: the row's, largest first, each with 'omega'), then the other frequencies of live
    heads (omega > 0) by how many heads hold them (ties: lower ω first). omega: int [H], 0 dead.
    [] when every head is dead."""
    out = list(dict.fromkeys(int(o["omega"]) for o in orbits if int(o["omega"]) > 0))
    counts = Counter(int(w) for w in omega if int(w) > 0)
    out += [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if w not in out]
    return out[:groups]


def head_orbits(n_heads: int, omega: Sequence[int], orbits: Sequence[dict]) -> list[int]:
    """int [H]: the index in `orbits` of each head's verified orbit, NO_ORBIT (-1) for a live head
    in none, DEAD (-2) where omega is 0 (dead). A dead head in an orbit cannot happen (the check
    leaves dead heads out)."""
    out = [DEAD if int(w) == 0 else NO_ORBIT for w in omega[:n_heads]]
    for i, o in enumerate(orbits):
        for h in o["heads"]:
            out[int(h)] = i
    return out


def _plane(X: np.ndarray, u: int, v: int, focus: np.ndarray) -> dict:
    z = irrep_coordinate(X, u, v)  # complex [H]
    top = float(np.abs(z[focus]).max())
    s = z / top if top > 0 else np.zeros_like(z)
    xy = np.round(np.stack([s.real, s.imag], -1), DIGITS) + 0.0  # + 0.0: no "-0.0"
    return {"u": u, "v": v, "scale": sig6(top), "xy": xy.tolist()}


def final_planes(
    M: np.ndarray, R: np.ndarray, omega: Sequence[int], orbits: Sequence[dict], epoch: int, groups: int = GROUPS
) -> dict:
    """The `final_planes` field of a census row. M, R: the last snapshot's uncentred QK and OV
    circuits [H, n, n]; omega: int [H] each head's frequency there (0: dead); orbits: the row's
    verified orbits (size >= 2, largest first, with 'omega' and 'heads'); epoch: the snapshot's.
    Returns {'epoch', 'groups': [{'omega', 'heads' (live heads at ω), 'qk': plane, 'ov': plane}],
    'head_orbit': [H]} with plane = {'u', 'v', 'scale', 'xy': [H][2]}."""
    M, R = np.asarray(M, np.float64), np.asarray(R, np.float64)
    H = M.shape[0]
    freq = np.asarray(omega, int)
    Mc, Rc = centre_qk(M), centre_ov(R)
    out = []
    for w in group_frequencies(omega, orbits, groups):
        group: np.ndarray = freq == w  # not empty: w is a live head's frequency
        in_orbits = [int(h) for o in orbits if int(o["omega"]) == w for h in o["heads"]]
        focus = np.isin(np.arange(H), in_orbits) if in_orbits else group
        out.append(
            {
                "omega": w,
                "heads": int(group.sum()),
                "qk": _plane(Mc, 0, w, focus),
                "ov": _plane(Rc, w, -w, focus),
            }
        )
    return {"epoch": int(epoch), "groups": out, "head_orbit": head_orbits(H, omega, orbits)}

"""The orbit check at every snapshot: when each orbit forms, and how far each head is from one.

The check of one snapshot takes a few milliseconds (bench/orbit_check.py), so the whole run
is checked: the movie colours a head as part of an orbit only from the snapshot at which that
orbit is verified, the timeline marks the moment, and the figures draw each head's distance to
the nearest orbit structure (its worst-shift match error, docs/math.md "Orbit check") as a
progress measure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from headmovies.render.core.circuits import circuits
from headmovies.runfile.reader import Run
from headmovies.render.orbits.check import CIRCUIT_NAMES, DEAD_TOL, TOL, check_orbits, group_of


@dataclass
class OrbitHistory:
    """Orbit reports of every snapshot, condensed. T snapshots, H heads.

    epochs [T] int64. orbits: per snapshot, its verified orbits as (size, heads tuple, worst
    error), largest first. head_error [T, H]: each live head's worst-shift match error (NaN
    for dead heads). dead [T, H] bool. in_orbit [T, H] bool: the head is in a verified orbit
    at that snapshot. tol, dead_tol: the check's tolerances.
    """
    epochs: np.ndarray
    orbits: list[list[tuple[int, tuple[int, ...], float]]]
    head_error: np.ndarray
    dead: np.ndarray
    in_orbit: np.ndarray
    n: int
    m: int
    tol: float
    dead_tol: float = DEAD_TOL

    def __len__(self) -> int:
        return len(self.epochs)

    def heads_in_orbits(self) -> np.ndarray:
        """int [T]: heads in verified orbits at each snapshot."""
        return self.in_orbit.sum(1)

    def counts_by_size(self) -> dict[int, np.ndarray]:
        """{orbit size: heads in verified orbits of that size [T]}, largest size first."""
        sizes = sorted({k for orbits in self.orbits for k, _, _ in orbits}, reverse=True)
        return {k: np.array([sum(len(h) for s, h, _ in orbits if s == k) for orbits in self.orbits])
                for k in sizes}

    def verified(self, heads) -> np.ndarray:
        """bool [T]: the set `heads` is one verified orbit at each snapshot."""
        key = tuple(sorted(int(h) for h in heads))
        return np.array([any(h == key for _, h, _ in orbits) for orbits in self.orbits])

    def locked_in(self, heads) -> int | None:
        """The first epoch from which `heads` is a verified orbit at every later snapshot (the
        moment a movie may colour it as one), or None if it is not one at the last snapshot."""
        ok = self.verified(heads)
        if not len(ok) or not ok[-1]:
            return None
        bad = np.flatnonzero(~ok)
        return int(self.epochs[bad[-1] + 1]) if len(bad) else int(self.epochs[0])


def orbit_history(run: Run, tol: float = TOL, dead_tol: float = DEAD_TOL,
                  progress: Callable | None = None, indices: np.ndarray | None = None) -> OrbitHistory:
    """Run the orbit check (`check.check_orbits`) on every snapshot of an open run (or on the
    snapshot indices given, in increasing order), reading the weights chunk by chunk.
    `progress`, if given, wraps the snapshot iterator (e.g. tqdm)."""
    n, m = group_of(run)
    it = run.iter_weights(list(CIRCUIT_NAMES), indices=indices)
    if progress is not None:
        it = progress(it)
    epochs, orbits, errors, dead, member = [], [], [], [], []
    for epoch, w in it:
        c = circuits(w)
        report = check_orbits(c["qk"], c["ov"], n, m, tol, dead_tol)
        H = report.n_heads
        epochs.append(epoch)
        orbits.append([(o.size, tuple(o.heads), float(o.worst_error)) for o in report.orbits])
        errors.append(report.head_error)
        d = np.zeros(H, bool)
        d[report.dead] = True
        dead.append(d)
        inside = np.zeros(H, bool)
        for o in report.orbits:
            inside[o.heads] = True
        member.append(inside)
    return OrbitHistory(np.asarray(epochs, np.int64), orbits, np.array(errors), np.array(dead), np.array(member),
                        n, m, tol, dead_tol)

"""The orbit check at every snapshot, condensed: when each orbit forms, and how far each head is from one.

The check of one snapshot takes a few milliseconds (bench/orbit_check.py), so the whole run
is checked (in the one pass over its snapshots, `stream`): the movie colours a head as part of
an orbit only from the snapshot at which that orbit is verified, the timeline marks the
moment, and the figures draw each head's distance to the nearest orbit structure (its
worst-shift match error, docs/math.md "Orbit check") as a progress measure. Pure numpy: this
module holds the results, `stream.orbit_history` computes them from a run file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from headmovies.render.core.timeline import Epochs
from headmovies.render.orbits.check import DEAD_TOL, OrbitReport


@dataclass
class SnapshotCheck:
    """The orbit check of one snapshot, condensed (one row of `OrbitHistory`). H heads.

    orbits: verified orbits as (size, heads tuple, worst error), largest first. head_error [H]:
    each live head's worst-shift match error (NaN for dead heads). dead [H] bool. in_orbit [H]
    bool: the head is in a verified orbit.
    """

    orbits: list[tuple[int, tuple[int, ...], float]]
    head_error: np.ndarray
    dead: np.ndarray
    in_orbit: np.ndarray

    @classmethod
    def of(cls, report: OrbitReport) -> SnapshotCheck:
        H = report.n_heads
        dead = np.zeros(H, bool)
        dead[report.dead] = True
        inside = np.zeros(H, bool)
        for o in report.orbits:
            inside[o.heads] = True
        return cls(
            [(o.size, tuple(o.heads), float(o.worst_error)) for o in report.orbits], report.head_error, dead, inside
        )


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

    @classmethod
    def of(
        cls,
        epochs: Epochs,
        checks: Iterable[SnapshotCheck],
        n: int,
        m: int,
        tol: float,
        dead_tol: float = DEAD_TOL,
    ) -> OrbitHistory:
        """The history of the snapshots at `epochs` [T] from their condensed checks (T of them)."""
        checks = list(checks)
        return cls(
            np.asarray(epochs, np.int64),
            [c.orbits for c in checks],
            np.array([c.head_error for c in checks]),
            np.array([c.dead for c in checks]),
            np.array([c.in_orbit for c in checks]),
            n,
            m,
            tol,
            dead_tol,
        )

    def __len__(self) -> int:
        return len(self.epochs)

    def concat(self, later: OrbitHistory) -> OrbitHistory:
        """This history followed by `later` (the snapshots a live run added)."""
        return OrbitHistory(
            np.concatenate([self.epochs, later.epochs]),
            self.orbits + later.orbits,
            np.concatenate([self.head_error, later.head_error]),
            np.concatenate([self.dead, later.dead]),
            np.concatenate([self.in_orbit, later.in_orbit]),
            self.n,
            self.m,
            self.tol,
            self.dead_tol,
        )

    def cut(self, k: int) -> OrbitHistory:
        """The first k snapshots (a resumed run dropped the others)."""
        return OrbitHistory(
            self.epochs[:k],
            self.orbits[:k],
            self.head_error[:k],
            self.dead[:k],
            self.in_orbit[:k],
            self.n,
            self.m,
            self.tol,
            self.dead_tol,
        )

    def heads_in_orbits(self) -> np.ndarray:
        """int [T]: heads in verified orbits at each snapshot."""
        return self.in_orbit.sum(1)

    def counts_by_size(self) -> dict[int, np.ndarray]:
        """{orbit size: heads in verified orbits of that size [T]}, largest size first."""
        sizes = sorted({k for orbits in self.orbits for k, _, _ in orbits}, reverse=True)
        return {k: np.array([sum(len(h) for s, h, _ in orbits if s == k) for orbits in self.orbits]) for k in sizes}

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

"""The orbit check of one snapshot of a run file (`orbits check RUN`): which snapshot, the
run's group (n, m), its circuits, and the report (`check.check_orbits`).

Source: source 000 ("Attention heads forming orbits"); docs/math.md, "Orbit check".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from headmovies.errors import RunFileError, UserError
from headmovies.render.core.circuits import circuits
from headmovies.render.orbits.check import DEAD_TOL, TOL, OrbitReport, check_orbits
from headmovies.render.orbits.panel_choice import recorded_hint

if TYPE_CHECKING:
    from headmovies.runfile.reader import Run

CIRCUIT_NAMES = ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")


def score_scale_of(run: Run) -> float:
    """The run's attention score scale (orbit config key score_scale; 1 when not stored): the
    softmax sees score_scale times the QK circuit of the weights."""
    return float((run.config or {}).get("score_scale", 1.0) or 1.0)


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
            f"run of a C_n-symmetric experiment such as orbits{recorded_hint(run)}"
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
    report = check_orbits(
        M, R, n, m, tol=tol, dead_tol=dead_tol, gauge=gauge, group_match=True, score_scale=score_scale_of(run)
    )
    report.epoch = int(run.epochs[t])
    return report

"""`python -m render orbits RUN`: check on the full QK and OV matrices whether the heads of one
snapshot fall into orbits of C_n (seed 000; definition in render/orbits.py and the README)."""
from __future__ import annotations

import argparse

import numpy as np

from render.circuits import ov_circuit, qk_circuit
from render.orbits import DEAD_TOL, TOL, OrbitReport, check_orbits
from render.reader import Run
from runfile import RunFileError, UserError

HELP = "check which heads form orbits of C_n (on the full QK/OV matrices) at one snapshot"
DESCRIPTION = HELP + """

For every shift s, each head's (T_s M_h T_s^-1, T_ms R_h T_s^-1) is matched to the nearest
head; a set of heads is a verified orbit when every shift sends each of its heads onto a head
of the set within --tol (relative Frobenius norm, QK and OV each). Heads with the same centred
QK circuit are merged (their OV summed); heads with negligible OV are dead and set apart.
Prints a short text, or JSON with --json."""

CIRCUIT_NAMES = ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run file (.h5) of a C_n-symmetric experiment, e.g. data/orbits.h5")
    p.add_argument("--epoch", type=int, help="snapshot epoch to check (default: the last snapshot)")
    p.add_argument("--tol", type=float, default=TOL, help=f"relative match tolerance (default {TOL})")
    p.add_argument("--dead-tol", type=float, default=DEAD_TOL,
                   help=f"a head whose centred OV norm is below this fraction of the largest head's is dead "
                        f"(default {DEAD_TOL})")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")


def snapshot_index(run: Run, epoch: int | None) -> int:
    """Index of the snapshot at `epoch` (the last one if None). UserError names the nearest."""
    if epoch is None:
        return len(run) - 1
    hits = np.flatnonzero(run.epochs == epoch)
    if not len(hits):
        near = run.epochs[np.argsort(np.abs(run.epochs - epoch))[:3]]
        raise UserError(f"{run.path} has no snapshot at epoch {epoch}; nearest: "
                        f"{', '.join(map(str, sorted(near.tolist())))} (of {run.epochs[0]}..{run.epochs[-1]})")
    return int(hits[0])


def group_of(run: Run) -> tuple[int, int]:
    """(n, m) of the run, after checking it holds what the orbit check needs."""
    if run.n is None or run.m is None:
        raise RunFileError(f"{run.path} ({run.experiment}) has no group data (n, m): the orbit check needs a "
                           "run of a C_n-symmetric experiment such as orbits")
    run.require(*CIRCUIT_NAMES)
    shape_e = run.f["snapshots"]["W_E"].shape[1:]
    shape_u = run.f["snapshots"]["W_U"].shape[1:]
    if shape_e[0] != run.n or shape_u[-1] != run.n:
        raise RunFileError(f"{run.path}: the orbit check needs {run.n} tokens and {run.n} output classes (C_{run.n}); "
                           f"W_E is {shape_e}, W_U is {shape_u}")
    return run.n, run.m


def snapshot_circuits(run: Run, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Uncentred QK and OV circuits M, R [H, n, n] of snapshot index t."""
    w = run.weights(t, list(CIRCUIT_NAMES))
    return qk_circuit(w["W_E"], w["W_Q"], w["W_K"]), ov_circuit(w["W_E"], w["W_V"], w["W_O"], w["W_U"])


def run_report(run: Run, epoch: int | None = None, tol: float = TOL, dead_tol: float = DEAD_TOL) -> OrbitReport:
    """The orbit report of one snapshot of an open run (the last one by default)."""
    if not 0 < tol < 1 or not 0 <= dead_tol < 1:
        raise UserError(f"--tol must be in (0, 1) and --dead-tol in [0, 1), got {tol} and {dead_tol}")
    n, m = group_of(run)
    t = snapshot_index(run, epoch)
    M, R = snapshot_circuits(run, t)
    report = check_orbits(M, R, n, m, tol=tol, dead_tol=dead_tol)
    report.epoch = int(run.epochs[t])
    return report


def run(args: argparse.Namespace) -> int:
    with Run(args.run) as r:
        report = run_report(r, args.epoch, args.tol, args.dead_tol)
        print(report.to_json() if args.json else f"{r.path}\n{report.text()}")
    return 0

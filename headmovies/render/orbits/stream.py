"""One pass over an orbit run's snapshots: each read once, its circuits computed once, and the
per-snapshot facts that the movie, the figures, the viewer and the live view need.

Per snapshot an output needs some of: each head's irrep coordinates X^(u, v) in the chosen
planes (`render.core.projections`; the movie's dots), the orbit check (`check.check_orbits`;
colours, timeline, progress figures, the viewer's orbits) and the factored circuits
(`render.core.circuits.circuit_factors`; the viewer's heatmaps and free planes).
`snapshot_facts` reads the snapshots in chunks (`Run.iter_weights`), computes each one's QK
and OV circuits once (`render.core.circuits`) and derives all of these from them; `collect`
gathers them for the whole run, or for the snapshots a live run added since the last call;
with the check, each snapshot's check runs in forked worker processes while the pass reads
on (`checked_in_workers`).

The final snapshot comes first, on its own (`final_snapshot`): its orbit check chooses the
panels (`panel_choice.resolve_panels`) before the pass can project onto them, and the pass
reuses it instead of reading it again. `RunInfo` holds what the words around the pictures say
about the run (name, config, metrics), read once. Memory: the weights of one chunk, plus what
is collected (P x H complex coordinates and the condensed check per snapshot; the viewer's
factors are larger, H x 4 x n x d_head each).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from headmovies.render.core.circuits import (
    CIRCUIT_WEIGHTS,
    centre_ov,
    centre_qk,
    circuit_factors,
    ov_circuit,
    qk_circuit,
)
from headmovies.render.core.frame_workers import can_fork, default_workers, forked_map
from headmovies.render.core.projections import Panel, irrep_coordinate
from headmovies.render.orbits.check import DEAD_TOL, TOL, OrbitReport, check_orbits
from headmovies.render.orbits.check_run import CIRCUIT_NAMES, check_tolerances, group_of, score_scale_of
from headmovies.render.orbits.history import OrbitHistory, SnapshotCheck
from headmovies.render.orbits.spectrum import FrequencyGroup
from headmovies.runfile.reader import Run

CHUNK = 32  # snapshots per HDF5 read


@dataclass(frozen=True)
class RunInfo:
    """What the words around an orbit picture say about its run, read once from the file.

    file: the run file's name; experiment; seed; config (dict); complete: training finished;
    epochs: int64 [T], the snapshots' epochs; metrics: `Run.metrics()` ({'epoch': [K], name: [K]}).
    """

    file: str
    experiment: str
    seed: int
    config: dict
    complete: bool
    epochs: np.ndarray
    metrics: dict

    @classmethod
    def of(cls, run: Run) -> RunInfo:
        return cls(
            run.path.name, run.experiment, run.seed, run.config, bool(run.complete), np.array(run.epochs), run.metrics()
        )


@dataclass
class FinalSnapshot:
    """The last snapshot of a run, read before the pass: its weights (every one the run holds),
    its uncentred circuits M (QK) and R (OV) [H, n, n] where the run holds their weights (else
    None), and its orbit report (None unless the run holds all six weights of the check)."""

    index: int
    epoch: int
    weights: dict[str, np.ndarray]
    M: np.ndarray | None
    R: np.ndarray | None
    report: OrbitReport | None


def final_snapshot(run: Run, tol: float = TOL, dead_tol: float = DEAD_TOL) -> FinalSnapshot:
    """Read the last snapshot of an open run of a C_n-symmetric experiment and check its orbits
    (the report dated with its epoch). UserError for tolerances out of range."""
    check_tolerances(tol, dead_tol)
    t = len(run) - 1
    w = run.weights(t)
    M = qk_circuit(w["W_E"], w["W_Q"], w["W_K"]) if all(k in w for k in CIRCUIT_WEIGHTS["qk"]) else None
    R = ov_circuit(w["W_E"], w["W_V"], w["W_O"], w["W_U"]) if all(k in w for k in CIRCUIT_WEIGHTS["ov"]) else None
    report = None
    if M is not None and R is not None and all(k in w for k in CIRCUIT_NAMES):
        n, m = group_of(run)
        report = check_orbits(M, R, n, m, tol, dead_tol, score_scale=score_scale_of(run))
        report.epoch = int(run.epochs[t])
    return FinalSnapshot(t, int(run.epochs[t]), w, M, R, report)


@dataclass
class Snapshot:
    """The facts of one snapshot. P panels, H heads.

    index, epoch: which snapshot. coords: complex [P, H], X^(u, v) of each head's centred
    circuit in each panel's plane (None without panels). report: its orbit report (None
    unless asked). factors: float64 [H, 4, n, d_head], `circuit_factors` (None unless asked).
    circuits: {'qk': M, 'ov': R}, each [H, n, n] uncentred (None unless asked).
    """

    index: int
    epoch: int
    coords: np.ndarray | None
    report: OrbitReport | None
    factors: np.ndarray | None
    circuits: dict[str, np.ndarray] | None = None


def snapshot_facts(
    run: Run,
    panels: Sequence[Panel] = (),
    *,
    check: bool = False,
    factors: bool = False,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
    indices: np.ndarray | None = None,
    final: FinalSnapshot | None = None,
    chunk: int = CHUNK,
    circuits: bool = False,
) -> Iterator[Snapshot]:
    """The facts of each snapshot of an open run (or of the given increasing indices), in order:
    irrep coordinates in `panels`, with `check` the orbit report (tolerances `tol`, `dead_tol`),
    with `factors` the factored circuits, with `circuits` the QK and OV circuits. Each snapshot
    is read once, in chunks of `chunk`, and its circuits computed once; `final` (from
    `final_snapshot`) is used instead of reading it."""
    kinds = {p.circuit for p in panels} | ({"qk", "ov"} if check or circuits else set())
    names = sorted({w for k in kinds for w in CIRCUIT_WEIGHTS[k]} | (set(CIRCUIT_NAMES) if factors else set()))
    group = group_of(run) if check else None
    score_scale = score_scale_of(run)
    idx = np.arange(len(run)) if indices is None else np.asarray(indices, np.int64)
    cached = final if final is not None and final.index in idx else None
    read = idx[idx != cached.index] if cached is not None else idx
    weights = zip(read, run.iter_weights(names, chunk=chunk, indices=read)) if len(read) else iter(())
    facts_of = partial(
        _facts,
        panels=panels,
        kinds=kinds,
        group=group,
        factors=factors,
        tol=tol,
        dead_tol=dead_tol,
        score_scale=score_scale,
        keep=circuits,
    )
    for t in idx:
        if cached is not None and t == cached.index:
            circ = {k: c for k, c in (("qk", cached.M), ("ov", cached.R)) if k in kinds}
            report = (
                cached.report
                if cached.report is not None and (cached.report.tol, cached.report.dead_tol) == (tol, dead_tol)
                else None
            )
            yield facts_of(cached.index, cached.epoch, cached.weights, circ=circ, report=report)
        else:
            _, (epoch, w) = next(weights)
            yield facts_of(int(t), epoch, w, circ={}, report=None)


def _facts(
    t: int,
    epoch: int,
    w: dict,
    *,
    circ: dict,
    report: OrbitReport | None,
    panels: Sequence[Panel],
    kinds: set,
    group: tuple[int, int] | None,
    factors: bool,
    tol: float,
    dead_tol: float,
    score_scale: float = 1.0,
    keep: bool = False,
) -> Snapshot:
    """One snapshot's facts from its weights `w` (and any circuits or report already computed);
    its orbit report when `group` ((n, m) of the run) is given; its circuits with `keep`."""
    if "qk" in kinds and "qk" not in circ:
        circ["qk"] = qk_circuit(w["W_E"], w["W_Q"], w["W_K"])  # [H, n, n]
    if "ov" in kinds and "ov" not in circ:
        circ["ov"] = ov_circuit(w["W_E"], w["W_V"], w["W_O"], w["W_U"])  # [H, n, n]
    coords = None
    if panels:  # centring leaves every coordinate with u, v != 0 unchanged (gauge-invariant)
        centred = {k: (centre_qk if k == "qk" else centre_ov)(circ[k]) for k in {p.circuit for p in panels}}
        coords = np.stack([irrep_coordinate(centred[p.circuit], p.u, p.v) for p in panels])  # [P, H]
    if group is not None and report is None:
        report = check_orbits(circ["qk"], circ["ov"], *group, tol, dead_tol, score_scale=score_scale)
        report.epoch = int(epoch)
    return Snapshot(
        t,
        int(epoch),
        coords,
        report if group is not None else None,
        circuit_factors(w) if factors else None,
        circ if keep else None,
    )


@dataclass
class Collected:
    """The facts of a run's snapshots (T of them), gathered: epochs int64 [T]; coords complex
    [T, P, H] (None without panels); history: the orbit check of each (None unless asked);
    factors float64 [T, H, 4, n, d_head] (None unless asked); groups: each snapshot's frequency
    groups with their orbit spectrum (`spectrum.orbit_spectrum`, from its orbit report; None
    unless the check is asked)."""

    epochs: np.ndarray
    coords: np.ndarray | None
    history: OrbitHistory | None
    factors: np.ndarray | None
    groups: list[list[FrequencyGroup]] | None = None


def collect(
    run: Run,
    panels: Sequence[Panel] = (),
    *,
    check: bool = False,
    factors: bool = False,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
    indices: np.ndarray | None = None,
    final: FinalSnapshot | None = None,
    progress: Callable[[Iterable], Iterable] | None = None,
    workers: int | None = None,
) -> Collected:
    """`snapshot_facts` gathered into arrays. `progress`, if given, wraps the snapshot
    iterator (e.g. tqdm). With `check`, the orbit checks run in `workers` forked processes
    while this one reads the snapshots (`checked_in_workers`; None: `frame_workers.default_workers()`), when
    there are at least 4 snapshots a worker (a live view's few new ones are checked here)."""
    workers = default_workers() if workers is None else workers
    facts: Iterable[Snapshot] = (
        checked_in_workers(
            run, panels, workers, factors=factors, tol=tol, dead_tol=dead_tol, indices=indices, final=final
        )
        if check and workers > 1 and can_fork() and (len(run) if indices is None else len(indices)) >= 4 * workers
        else snapshot_facts(
            run, panels, check=check, factors=factors, tol=tol, dead_tol=dead_tol, indices=indices, final=final
        )
    )
    if progress is not None:
        facts = progress(facts)
    epochs: list[int] = []
    coords: list[np.ndarray] = []
    checks: list[SnapshotCheck] = []
    groups: list[list[FrequencyGroup]] = []
    F: list[np.ndarray] = []
    for s in facts:
        epochs.append(s.epoch)
        if s.coords is not None:
            coords.append(s.coords)
        if s.report is not None:
            checks.append(SnapshotCheck.of(s.report))
            groups.append(s.report.groups)
        if s.factors is not None:
            F.append(s.factors)
    return Collected(
        np.asarray(epochs, np.int64),
        np.array(coords) if panels else None,
        OrbitHistory.of(epochs, checks, *group_of(run), tol, dead_tol) if check else None,
        np.array(F) if factors else None,
        groups if check else None,
    )


def checked_in_workers(
    run: Run,
    panels: Sequence[Panel],
    workers: int,
    *,
    factors: bool = False,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
    indices: np.ndarray | None = None,
    final: FinalSnapshot | None = None,
) -> Iterator[Snapshot]:
    """`snapshot_facts` with the orbit check, each snapshot's check run in one of `workers`
    forked processes while this one reads the next snapshots and computes their circuits and
    coordinates: the same reports, in order (the same orbits; errors may differ in the last bits,
    as numpy's vectorised sums depend on memory alignment). Only circuits go to the workers
    (they never touch the run file); at most 4 snapshots a worker are in flight
    (`frame_workers.forked_map`: the workers ignore Ctrl-C and are killed when the pass fails)."""
    check_tolerances(tol, dead_tol)
    group, scale = group_of(run), score_scale_of(run)
    done = final.report if final is not None and final.report is not None else None
    if done is not None and (done.tol, done.dead_tol) != (tol, dead_tol):
        done = None
    facts = snapshot_facts(
        run, panels, factors=factors, tol=tol, dead_tol=dead_tol, indices=indices, final=final, circuits=True
    )
    pending: deque[Snapshot] = deque()

    def jobs() -> Iterator[tuple | None]:
        for s in facts:
            assert s.circuits is not None  # circuits=True
            own = done is not None and final is not None and s.index == final.index
            job = None if own else (s.circuits["qk"], s.circuits["ov"], group, tol, dead_tol, scale)
            s.circuits = None
            pending.append(s)
            yield job

    for report in forked_map(_check, jobs(), workers):
        s = pending.popleft()
        s.report = done if report is None else report
        assert s.report is not None
        s.report.epoch = s.epoch
        yield s


def _check(job: tuple | None) -> OrbitReport | None:
    if job is None:  # the final snapshot: checked before the pass
        return None
    M, R, (n, m), tol, dead_tol, scale = job
    return check_orbits(M, R, n, m, tol, dead_tol, score_scale=scale)


def orbit_history(
    run: Run,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
    progress: Callable[[Iterable], Iterable] | None = None,
    indices: np.ndarray | None = None,
    workers: int = 1,
) -> OrbitHistory:
    """The orbit check (`check.check_orbits`) of every snapshot of an open run (or of the
    snapshot indices given, in increasing order). `progress`, if given, wraps the iterator.
    `workers`: processes for the checks (1, the default: here; the census checks many runs at
    once)."""
    history = collect(
        run, (), check=True, tol=tol, dead_tol=dead_tol, indices=indices, progress=progress, workers=workers
    ).history
    assert history is not None  # check=True
    return history


def panel_coordinates(
    run: Run, panels: Sequence[Panel], indices: np.ndarray | None = None, chunk: int = CHUNK
) -> Iterator[tuple[int, np.ndarray | None]]:
    """(epoch, complex [P, H]) per snapshot: X^(u, v) of each head's centred circuit in each
    panel's plane, as the movie draws it (the coordinates of `snapshot_facts` alone; None
    without panels)."""
    for s in snapshot_facts(run, panels, indices=indices, chunk=chunk):
        yield s.epoch, s.coords

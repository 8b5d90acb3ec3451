"""Sweeps: one experiment over a grid of seeds and configs, trained on local cores or a Ray
cluster, one ordinary run file per run (docs/sweeps.md).

    plan (`plan`: names, what each run needs, jobs in batches where configs allow) -> backend
    (`backend_local`: a process pool; `backend_ray`: Ray tasks) -> each job trains its runs and
    makes their rows (`jobs`) -> the driver appends them to DIR/sweep.jsonl (`sweep_rows`)
    -> the outcome table and figure (`sweep_outcomes`)

Each run file is named from its seed and grid point (`seed3-eq_weight10.h5`). Rerunning the
same command skips runs that are complete and recorded, records complete ones that are not,
resumes incomplete ones from their checkpoints and trains the rest anew (`reuse.reuse_plan`, as
`train --reuse` does); a changed grid adds only its new runs. A row's summary comes from the
rendering side reading the finished run file: `render/<family>/summary.py::sweep_summary`,
named in `registry`.

Workers write run files straight into DIR, so DIR must be one folder that every worker sees (a
local disk, or a shared filesystem on a cluster); rows travel back to the driver, which alone
writes sweep.jsonl.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from headmovies.errors import UserError
from headmovies.sweeps.backend_local import default_workers, run_local
from headmovies.sweeps.backend_ray import cluster_cpus, connect_ray, disconnect_ray, run_ray
from headmovies.sweeps.folder import SETTINGS_FILE
from headmovies.sweeps.plan import Plan, make_jobs, make_plan
from headmovies.sweeps.progress import EpochProgress
from headmovies.sweeps.sweep_rows import ROWS_FILE, append_sweep_rows, read_sweep_rows

LOCK_FILE = ".sweep.lock"  # one sweep at a time per folder


@dataclass
class SweepResult:
    out: Path
    done: int = 0
    failed: int = 0
    skipped: int = 0
    forked: int = 0  # runs forked from another sweep's runs (and done) in this pass
    seconds: float = 0.0
    outcome_files: list[Path] = field(default_factory=list)


def sweep(
    experiment: str,
    out: str | os.PathLike,
    *,
    seeds: list[int] | None = None,
    grid: Sequence[tuple[str, list[str]]] = (),
    sets: dict[str, str] | None = None,
    toml: dict | None = None,
    backend: str = "local",
    workers: int | None = None,
    address: str | None = None,
    batch: int | None = None,
    progress: bool = True,
    stop_at: int | None = None,
    fork_from: str | os.PathLike | None = None,
) -> SweepResult:
    """Train every run of the sweep that is not complete, append a row per run to
    DIR/sweep.jsonl, then write DIR/summary.md and DIR/census.{png,svg}.

    Everything is checked before anything is created: UserError for bad input (see
    `make_plan`), workers or batch < 1, --address without Ray, Ray missing or unreachable."""
    from headmovies.render.core.outputs import prepare_out_dir

    if backend not in ("local", "ray"):
        raise UserError(f"--backend must be local or ray, got {backend!r}")
    for flag, value in (("--workers", workers), ("--batch", batch)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be >= 1, got {value}")
    if address is not None and backend != "ray":
        raise UserError("--address is for --backend ray")
    if fork_from is not None and not Path(fork_from).is_dir():
        raise UserError(f"--fork-from {fork_from} is not a folder; give the folder of the sweep to fork from")
    plan = make_plan(experiment, out, seeds, list(grid), dict(sets or {}), toml, stop_at, fork_from)
    if backend == "ray":
        connect_ray(address, workers)
    try:
        out = prepare_out_dir(plan.out)
        with open(out / LOCK_FILE, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise UserError(f"another sweep is running in {out}; wait for it or choose a new --out") from None
            return _run(plan, backend, workers, batch, progress)
    finally:
        if backend == "ray":
            disconnect_ray()


def _run(plan: Plan, backend: str, workers: int | None, batch: int | None, progress: bool) -> SweepResult:
    """The sweep in its (created, locked) folder: jobs, backend, rows, then the outcome table and figure."""
    from tqdm import tqdm

    from headmovies.render.core.outputs import write_text
    from headmovies.sweeps import sweep_outcomes
    from headmovies.sweeps.registry import summary_of

    out, experiment = plan.out, plan.experiment
    if plan.new_settings:
        write_text(
            out / SETTINGS_FILE,
            json.dumps({"experiment": experiment, "settings": plan.settings}, indent=1, sort_keys=True) + "\n",
        )
    result = SweepResult(out, skipped=len(plan.runs) - len(plan.todo))
    n_workers = workers or default_workers()
    if backend == "ray" and workers is None:
        n_workers = cluster_cpus()
    jobs = make_jobs(plan, n_workers, batch)
    t0 = time.perf_counter()
    epochs = EpochProgress(plan.todo)  # the bar counts epochs, read from the run files
    bar = tqdm(
        total=epochs.total,
        desc=f"sweep {experiment}",
        unit="epoch",
        unit_scale=True,
        disable=not progress,
        dynamic_ncols=True,
        smoothing=0,
    )
    epochs.bar = bar if progress else None

    def on_rows(rows: list[dict]) -> None:
        append_sweep_rows(out / ROWS_FILE, rows)
        for row in rows:
            ok = row["status"] in ("done", "stopped")
            if ok:
                result.done += 1
                result.forked += row["action"] == "new" and row.get("forked_from") is not None
            else:
                result.failed += 1
                bar.write(f"failed: {row['run']}: {row['error']}")
            epochs.finished(row["run"], ok)

    if progress:
        epochs.start()
    try:
        if jobs:
            (
                run_ray(jobs, workers, on_rows)
                if backend == "ray"
                else run_local(jobs, min(n_workers, len(jobs)), on_rows)
            )
    finally:  # also after Ctrl-C: the table and census of the runs finished so far
        epochs.stop()
        bar.close()
        result.seconds = time.perf_counter() - t0
        family = summary_of(experiment)
        result.outcome_files = sweep_outcomes.write_outcomes(
            out,
            read_sweep_rows(out / ROWS_FILE),
            experiment,
            family.outcome_text,
            plan.settings,
            family.detail,
            family.detail_text,
        )
    return result

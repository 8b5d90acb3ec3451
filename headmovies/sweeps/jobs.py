"""What one sweep job does, in a worker process (docs/sweeps.md): train its runs (one torch
thread; several new runs as one batch where the job says so) and turn each into its sweep row.

A row holds the run's name, seed, grid point, status ('done', 'stopped' at --stop-at, or
'failed' with its error on one line), action, final metrics and its family's summary of the
finished run file (`registry`: render/<family>/summary.py::sweep_summary), the seconds it took,
its batch size, host and config. A job never raises for a failing run: its row carries the error.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from headmovies import runfile
from headmovies.errors import UserError
from headmovies.interrupts import interrupts_in_pool_jobs
from headmovies.sweeps.plan import Job, PlannedRun
from headmovies.train import loop
from headmovies.train.config import config_dict


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An error on one line: a UserError's message, else 'Type: message' (whitespace collapsed)."""
    text = " ".join(str(exc).split())
    if not isinstance(exc, UserError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summarise(experiment: str, path: Path) -> tuple[dict, dict]:
    """(final metrics, the family's `sweep_summary`) of a finished run file, read by the
    rendering side (`registry`)."""
    from headmovies.runfile.reader import Run
    from headmovies.sweeps.registry import summary_of  # loads rendering: here, not at import

    with Run(path) as run:
        metrics = {k: float(v[-1]) for k, v in run.metrics().items() if k != "epoch" and len(v)}
        return metrics, summary_of(experiment).sweep_summary(run)


def forked_from(path: Path) -> str | None:
    """'SOURCE@EPOCH' (SOURCE relative to the run's folder) for a run started with --fork-from."""
    with runfile.open_for_reading(path) as f:
        value = f.attrs.get("forked_from")
    if value is None:
        return None
    fork = json.loads(value)
    return f"{fork['run']}@{fork['epoch']}"


def make_row(experiment: str, r: PlannedRun, seconds: float, batch: int, error: BaseException | None = None) -> dict:
    """The sweep.jsonl row of one run; reads the run file when it finished."""
    row = {
        "run": r.name,
        "file": r.path.name,
        "experiment": experiment,
        "seed": r.seed,
        "grid": r.grid,
        "status": "done",
        "error": None,
        "action": r.action,
        "metrics": None,
        "summary": None,
        "forked_from": None,
    }
    if error is None:
        try:
            row["forked_from"] = forked_from(r.path)
            row["metrics"], row["summary"] = summarise(experiment, r.path)
        except Exception as exc:  # the run trained but its summary failed: record that, go on
            error = exc
        if r.stop_at is not None:
            row["status"] = "stopped"  # at --stop-at: the summary is of that snapshot; a rerun without it continues
    if error is not None:
        row["status"], row["error"] = "failed", one_line(error)
    row.update(seconds=round(seconds, 2), batch=batch, host=socket.gethostname(), config=config_dict(r.cfg))
    return row


def run_job(job: Job) -> list[dict]:
    """Train the job's runs (one torch thread) and return their rows. Never raises for a
    failing run: its row carries the error."""
    with interrupts_in_pool_jobs():  # a pool worker ignores Ctrl-C between jobs
        return _run_job(job)


def _run_job(job: Job) -> list[dict]:
    import torch
    from tqdm import tqdm

    torch.set_num_threads(1)
    # tqdm's default lock is a multiprocessing lock; one in a spawned worker that Ctrl-C stops
    # is reported as leaked at exit. Workers show no bars, so a thread lock does.
    tqdm.set_lock(threading.RLock())
    if job.batched:
        from headmovies.train.batch_loop import train_batch

        t0 = time.perf_counter()
        results: Sequence[object]  # TrainResult, or the exception that stopped the run
        try:
            results = train_batch(job.experiment, [r.cfg for r in job.runs], [r.path for r in job.runs])
        except Exception as exc:
            results = [exc] * len(job.runs)
        seconds = time.perf_counter() - t0
        return [
            make_row(job.experiment, r, seconds, len(job.runs), res if isinstance(res, BaseException) else None)
            for r, res in zip(job.runs, results)
        ]
    rows = []
    for r in job.runs:
        t0, error = time.perf_counter(), None
        try:
            if r.action in ("new", "resume"):
                loop.train(
                    job.experiment,
                    r.cfg,
                    r.path,
                    resume=r.action == "resume",
                    force=r.action == "new",
                    progress=False,
                    stop_at=r.stop_at,
                    fork_from=r.fork_from if r.action == "new" else None,
                )
        except Exception as exc:
            error = exc
        rows.append(make_row(job.experiment, r, time.perf_counter() - t0, 1, error))
    return rows


def failed_rows(job: Job, exc: BaseException) -> list[dict]:
    """Rows for a job whose worker died or could not run it."""
    return [make_row(job.experiment, r, 0.0, len(job.runs), exc) for r in job.runs]

"""The local backend of a sweep (docs/sweeps.md, "Backends"): its jobs in a pool of spawned
worker processes on this machine's cores, one torch thread each, or in this process with one
worker. Ctrl-C or SIGTERM stops the workers as Ctrl-C stops `train`: their runs close at a
snapshot, resumable.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed

from headmovies.errors import UserError
from headmovies.interrupts import ignore_between_jobs
from headmovies.sweeps.jobs import failed_rows, one_line, run_job
from headmovies.sweeps.plan import Job


def default_workers() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_local(jobs: list[Job], workers: int, on_rows: Callable[[list[dict]], None]) -> None:
    """Run the jobs in a pool of `workers` spawned processes, one torch thread each (with one
    worker, in this process). A script calling this needs the `if __name__ == "__main__":`
    guard that spawned processes need."""
    if workers == 1:
        for job in jobs:
            on_rows(run_job(job))
        return
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the spawned workers
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=ignore_between_jobs
    )
    try:
        futures = {pool.submit(run_job, job): job for job in jobs}
        for future in as_completed(futures):
            try:
                rows = future.result()
            except Exception as exc:  # BrokenProcessPool: a worker was killed (e.g. out of memory)
                rows = failed_rows(futures[future], UserError(f"its worker process died ({one_line(exc)})"))
            on_rows(rows)
    except BaseException:  # Ctrl-C, SIGTERM: stop the workers as Ctrl-C stops `train`
        pool.shutdown(wait=False, cancel_futures=True)
        children = multiprocessing.active_children()  # the pool's workers
        # A terminal's Ctrl-C reached them too: give them time to stop their runs at a snapshot,
        # since a second SIGINT from here would stop them at once, without that checkpoint.
        deadline = time.monotonic() + 3
        for child in children:
            child.join(timeout=max(0.0, deadline - time.monotonic()))
        for child in children:
            if child.is_alive() and child.pid is not None:
                with contextlib.suppress(ProcessLookupError):  # it ended just now
                    os.kill(child.pid, signal.SIGINT)  # their run files close, resumable
        for child in children:
            child.join(timeout=10)
            if child.is_alive():
                child.terminate()
        pool.shutdown(wait=True)
        raise
    pool.shutdown()

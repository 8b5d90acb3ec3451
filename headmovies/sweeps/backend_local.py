"""The local backend of a sweep (docs/sweeps.md, "Backends"): its jobs in a pool of spawned
worker processes on this machine's cores, one torch thread each, or in this process with one
worker. Ctrl-C or SIGTERM stops the workers as Ctrl-C stops `train`: their runs close at a
snapshot, resumable. A sweep killed outright (SIGKILL) takes its workers along: each watches
its parent and ends soon after it (`_watch_parent`), and the pool's resource tracker with them.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
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


GRACE_S = 5.0  # how long a worker whose sweep was killed may take to close its run at a snapshot


def _init_worker(parent: int) -> None:
    """Pool initializer: Ctrl-C as `ignore_between_jobs`, and the worker ends when the sweep
    process `parent` dies, even by SIGKILL (which no handler sees), instead of training on as an
    orphan (it may have died already: a worker reads its queued jobs after its start)."""
    ignore_between_jobs()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-parent").start()


def _watch_parent(parent: int, poll_s: float = 0.2) -> None:
    """Once the parent is gone (this process is re-parented), stop as Ctrl-C stops a job (its run
    closes at the next snapshot, resumable), silently (the terminal belongs to the next command
    now), and exit after GRACE_S seconds at most (a run still open is then left as a killed one:
    whole snapshots, resumable)."""
    while os.getppid() == parent:
        time.sleep(poll_s)
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stderr.fileno())
        os.dup2(devnull, sys.stdout.fileno())
    os.kill(os.getpid(), signal.SIGINT)  # a job takes it as Ctrl-C; an idle worker ignores it
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and _in_job():
        time.sleep(poll_s)
    os._exit(1)


def _in_job() -> bool:
    """True while a job runs (it takes SIGINT back for its duration: `interrupts_in_pool_jobs`)."""
    return signal.getsignal(signal.SIGINT) is not signal.SIG_IGN


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
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(os.getpid(),),
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

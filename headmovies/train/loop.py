"""The shared training loop: any registered experiment → snapshots streamed into a run file.

One epoch at a time: the task steps, and at each epoch of the snapshot schedule its weights and
metrics are appended to the run file; a checkpoint (train/checkpoints.py) is written every
`checkpoint_seconds`, at a Ctrl-C and at the end. Beside it: a new run file (new_run.py),
`--resume` (resume.py), `--fork-from` (fork.py), `--reuse` (reuse.py). One trainer per run
file (`runfile/lock.py`); a full disk stops training with one line, keeping every whole
snapshot (docs/run-file.md, "Faults").
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from headmovies.errors import UserError
from headmovies.interrupts import deferred_signals
from headmovies.runfile.lock import RunLock
from headmovies.train import experiments, new_run
from headmovies.train.config import TrainConfig
from headmovies.train.fork import fork, fork_check
from headmovies.train.resume import reopen, resume_state
from headmovies.train.reuse import set_aside
from headmovies.train.schedule import config_schedule, neighbours


@dataclass
class TrainResult:
    path: Path
    epochs: int
    metrics: dict[str, float]
    summary: str
    seconds: float
    overlapped_steps: int = 0  # steps of this call whose terms overlapped (`train --overlap`)
    start: int = 0  # the epoch this call started from (> 0 after --resume or a fork)


def train(
    experiment: str,
    cfg: TrainConfig,
    out: str | os.PathLike,
    *,
    resume: bool = False,
    force: bool = False,
    progress: bool = True,
    checkpoint_seconds: float = 30.0,
    stop_at: int | None = None,
    fork_from: str | os.PathLike | None = None,
    keep_other: bool = False,
    overlap: bool = False,
) -> TrainResult:
    """Train `experiment` with `cfg`, streaming snapshots into `out`.

    `overlap`: let the task compute independent loss terms at once in a second thread
    (`Task.overlap`; the same run bit for bit, faster when a second core is free).

    `keep_other` (with `force`; what `--reuse` uses): a run file of another config at `out` is
    moved aside to `<stem>.previous.h5` (`reuse.set_aside`, under the lock) instead of replaced.

    `fork_from`: a run file of the same experiment whose config differs from `cfg` only in keys
    that act after the task's fork epoch (`Task.fork_epoch`, `FORK_KEYS`; for the orbit
    experiment: the second phase's). The new run copies its records through that epoch, takes
    its weights there and trains on: bit for bit the run `cfg` trains from scratch, for the cost
    of the epochs after the fork (docs/sweeps.md, "Forks"). UserError or ConfigError (before
    `out` is touched) when the source cannot be forked.

    `stop_at`: train the config's schedule (its lr and loss-weight curves, which depend on
    `epochs`) only through this snapshot epoch, checkpoint there and leave the run incomplete;
    `resume` continues it later, bit for bit as if it had not stopped (a cheap early screen of
    full runs, docs/sweeps.md). UserError unless it is an epoch of the snapshot schedule.

    Holds `out`'s lock (`<out>.lock`, runfile/lock.py) throughout: a second writer stops at once with
    RunLockedError. Raises UserError (before touching any file) if `out` exists without
    `resume`/`force`, or if `resume` is asked for a run whose checkpoint is missing, damaged
    or from another run, or with a different config; DiskFullError when the disk fills (the
    file keeps every complete snapshot; a new run leaves nothing). docs/run-file.md, "Faults".
    """
    out = Path(out)
    task_cls = experiments.get(experiment)
    if resume and force:
        raise UserError("--resume and --force exclude each other")
    if not math.isfinite(checkpoint_seconds) or checkpoint_seconds < 0:
        raise UserError(f"--checkpoint-every must be a number of seconds >= 0, got {checkpoint_seconds}")
    new_run.check_out_path(out)
    check_stop_at(cfg, stop_at)
    if fork_from is not None:
        if resume:
            raise UserError("--fork-from starts a new run; --resume continues an existing one: give one of them")
        if Path(fork_from).resolve() == out.resolve():
            raise UserError("--fork-from is the --out file; a fork writes a run file of its own")
        epoch = fork_check(experiment, cfg, fork_from)
        if stop_at is not None and stop_at <= epoch:
            raise UserError(f"--stop-at {stop_at:,} is not after the fork at epoch {epoch:,}")
    lock = RunLock(out, hint="wait for it to finish, or stop it and continue with --resume").acquire()
    try:
        if force and keep_other:
            line = set_aside(out, cfg)
            if line:
                print(line, flush=True)
        if fork_from is not None:
            if out.exists() and not force:
                raise UserError(
                    f"{out} exists; pass --force to replace it with the fork, or --reuse to continue "
                    "it if it is this fork under way"
                )
            fork(experiment, task_cls, cfg, Path(fork_from), out, epoch)
            resume = True
        return _train(experiment, task_cls, cfg, out, resume, force, progress, checkpoint_seconds, stop_at, overlap)
    finally:
        lock.release()


def check_stop_at(cfg: TrainConfig, stop_at: int | None) -> None:
    """UserError unless `stop_at` is None or an epoch of the config's snapshot schedule."""
    if stop_at is None:
        return
    if not 0 < stop_at <= cfg.epochs:
        raise UserError(f"--stop-at must be a snapshot epoch in 1..{cfg.epochs:,} (the run's epochs), got {stop_at}")
    schedule = config_schedule(cfg)
    if stop_at not in schedule:
        before, after = neighbours(schedule, stop_at)
        raise UserError(
            f"--stop-at {stop_at:,} is not a snapshot epoch of this run; the snapshots around it are "
            f"at epochs {before:,} and {after:,}"
        )


def _train(
    experiment: str,
    task_cls: type,
    cfg: TrainConfig,
    out: Path,
    resume: bool,
    force: bool,
    progress: bool,
    checkpoint_seconds: float,
    stop_at: int | None = None,
    overlap: bool = False,
) -> TrainResult:
    last = cfg.epochs if stop_at is None else stop_at
    if resume:
        state, row, later = resume_state(out, experiment, cfg)
        if int(state["epoch"]) > last:
            raise UserError(f"{out} is already at epoch {int(state['epoch']):,}, past --stop-at {last:,}")
    elif out.exists() and not force:
        raise UserError(new_run.exists_message(out, experiment))

    torch.manual_seed(cfg.seed)
    task = task_cls(cfg)
    task.overlap, task.threads = overlap, torch.get_num_threads()
    t0 = time.perf_counter()
    if resume:
        start, rec = reopen(out, cfg, task, state, row, later, new_run.resume_hint(experiment, out), checkpoint_seconds)
    else:
        start = 0
        rec = new_run.create(
            experiment, cfg, task, out, checkpoint_seconds=checkpoint_seconds, diverged_fix=_RETRAIN_LOWER
        )

    metrics = {}
    try:
        bar = tqdm(
            range(start + 1, last + 1),
            desc=experiment,
            unit="epoch",
            disable=not progress,
            initial=start,
            total=last,
            dynamic_ncols=True,
            mininterval=0.5,
        )
        stopping = False
        # Ctrl-C / SIGTERM: train on to the next snapshot, checkpoint it and stop there, so that
        # --resume loses nothing; a second one stops at once (never inside h5py: interrupts.py)
        with deferred_signals() as signals:
            for epoch in bar:
                if signals.pending.is_set() and not stopping:
                    stopping = True
                    _say_stopping(rec.next_due(epoch, last), bar)
                task.step(epoch)
                if rec.due(epoch):
                    metrics = task.evaluate()
                    rec.write(epoch, task.snapshot(), metrics, task.probe_record())  # UserError: a loss diverged
                    bar.set_postfix(task.progress(metrics), refresh=False)
                    rec.checkpoint_if_due(epoch, last, stopping)
                    if stopping and epoch < last:  # at the last epoch: mark the run complete first
                        signals.deliver()
            bar.close()
            if not metrics:  # last == start: nothing trained now
                metrics = task.evaluate()
            if last == cfg.epochs:
                rec.complete()
            signals.deliver()  # a signal in the last epoch: the run is whole, then stop
    finally:
        rec.close()
    seconds = time.perf_counter() - t0
    return TrainResult(out, last, metrics, task.summary(metrics), seconds, task.overlapped_steps, start)


_RETRAIN_LOWER = "lower lr or the loss weights and retrain with --force"


def _say_stopping(epoch: int, bar) -> None:
    """One line on stderr, above the progress bar, when Ctrl-C or SIGTERM arrives."""
    bar.clear()
    print(
        f"stopping after the snapshot at epoch {epoch:,}, with a checkpoint there (Ctrl-C again stops "
        "at once, losing the epochs since the last checkpoint)",
        file=sys.stderr,
        flush=True,
    )

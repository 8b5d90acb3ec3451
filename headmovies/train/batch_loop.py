"""The training loop for several new runs trained as one batched computation in one process
(an experiment's batched trainer, `experiments.batching(name)`, e.g. `orbits.batch.OrbitBatch`; docs/sweeps.md).

Each run still gets its own ordinary run file and checkpoint, written as `loop.train` writes
them (same attributes, snapshot schedule, metrics and checkpoint format), so any run of a batch
can be read by every render command and resumed on its own with `headmovies train --resume`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from headmovies.errors import UserError
from headmovies.interrupts import deferred_signals
from headmovies.runfile.lock import RunLock
from headmovies.train import experiments, loop, new_run
from headmovies.train.config import TrainConfig
from headmovies.train.recording import Recording
from headmovies.train.schedule import config_schedule


def train_batch(
    experiment: str,
    cfgs: list[TrainConfig],
    outs: list[str | os.PathLike],
    *,
    device: str = "cpu",
    checkpoint_seconds: float = 30.0,
) -> list[loop.TrainResult | UserError]:
    """Train one new run per config into the run file of the same index (replacing any file
    and checkpoint there, as `loop.train(force=True)` does, under each file's lock), all as one
    batched computation.

    Returns, per run, its TrainResult (seconds: the batch's wall time) or the UserError that
    stopped it (a diverged run stops alone; the others go on). Raises ValueError if the
    experiment has no batched trainer or the configs cannot share a batch (its `key`)."""
    batching = experiments.batching(experiment)
    if batching is None:
        raise ValueError(f"{experiment} has no batched trainer")
    paths = [Path(o) for o in outs]
    t0 = time.perf_counter()
    batch = batching(cfgs, device)
    cfg = batch.cfg  # the snapshot schedule and epochs are shared
    recs: list[Recording | None] = []
    errors: list[UserError | None] = [None] * len(cfgs)
    metrics: list[dict] = [{} for _ in cfgs]
    locks = []
    try:
        for i, out in enumerate(paths):  # as loop.train: one writer per run file
            new_run.check_out_path(out)
            locks.append(RunLock(out, hint="wait for it to finish").acquire())
            view = batch.views[i]
            recs.append(new_run.create(experiment, view.cfg, view, out, batch.torch_rng(i), checkpoint_seconds))
        stopping = False
        with deferred_signals() as signals:  # Ctrl-C: stop at the next snapshot (loop.train)
            last_ckpt = time.monotonic()
            todo = {int(e) for e in config_schedule(cfg) if e > 0}
            for epoch in range(1, cfg.epochs + 1):
                if signals.pending.is_set() and not stopping:
                    stopping = True
                batch.step(epoch)
                if epoch not in todo:
                    continue
                # one decision for the batch, timed from its last checkpoint
                save = stopping or epoch == cfg.epochs or time.monotonic() - last_ckpt > checkpoint_seconds
                for i, rec in enumerate(recs):
                    if rec is None:
                        continue
                    view = batch.sync(i, optimizer=save)
                    metrics[i] = view.evaluate()
                    try:
                        rec.write(epoch, view.snapshot(), metrics[i])
                    except UserError as exc:  # diverged: this run stops alone
                        errors[i] = exc
                        rec.close()
                        recs[i] = None
                        continue
                    if save:
                        rec.checkpoint(epoch)
                if save:
                    last_ckpt = time.monotonic()
                if stopping and epoch < cfg.epochs:  # at the last epoch: mark the runs complete first
                    signals.deliver()
            for i, rec in enumerate(recs):
                if rec is not None:
                    if not metrics[i]:  # epochs == 0
                        metrics[i] = batch.sync(i, optimizer=False).evaluate()
                    rec.complete()
            signals.deliver()
    finally:
        for rec in recs:
            if rec is not None:
                rec.close()
        for lock in locks:
            lock.release()
    seconds = time.perf_counter() - t0
    return [
        errors[i] or loop.TrainResult(paths[i], cfg.epochs, metrics[i], batch.views[i].summary(metrics[i]), seconds)
        for i in range(len(cfgs))
    ]

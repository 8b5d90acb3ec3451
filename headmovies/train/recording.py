"""One run file being recorded: the part of training that both the built-in loops
(`loop.train`, `batch_loop.train_batch`) and the public API (`headmovies.record.Recorder`)
share.

A `Recording` owns the run file's writer (`runfile.writer.RunWriter`: SWMR, crash-safe, every
complete snapshot kept on a kill or a full disk), the snapshot schedule (which epochs are
written), the metrics (the same names at every snapshot; a new name is added to the file with
NaN at the earlier snapshots), the divergence check (a non-finite loss stops with one line,
the file keeping the snapshots so far), when a checkpoint is due, and resuming (the file
reopened at an epoch, later records dropped). The checkpoint's contents are the caller's
(`train/checkpoints.py` for the built-in tasks; none for a user's model: the user restores
their own training state and the Recorder drops the snapshots it will write again).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from headmovies.errors import UserError
from headmovies.runfile.writer import RunWriter

# save(epoch, then): write the caller's checkpoint at `epoch`; `then` ends a DiskFullError's line
Checkpoint = Callable[[int, str], None]


class Recording:
    """Snapshots of one run streamed into its run file on a schedule.

    `schedule`: the epochs to write (int array; the first snapshot, at `start`, is written by
    `create`); `checkpoint`: the caller's checkpoint writer, called by `checkpoint_if_due`;
    `checkpoint_seconds`: at most this long between checkpoints; `hint`: what to do after a
    full disk (ends DiskFullError's line); `diverged_fix`: what to do after a non-finite loss.
    """

    def __init__(
        self,
        writer: RunWriter,
        schedule: Iterable[int],
        start: int = 0,
        *,
        checkpoint: Checkpoint | None = None,
        checkpoint_seconds: float = math.inf,
        hint: str = "",
        diverged_fix: str = "lower lr or the loss weights",
    ):
        self.writer, self.path = writer, Path(writer.path)
        self.writer.hint = hint
        self.schedule = np.asarray(sorted({int(e) for e in schedule}), np.int64)
        self.todo = {int(e) for e in self.schedule if e > start}
        self.start = start
        self.save, self.checkpoint_seconds = checkpoint, checkpoint_seconds
        self.diverged_fix = diverged_fix
        self.last_checkpoint = time.monotonic()
        self.metrics: dict[str, float] = {}
        self.metric_names: list[str] = []

    @classmethod
    def create(
        cls,
        path: str | Path,
        attrs: dict,
        weights: dict[str, np.ndarray],
        metrics: dict[str, float],
        split: dict[str, np.ndarray],
        schedule: Iterable[int],
        *,
        epoch: int = 0,
        checkpoint: Checkpoint | None = None,
        probe: dict[str, np.ndarray] | None = None,
        probe_tokens: np.ndarray | None = None,
        weight_dtype: type = np.float32,
        probe_labels: list[str] | None = None,
        **kwargs,
    ) -> Recording:
        """A new run file at `path` holding its first snapshot (`weights`, `metrics` at `epoch`),
        with the caller's checkpoint there: built under `<path>.partial`, checkpointed, then
        renamed over any old file, so that a failure on the way leaves the old file (or nothing)
        and `path` never exists without its checkpoint. DiskFullError, leaving nothing, when the
        disk cannot hold it; UserError when a loss in `metrics` is not finite (`check_finite`:
        the file, closed, keeps that first snapshot and is not marked complete).
        `probe`, `probe_tokens`: the first snapshot's probe record and the
        probe batch (`train.probe.Probe`), stored under /probe, or None; `probe_labels`: the first
        probe sequence's tokens as strings (`Recorder(decode=...)`). `weight_dtype`: how the
        weights are stored (float32; float16 halves them)."""
        path = Path(path)
        writer = RunWriter.create(
            path, attrs, epoch, weights, metrics, split, probe, probe_tokens, weight_dtype, probe_labels
        )
        try:
            if checkpoint is not None:
                checkpoint(epoch, f"nothing was written to {path}")
            writer.publish()
        except BaseException:
            writer.discard()
            raise
        rec = cls(writer, schedule, epoch, checkpoint=checkpoint, **kwargs)
        rec.metrics, rec.metric_names = dict(metrics), list(metrics)
        try:
            rec.check_finite(epoch, metrics)
        except UserError:
            rec.close()
            raise
        return rec

    @classmethod
    def reopen(
        cls, path: str | Path, keep_through_epoch: int, schedule: Iterable[int], attrs: dict | None = None, **kwargs
    ) -> Recording:
        """Continue the run file at `path` (live writers excluded by the caller's lock; a killed
        one is fine): every record through `keep_through_epoch` kept, later ones dropped (they
        are written again), root attributes updated with `attrs`. DiskFullError, leaving `path`
        as it was, when the disk cannot hold the copy."""
        writer = RunWriter.reopen(path, keep_through_epoch, attrs)
        rec = cls(writer, schedule, keep_through_epoch, **kwargs)
        rec.metric_names = writer.metric_names()
        return rec

    def due(self, epoch: int) -> bool:
        """True when `epoch` is a snapshot epoch not yet written."""
        return epoch in self.todo

    def next_due(self, epoch: int, default: int) -> int:
        """The first snapshot epoch at or after `epoch` still to write (`default` if none)."""
        return min((e for e in self.todo if e >= epoch), default=default)

    def write(
        self,
        epoch: int,
        weights: dict[str, np.ndarray],
        metrics: dict[str, float],
        probe: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Append the snapshot at `epoch` (weights by name, float32; metrics, float64), then check
        it: UserError when a loss is not finite (the file keeps every snapshot through this one).
        A metric not given is stored as NaN; a new name is added, NaN at the earlier snapshots."""
        new = [k for k in metrics if k not in self.metric_names]
        if new:
            self.writer = self.writer.with_metrics(new)
            self.metric_names += new
        row = {k: float(metrics.get(k, math.nan)) for k in self.metric_names}
        if probe is not None and not self.writer.has_probe():
            probe = None  # a run file written before the probe (resumed): weights and metrics only
        self.writer.append(epoch, weights, row, probe)
        self.todo.discard(int(epoch))
        self.metrics = dict(metrics)
        self.check_finite(epoch, metrics)

    def check_finite(self, epoch: int, metrics: dict[str, float]) -> None:
        """UserError when a loss (a metric with "loss" in its name) among `metrics`, just written
        at `epoch`, is not finite: training diverged (the file keeps every snapshot through it)."""
        diverged = sorted(k for k, v in metrics.items() if "loss" in k and not np.isfinite(v))
        if diverged:
            raise UserError(
                f"training diverged by epoch {epoch} ({', '.join(diverged)} not finite); "
                f"{self.path} keeps the snapshots so far; {self.diverged_fix}"
            )

    def checkpoint_due(self, epoch: int, final: int, stopping: bool = False) -> bool:
        """A checkpoint is due after the snapshot at `epoch`: when stopping, at `final` (the last
        epoch trained now) or `checkpoint_seconds` after the last one."""
        return stopping or epoch == final or time.monotonic() - self.last_checkpoint > self.checkpoint_seconds

    def checkpoint(self, epoch: int) -> None:
        """Write the caller's checkpoint at `epoch` (its DiskFullError says what the file holds)."""
        if self.save is not None:
            self.save(epoch, f"{self.path} holds every snapshot through epoch {epoch}; {self.writer.hint}")
        self.last_checkpoint = time.monotonic()

    def checkpoint_if_due(self, epoch: int, final: int, stopping: bool = False) -> bool:
        """`checkpoint(epoch)` when `checkpoint_due`; True if it wrote one."""
        if self.checkpoint_due(epoch, final, stopping):
            self.checkpoint(epoch)
            return True
        return False

    def last_epoch(self) -> int:
        """The epoch of the last snapshot written (-1: none)."""
        return self.writer.last_epoch()

    def complete(self) -> None:
        """Mark the run finished (/complete = 1): readers then know no more snapshots come."""
        self.writer.mark_complete()

    def close(self) -> None:
        """Flush and close the file (idempotent); it keeps every complete snapshot."""
        self.writer.close()

"""`Recorder`: a user's own training loop streams its model's heads into a run file
(docs/recording.md).

    rec = headmovies.Recorder("run.h5", model, config={"lr": 1e-3}, group_order=53)
    for epoch in range(epochs):
        ...  # the user's step
        rec.step(epoch, train_loss=loss.item())   # writes on the snapshot schedule
    rec.close()

The run file is the built-in trainers' (train/recording.py: SWMR, crash-safe, one writer per
file, a full disk stops with one line keeping every whole snapshot) and so are the errors.
With `optimizer=` the Recorder also keeps a checkpoint (`<run>.ckpt`: model, optimizer and
torch RNG state) so that `resume=True` restores them and continues the file from there.
"""

from __future__ import annotations

import io
import json
import numbers
import os
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from headmovies import runfile
from headmovies.errors import ConfigError, RunFileError, UserError, warn
from headmovies.interrupts import deferred_signals
from headmovies.record.adapters import TOKENS, Adapter, find_adapter, keep_tokens
from headmovies.record.inputs import (
    as_epoch,
    check_group_order,
    check_same_model,
    metric_name,
    metric_value,
    shape_difference,
)
from headmovies.record.probing import DEFAULT, decoded, first_run, make_probe, match_stored
from headmovies.record.schedules import as_schedule, spaced_schedule
from headmovies.runfile import probe_records
from headmovies.runfile.checkpoint import checkpoint_path, read_checkpoint, write_checkpoint
from headmovies.runfile.lock import RunLock
from headmovies.train.new_run import check_out_path, git_commit, machine, versions
from headmovies.train.recording import Recording

EXPERIMENT = "recorded"  # the root attribute `experiment` of a recorded run
WEIGHT_DTYPES = {"float32": np.float32, "float16": np.float16}  # Recorder(dtype=...): float16 halves the file


class Recorder:
    """Records `model`'s head weights (`adapters.find_adapter`: a TransformerLens
    HookedTransformer, torch.nn.MultiheadAttention, nanoGPT or GPT-2 attention, or a weights
    function) into the run file `path`.

    `config`: JSON-able settings stored as the root attribute `config` (its `seed`, if any, as
    `seed`); `group_order`: p when the tokens 0..p-1 carry the cyclic group Z_p (modular
    arithmetic), so that renderers draw heads in its irrep planes; `schedule`: which epochs
    `step` writes (None: every 25 epochs through 4000, then every 100; a list of epochs; or a
    function epoch -> bool); `resume`: continue an existing file (True: from its checkpoint, or
    its last snapshot without one; an int: through that epoch), dropping the records after;
    `force`: replace an existing file; `optimizer`: also checkpointed, every
    `checkpoint_seconds` and at `close`; `tokens`: how many token values of W_E (its first rows)
    and output classes of W_U (its first columns) are stored (default 1,024; the renderers draw
    the first 128), so that a large vocabulary does not fill the disk (`keep_tokens`);
    `probe`: the probe batch run at each snapshot for per-head attention patterns and scores
    (default: the standard induction probe when W_E is found; None: off; ints [batch,
    positions]: your own; record/probing.py), `forward`: `fn(tokens)` in place of `model(tokens)`;
    `total`: the steps the loop will run, for a schedule of about 200 snapshots spread over them
    (in place of `schedule`); `dtype`: "float32" (default) or "float16", how the weights are
    stored (half the size; about 3 significant digits, docs/recording.md; a resumed file keeps its own);
    `decode`: the tokenizer's decode, list of token ids -> text (nanoGPT's `decode`), called on each
    token of the first probe sequence alone to store its labels for the viewer.

    Errors (all UserError, one line): the file exists without resume/force, or another writer
    holds it (RunLockedError); resume of a missing file, another kind of run, another config or
    another model (ConfigError); `group_order` larger than the token values or output classes
    stored (ConfigError); a model without recognisable attention, or one whose weights change
    shape or whose attention module is replaced after the first snapshot (ModelError, at the
    next snapshot: the file keeps its snapshots, not marked complete, and resumes); a metric
    that is not one number or is beyond float64, a metric name the file cannot hold (`/`,
    `epoch`, ...), an epoch outside 0..2**63-1, or a non-finite metric with "loss" in its name,
    at the first snapshot too (training diverged); calls after `close` or after one of these
    errors; a run file or checkpoint path that is a named pipe or device; a full disk
    (DiskFullError).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        model: Any,
        *,
        config: dict | None = None,
        group_order: int | None = None,
        schedule: Iterable[int] | Callable[[int], bool] | None = None,
        resume: bool | int = False,
        force: bool = False,
        optimizer: torch.optim.Optimizer | None = None,
        checkpoint_seconds: float = 30.0,
        tokens: int = TOKENS,
        probe: Any = DEFAULT,
        forward: Callable[[torch.Tensor], Any] | None = None,
        total: int | None = None,
        dtype: str = "float32",
        decode: Callable[[list[int]], str] | None = None,
    ):
        self.path = Path(path)
        given: Any = tokens  # checked at run time: a notebook may pass anything
        if not isinstance(given, numbers.Integral) or isinstance(given, bool) or given < 1:
            raise ConfigError(f"tokens must be a positive int (token values of W_E and W_U stored), got {given!r}")
        self.tokens = int(given)
        if str(dtype) not in WEIGHT_DTYPES:
            raise ConfigError(f"dtype must be 'float32' or 'float16' (how weights are stored), got {dtype!r}")
        self.dtype = WEIGHT_DTYPES[str(dtype)]
        self.model, self.optimizer = model, optimizer
        self.adapter: Adapter = find_adapter(model)
        self._probe = make_probe(model, self.adapter, probe, forward, self.tokens)  # record/probing.py
        self._probe_default, self._probe_ran = isinstance(probe, str) and probe == DEFAULT, False
        self._labels = None if self._probe is None else decoded(decode, self._probe.tokens)
        if config is not None and not isinstance(config, dict):
            raise ConfigError(f"config must be a dict of JSON-able settings, got {type(config).__name__}")
        self.config = dict(config or {})
        if total is not None and schedule is not None:
            raise UserError("schedule and total exclude each other: total=N spaces about 200 snapshots over N steps")
        self.due = as_schedule(schedule) if total is None else spaced_schedule(total)
        self.checkpoint_seconds = checkpoint_seconds
        self.epoch = -1  # the last epoch in the file (after resume: where it continues)
        self._rec: Recording | None = None
        self._pending: dict[str, float] = {}
        self._failed = False
        self._last_step, self._warned_back = -1, False  # the previous step's epoch; warned of one going back
        if resume is not False and force:
            raise UserError("resume and force exclude each other")
        whole = isinstance(group_order, numbers.Integral) and not isinstance(group_order, (bool, np.bool_))
        if group_order is not None and (not whole or group_order < 2):
            raise ConfigError(f"group_order must be an int >= 2 (the p of Z_p), got {group_order!r}")
        self.group_order: int | None = None if group_order is None else int(group_order)  # numpy's ints too
        try:
            self._json = json.dumps(self.config, sort_keys=True, default=str)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"config must be a dict of JSON-able values: {exc}") from None
        self._shapes: dict[str, tuple[int, ...]] | None = None  # the file's weights: the model may not change
        if self.group_order is not None and isinstance(model, torch.nn.Module):  # a function: at the first write
            check_group_order(self.group_order, keep_tokens(self.adapter.read(), self.tokens), self.tokens)
        check_out_path(self.path)
        self._lock = RunLock(self.path, hint="wait for it to finish, or close its Recorder").acquire()
        try:
            if resume is not False:
                self._resume(resume)
            elif self.path.exists() and not force:
                raise UserError(f"{self.path} exists; pass resume=True to continue it or force=True to replace it")
        except BaseException:
            self._lock.release()
            raise

    # -- the loop's calls ---------------------------------------------------------------

    def step(self, epoch: int, /, **metrics: float) -> bool:
        """After the optimizer step of `epoch`: write a snapshot of the model's heads and the
        metrics (these and any `log`ged since) when `epoch` is on the schedule; returns True if
        it wrote one. Epochs already in the file (at or before `self.epoch`) are not written
        again; an epoch below the previous call's is warned about once (a counter restarted
        each pass over the data writes nothing more). UserError when a loss is not finite (the
        file keeps the snapshots so far)."""
        self._require_open()
        self.log(**metrics)
        epoch = as_epoch(epoch)
        if epoch < self._last_step and not self._warned_back:
            self._warned_back = True
            warn(
                f"{self.path}: step({epoch}) after step({self._last_step}): epochs went back, and none is written "
                f"again until they pass {self.epoch:,} (the last snapshot's); count steps over the whole run"
            )
        self._last_step = epoch
        if epoch <= self.epoch or not self.due(epoch):
            return False
        self.write(epoch)
        return True

    def log(self, **metrics: float) -> None:
        """Metrics of any step, stored with the next snapshot (the latest value of each; NaN at
        snapshots where a metric was not logged since the one before). UserError after `close`,
        for a value that is not one float64 number, or a name the file cannot hold."""
        self._require_open()
        self._pending.update({metric_name(k): metric_value(k, v) for k, v in metrics.items()})

    def write(self, epoch: int) -> None:
        """Write a snapshot at `epoch` now, on the schedule or not (epochs must increase).
        ModelError when the model changed since the first snapshot (`inputs.check_same_model`); the
        Recorder then stops (later calls are UserError) and `close` leaves the run incomplete."""
        self._require_open()
        epoch = as_epoch(epoch)
        if epoch <= self.epoch:
            raise UserError(f"epoch {epoch} is not after the last snapshot's, {self.epoch}: epochs must increase")
        try:
            weights = keep_tokens(self.adapter.read(), self.tokens)
            if self._rec is None and self.group_order is not None:
                check_group_order(self.group_order, weights, self.tokens)
            check_same_model(self.path, self._shapes, weights, epoch, self.epoch)
        except UserError:  # the model changed under the Recorder: the file stays resumable
            self._stop()
            raise
        probe = self._probe_record()
        metrics, self._pending = self._pending, {}
        with deferred_signals() as signals:  # Ctrl-C never lands inside h5py
            if self._rec is None:
                self._failed = True  # until the first snapshot is written (a full disk, a non-finite loss)
                try:
                    self._rec = Recording.create(
                        self.path,
                        self._attrs(),
                        weights,
                        metrics,
                        {},
                        [],
                        epoch=epoch,
                        checkpoint=self._checkpoint if self.optimizer is not None else None,
                        checkpoint_seconds=self.checkpoint_seconds,
                        hint="free space, then continue with Recorder(..., resume=True)",
                        probe=probe,
                        probe_tokens=None if self._probe is None else self._probe.tokens,
                        probe_labels=self._labels,
                        weight_dtype=self.dtype,
                    )
                except BaseException:
                    self._stop()
                    raise
                self._failed = False
                if self.optimizer is None:  # a replaced run's checkpoint must not resume this one
                    checkpoint_path(self.path).unlink(missing_ok=True)
                self._warn_embeddings(weights)
                self._shapes = {k: tuple(w.shape) for k, w in weights.items()}
            else:
                try:
                    self._rec.write(epoch, weights, metrics, probe)
                except UserError:
                    self._stop()  # the file keeps its snapshots, incomplete
                    raise
                self._rec.checkpoint_if_due(epoch, -1)
            self.epoch = epoch
        signals.deliver()

    def _probe_record(self) -> dict[str, np.ndarray] | None:
        """This snapshot's probe record (record/probing.py), or None with no probe."""
        if self._probe is None:
            return None
        if not self._probe_ran:
            self._probe_ran = True
            first = first_run(self._probe, self._probe_default and self._rec is None)
            if first is None:
                self._probe = None
            return first
        return self._probe.run()

    def close(self) -> None:
        """Checkpoint (with an optimizer), mark the run complete, close the file and release its
        lock. Idempotent. A run never written to leaves no file."""
        if self._lock is None:
            return  # closed already
        try:
            if self._rec is not None:
                with deferred_signals() as signals:
                    if not self._failed:
                        if self.optimizer is not None and self._rec.save is not None:
                            self._rec.checkpoint(self.epoch)
                        self._rec.complete()
                    self._rec.close()
                signals.deliver()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None  # type: ignore[assignment]

    def _stop(self) -> None:
        """After an error that stops this Recorder: close the file as a killed run's (whole
        snapshots, not marked complete) and release its lock, so that a new Recorder(...,
        resume=True) goes on at once, even while this one is still referenced (a notebook's cell)."""
        self._failed = True
        try:
            if self._rec is not None:
                self._rec.close()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None  # type: ignore[assignment]

    def _require_open(self) -> None:
        if self._failed and self._lock is None:
            kept = self.path.exists()
            raise UserError(
                f"this Recorder of {self.path} stopped after an error "
                f"({'the file keeps its snapshots' if kept else 'nothing was written'}): fix the cause, then go on "
                f"with a new Recorder{'(..., resume=True)' if kept else ''}"
            )
        if self._lock is None:
            raise UserError(f"this Recorder of {self.path} is closed; to go on, open a new one with resume=True")

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._lock is None:
            return  # closed, or stopped after an error (`_stop`)
        if exc_type is None:
            self.close()
        else:  # keep the file as a killed run would be: whole snapshots, resumable
            if self._rec is not None:
                self._rec.close()
            if self._lock is not None:
                self._lock.release()
                self._lock = None  # type: ignore[assignment]

    # -- the file -----------------------------------------------------------------------

    def _attrs(self) -> dict:
        attrs = {
            "schema_version": runfile.SCHEMA_VERSION,
            "experiment": EXPERIMENT,
            "config": self._json,
            "seed": int(self.config.get("seed", 0)) if str(self.config.get("seed", 0)).lstrip("-").isdigit() else 0,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "versions": json.dumps(versions(), sort_keys=True),
            "git_commit": git_commit(),
            "machine": json.dumps(machine(), sort_keys=True),
            "adapter": self.adapter.description,
            "layers": json.dumps(self.adapter.layers),
        }
        if self.group_order is not None:
            attrs["group_order"] = int(self.group_order)
        return attrs

    def _warn_embeddings(self, weights: dict) -> None:
        """Warn when group_order is set but W_E or W_U was not found: renderers would lay Z_p on
        the residual stream's basis vectors in place of the tokens or output classes."""
        missing = [k for k in ("W_E", "W_U") if k not in weights]
        if self.group_order is None or not missing:
            return
        warn(
            f"group_order={self.group_order}, but no {' or '.join(missing)} was found in "
            f"{type(self.model).__name__} (model.W_E/W_U, an nn.Embedding named wte, tok_embeddings or "
            "embed_tokens, an nn.Linear named lm_head or unembed): renderers will lay the group on the residual "
            "stream's basis vectors instead; rename them, or record a weights function with 'W_E' and 'W_U'"
        )

    def _checkpoint(self, epoch: int, then: str) -> None:
        buf = io.BytesIO()
        state = {
            "epoch": epoch,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
            "torch_rng": torch.get_rng_state(),
            "config": self.config,
        }
        torch.save(state, buf)
        write_checkpoint(checkpoint_path(self.path), buf.getbuffer(), epoch, then)

    def _resume(self, resume: bool | int) -> None:
        if not self.path.exists():
            raise UserError(f"cannot resume: {self.path} does not exist; start a new recording without resume")
        try:
            f = runfile.open_for_reading(self.path)
        except RunFileError as exc:  # its fix names `headmovies train`; a recording starts over so
            raise RunFileError(f"cannot resume: {exc.problem}", fix="start over with force=True") from None
        with f:
            kind = str(f.attrs["experiment"])
            stored = str(f.attrs["config"])
            epochs = runfile.snapshot_epochs(f)
            shapes = runfile.weight_shapes(f)
            stored_probe = probe_records.read_tokens(f)
        if kind != EXPERIMENT:
            raise UserError(f"cannot resume: {self.path} is a run of {kind!r}, trained by `headmovies train`")
        if json.loads(stored) != json.loads(self._json):
            diff = sorted(
                k
                for k in set(json.loads(stored)) | set(self.config)
                if json.loads(stored).get(k) != json.loads(self._json).get(k)
            )
            raise ConfigError(f"cannot resume {self.path} with a different config ({', '.join(diff)})")
        if not len(epochs):
            raise RunFileError(f"cannot resume: {self.path} holds no snapshot", fix="start over with force=True")
        self._check_same_weights(shapes)
        self._shapes = shapes
        self._probe = match_stored(self._probe, stored_probe, self.path)
        keep = int(epochs[-1]) if resume is True else int(resume)
        ckpt = checkpoint_path(self.path)
        if resume is True and self.optimizer is not None and ckpt.exists():
            keep = self._load_checkpoint(ckpt, epochs)
        keep_through = int(epochs[epochs <= keep].max()) if (epochs <= keep).any() else -1
        if keep_through < 0:
            raise UserError(f"cannot resume {self.path} at epoch {keep}: its first snapshot is at {int(epochs[0])}")
        later = int(np.count_nonzero(epochs > keep_through))
        if later:
            print(
                f"resuming {self.path} at epoch {keep_through:,}: its {later} later snapshot"
                f"{'s' if later > 1 else ''} will be written again",
                file=sys.stderr,
                flush=True,
            )
        self._rec = Recording.reopen(
            self.path,
            keep_through,
            [],
            checkpoint=self._checkpoint if self.optimizer is not None else None,
            checkpoint_seconds=self.checkpoint_seconds,
            hint="free space, then continue with Recorder(..., resume=True)",
        )
        self.epoch = keep_through

    def _check_same_weights(self, stored: dict[str, tuple[int, ...]]) -> None:
        """ConfigError, before the file is touched, when the model's weights differ in name or
        shape from those `stored` in the file being resumed (another model)."""
        now = {k: tuple(w.shape) for k, w in keep_tokens(self.adapter.read(), self.tokens).items()}
        differs = shape_difference(now, stored)
        if differs:
            name, here, there = differs
            raise ConfigError(
                f"cannot resume {self.path} with another model: its {name} is {here}, in the file {there}"
            )

    def _load_checkpoint(self, ckpt: Path, epochs: np.ndarray) -> int:
        try:
            state = torch.load(io.BytesIO(read_checkpoint(ckpt)), weights_only=False)
            self.model.load_state_dict(state["model"])
            if self.optimizer is not None and state.get("optimizer") is not None:
                self.optimizer.load_state_dict(state["optimizer"])
            torch.set_rng_state(state["torch_rng"])
        except Exception as exc:
            raise RunFileError(
                f"cannot resume {self.path}: its checkpoint {ckpt.name} is damaged or another model's "
                f"({str(exc).splitlines()[0][:120]})",
                fix=f"resume=EPOCH continues from a snapshot without it ({len(epochs)} in the file)",
            ) from None
        return int(state["epoch"])

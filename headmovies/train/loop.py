"""The shared training loop: any registered experiment → snapshots streamed into a run file.

Checkpoints (model, optimizer and RNG state) live beside the run file as `<run>.ckpt`,
replaced atomically every `checkpoint_seconds` and at the end. `--resume` loads the
checkpoint, drops any snapshots the file holds beyond it, and continues; because every
random draw comes from saved generators, the result equals an uninterrupted run bit for bit.
One trainer per run file (`train.lock`); a full disk stops training with one line, keeping
every whole snapshot (docs/run-file.md, "Faults").
"""
from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from headmovies import disk, runfile
from headmovies.errors import ConfigError, DiskFullError, RunFileError, UserError
from headmovies.interrupts import deferred_signals
from headmovies.train import experiments
from headmovies.train.config import TrainConfig
from headmovies.runfile.lock import RunLock
from headmovies.train.schedule import config_schedule, neighbours
from headmovies.runfile.writer import RunWriter, fork_copy


def checkpoint_path(run_path: str | os.PathLike) -> Path:
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + ".ckpt")


@dataclass
class TrainResult:
    path: Path
    epochs: int
    metrics: dict[str, float]
    summary: str
    seconds: float
    overlapped_steps: int = 0        # steps of this call whose terms overlapped (`train --overlap`)
    start: int = 0                   # the epoch this call started from (> 0 after --resume or a fork)


def _versions() -> dict:
    import h5py
    import headmovies
    return {"headmovies": headmovies.__version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": np.__version__, "h5py": h5py.__version__}


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _save_checkpoint(path: Path, task: experiments.Task, epoch: int, then: str = "",
                     torch_rng: torch.Tensor | None = None) -> None:
    """Replace the checkpoint atomically: serialised in memory, room checked, written to
    `<ckpt>.tmp`, fsync'ed, renamed. On failure the old checkpoint stays and no .tmp is left;
    a full disk raises DiskFullError (its message ends with `then`). `torch_rng`: the global
    torch RNG state to store (default: the current one; batched runs keep one per instance)."""
    buf = io.BytesIO()
    rng = torch.get_rng_state() if torch_rng is None else torch_rng
    torch.save({"epoch": epoch, "task": task.state_dict(), "torch_rng": rng,
                "config": dataclasses.asdict(task.cfg)}, buf)
    data = buf.getbuffer()
    disk.require_free(path.parent, len(data), f"the checkpoint at epoch {epoch}", then)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if disk.is_full(exc):
            raise DiskFullError(disk.full_message(path, f"while writing the checkpoint at epoch {epoch}",
                                                  then)) from None
        raise


def run_status(path: str | os.PathLike) -> str:
    """'missing', 'complete', or 'incomplete' (exists but training did not finish)."""
    path = Path(path)
    if not path.exists():
        return "missing"
    try:
        with runfile.open_for_reading(path) as f:
            return "complete" if runfile.is_complete(f) else "incomplete"
    except RunFileError:
        return "incomplete"


def config_dict(cfg: TrainConfig) -> dict:
    """The config as stored in the run file (JSON round trip)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg), sort_keys=True))


def changed_keys(old: dict, new: dict) -> list[str]:
    """Sorted keys whose values differ between two config dicts (a key missing from one differs)."""
    missing = object()
    return sorted(k for k in set(old) | set(new) if old.get(k, missing) != new.get(k, missing))


def _config_change(old: dict, new: dict) -> str:
    """'seed 24 → 9, lr 0.001 → 0.002' for the keys whose values differ (at most 4 shown)."""
    keys = changed_keys(old, new)
    shown = ", ".join(f"{k} {old.get(k, '(absent)')} → {new.get(k, '(absent)')}" for k in keys[:4])
    return shown + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")


def _set_aside(path: Path, cfg: TrainConfig) -> str | None:
    """Called by `train(keep_other=True)` under `path`'s lock, before training anew over it: a
    run file of another config, or an incomplete one of this config that lost its checkpoint, is
    moved (with any checkpoint) to the first free `<stem>.previous[-k].h5` beside it (never over
    an existing file), so a change of config or of the package's defaults never destroys a run.
    Returns the line saying so, or None when `path` is missing or holds this config's run. UserError, with nothing moved, when `path` is not a
    readable run file or cannot be moved."""
    if not path.exists():
        return None
    try:
        with runfile.open_for_reading(path) as f:
            old = runfile.read_config(f)
    except RunFileError:
        raise UserError(f"{path} exists and is not a readable run file: move it away, or pass --force instead of "
                        "--reuse to replace it") from None
    new = config_dict(cfg)
    ckpt = checkpoint_path(path)
    if old != new:
        what = f"a run of another config ({_config_change(old, new)})"
    elif run_status(path) != "complete" and not ckpt.exists():
        what = f"an incomplete run of this config without its checkpoint {ckpt.name}, so it cannot resume"
    else:
        return None
    k = 1
    while True:
        aside = path.with_name(f"{path.stem}.previous{'' if k == 1 else f'-{k}'}{path.suffix}")
        if not os.path.lexists(aside) and not os.path.lexists(checkpoint_path(aside)):
            break
        k += 1
    moved = []
    try:
        for src, dst in ((path, aside), (ckpt, checkpoint_path(aside))):
            if os.path.lexists(src):
                os.link(src, dst, follow_symlinks=False)      # fails rather than replace an existing file
                moved.append((src, dst))
                os.unlink(src)
    except OSError as exc:
        for src, dst in reversed(moved):                      # put back what was moved
            if not os.path.lexists(src):
                os.link(dst, src, follow_symlinks=False)
            os.unlink(dst)
        raise UserError(f"cannot move {path} ({what}) aside to {aside}: "
                        f"{exc.strerror or exc}; move it yourself, or pass --force to replace it") from None
    return f"{path} held {what}: moved to {aside}; training anew"


def reuse_plan(path: str | os.PathLike, cfg: TrainConfig) -> str:
    """What `--reuse` does with `path`: 'reuse' a complete run with this config, 'resume' an
    incomplete one with this config and a checkpoint, else train a 'new' one."""
    status = run_status(path)
    if status == "missing":
        return "new"
    try:
        with runfile.open_for_reading(path) as f:
            same = runfile.read_config(f) == config_dict(cfg)
    except RunFileError:
        return "new"
    if same and status == "complete":
        return "reuse"
    return "resume" if same and checkpoint_path(path).exists() else "new"


def run_attrs(experiment: str, cfg: TrainConfig, task: experiments.Task) -> dict:
    """Root attributes of a new run file (docs/run-file.md)."""
    return {"schema_version": runfile.SCHEMA_VERSION, "experiment": experiment,
            "config": json.dumps(dataclasses.asdict(cfg), sort_keys=True), "seed": cfg.seed,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "versions": json.dumps(_versions(), sort_keys=True), "git_commit": _git_commit(),
            **task.attrs()}


def train(experiment: str, cfg: TrainConfig, out: str | os.PathLike, *, resume: bool = False,
          force: bool = False, progress: bool = True, checkpoint_seconds: float = 30.0,
          stop_at: int | None = None, fork_from: str | os.PathLike | None = None,
          keep_other: bool = False, overlap: bool = False) -> TrainResult:
    """Train `experiment` with `cfg`, streaming snapshots into `out`.

    `overlap`: let the task compute independent loss terms at once in a second thread
    (`Task.overlap`; the same run bit for bit, faster when a second core is free).

    `keep_other` (with `force`; what `--reuse` uses): a run file of another config at `out` is
    moved aside to `<stem>.previous.h5` (`_set_aside`, under the lock) instead of replaced.

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
    check_out_path(out)
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
            line = _set_aside(out, cfg)
            if line:
                print(line, flush=True)
        if fork_from is not None:
            if out.exists() and not force:
                raise UserError(f"{out} exists; pass --force to replace it with the fork, or --reuse to continue "
                                "it if it is this fork under way")
            _fork(experiment, task_cls, cfg, Path(fork_from), out, epoch)
            resume = True
        return _train(experiment, task_cls, cfg, out, resume, force, progress, checkpoint_seconds, stop_at, overlap)
    finally:
        lock.release()


class ForkTooEarly(UserError):
    """The fork's source has no snapshot at the fork epoch (yet)."""


def fork_epoch(experiment: str, cfg: TrainConfig) -> int:
    """The task's fork epoch for `cfg` (`Task.fork_epoch`), which must be a snapshot epoch:
    UserError, saying why, when runs of `cfg` cannot fork."""
    epoch = experiments.get(experiment).fork_epoch(cfg)         # 0 < epoch < cfg.epochs
    schedule = config_schedule(cfg)
    if epoch not in schedule:
        before, after = neighbours(schedule, epoch)
        raise UserError(f"runs of this config cannot fork: they would fork at epoch {epoch:,}, which is not a "
                        f"snapshot epoch (snapshots at {before:,} and {after:,})")
    return epoch


def _differences(theirs: dict, mine: dict, keys: list[str]) -> str:
    shown = "; ".join(f"{k}: {theirs.get(k)!r} there, {mine.get(k)!r} here" for k in keys[:3])
    return shown + (f"; and {len(keys) - 3} more" if len(keys) > 3 else "")


def fork_check(experiment: str, cfg: TrainConfig, src: str | os.PathLike) -> int:
    """The epoch at which a run of `cfg` can fork from the run file `src`. UserError (ConfigError)
    when `cfg` has no fork epoch, `src` is not a readable run of `experiment`, its config differs
    in a key that acts before the fork, or its first phase ran under another schedule (it was
    extended from fewer epochs than the fork epoch); ForkTooEarly when it holds no snapshot at
    the fork epoch (yet)."""
    task_cls = experiments.get(experiment)
    epoch = fork_epoch(experiment, cfg)
    src = Path(src)
    if not src.exists():
        raise UserError(f"cannot fork from {src}: no such file")
    try:
        f = runfile.open_for_reading(src)
    except RunFileError as exc:
        raise RunFileError(f"cannot fork from {src}: {str(exc).split(';')[0]}") from None
    with f:
        if f.attrs["experiment"] != experiment:
            raise UserError(f"cannot fork from {src}: it is a run of {f.attrs['experiment']!r}, not {experiment!r}")
        stored, asked = runfile.read_config(f), config_dict(cfg)
        diff = sorted(k for k in set(stored) | set(asked) if stored.get(k) != asked.get(k) and k not in task_cls.FORK_KEYS)
        if diff:
            raise ConfigError(f"cannot fork from {src}: its config differs in what acts before epoch {epoch:,} "
                              f"({_differences(stored, asked, diff)}); only {', '.join(task_cls.FORK_KEYS)} may differ")
        if int(stored["epochs"]) < epoch:
            raise UserError(f"cannot fork from {src}: it is trained to {int(stored['epochs']):,} epochs, fewer than "
                            f"the fork epoch {epoch:,}, so its first phase ran under another lr schedule")
        epochs = f[runfile.SNAPSHOTS][runfile.EPOCH][:_snapshot_count(f)]
        extended = [e for e in json.loads(f.attrs.get("extensions", "[]")) if e["epochs_before"] < epoch]
        mine = config_schedule(cfg)
        upto = min(epoch, int(epochs[-1])) if len(epochs) else -1
        if extended or not np.array_equal(epochs[epochs <= epoch], mine[mine <= upto]):
            raise UserError(f"cannot fork from {src}: it was first trained to fewer epochs than {epoch:,} and then "
                            "extended, so its first phase ran under another lr schedule; fork from a run trained "
                            "with its final epochs from the start")
        if epoch not in epochs:
            last = f"it ends at epoch {int(epochs[-1]):,}" if len(epochs) else "it holds no snapshot"
            raise ForkTooEarly(f"cannot fork from {src}: it holds no snapshot at epoch {epoch:,}, where this run forks "
                               f"({last}); let it train that far, or train without --fork-from")
    return epoch


def _fork(experiment: str, task_cls: type, cfg: TrainConfig, src: Path, out: Path, epoch: int) -> None:
    """Make `out` and its checkpoint what training `cfg` from scratch would leave at the fork
    epoch: `src`'s records through it (attributes: this run's, plus `forked_from`), and a
    checkpoint of `cfg`'s task, built as training builds it, holding `src`'s weights there.
    Built as `<out>.partial`, renamed over `out` last. `epoch`: `fork_check`'s, done before."""
    torch.manual_seed(cfg.seed)
    task = task_cls(cfg)                    # the initial state a full run has; only the weights move
    with runfile.open_for_reading(src) as f:
        split = runfile.read_split(f)
        mine = task.split()
        if set(split) != set(mine) or any(not np.array_equal(split[k], mine[k]) for k in mine):
            raise RunFileError(f"cannot fork from {src}: its data split is not the one seed {cfg.seed} makes here "
                               "(another version of the code?); train without --fork-from")
        where = int(np.flatnonzero(f[runfile.SNAPSHOTS][runfile.EPOCH][()] == epoch)[0])
        row = {k: f[runfile.SNAPSHOTS][k][where] for k in runfile.weight_names(f)}
        task.model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in row.items()})
        attrs = run_attrs(experiment, cfg, task)
        attrs["forked_from"] = {"run": os.path.relpath(src.resolve(), out.resolve().parent), "epoch": epoch}
        attrs["extensions"] = None             # the source's, if any, are not this run's
        tmp = fork_copy(f, out, epoch, attrs)
    try:
        _save_checkpoint(checkpoint_path(out), task, epoch, f"nothing was written to {out}")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)


def check_stop_at(cfg: TrainConfig, stop_at: int | None) -> None:
    """UserError unless `stop_at` is None or an epoch of the config's snapshot schedule."""
    if stop_at is None:
        return
    if not 0 < stop_at <= cfg.epochs:
        raise UserError(f"--stop-at must be a snapshot epoch in 1..{cfg.epochs:,} (the run's epochs), got {stop_at}")
    schedule = config_schedule(cfg)
    if stop_at not in schedule:
        before, after = neighbours(schedule, stop_at)
        raise UserError(f"--stop-at {stop_at:,} is not a snapshot epoch of this run; the snapshots around it are "
                        f"at epochs {before:,} and {after:,}")


def new_run(experiment: str, cfg: TrainConfig, task: experiments.Task, out: Path,
            torch_rng: torch.Tensor | None = None) -> RunWriter:
    """A writer for a new run file at `out` holding the first snapshot, with its checkpoint.
    Built aside, checkpointed, then renamed over any old run (--force): a failure on the way
    leaves the old run (or nothing) in place, and `out` never exists without a checkpoint."""
    writer = RunWriter.create(out, run_attrs(experiment, cfg, task), 0, task.snapshot(), task.evaluate(),
                              task.split())
    try:
        _save_checkpoint(checkpoint_path(out), task, 0, f"nothing was written to {out}", torch_rng)
        writer.publish()
    except BaseException:
        writer.discard()
        raise
    writer.hint = _hint(experiment, out)
    return writer


def check_out_path(out: Path) -> None:
    """UserError unless `out` can be a run file: its folder exists and is writable, and neither
    it nor its checkpoint path is a folder."""
    disk.check_folder(out.parent, may_create=False)
    for path in (out, checkpoint_path(out)):
        if path.is_dir():
            raise UserError(f"{path} is a folder; --out names the run file, e.g. {path / 'run.h5'}")


def _hint(experiment: str, out: Path) -> str:
    return f"free space, then continue with `headmovies train {experiment} --out {out} --resume`"


def _train(experiment: str, task_cls: type, cfg: TrainConfig, out: Path, resume: bool, force: bool,
           progress: bool, checkpoint_seconds: float, stop_at: int | None = None,
           overlap: bool = False) -> TrainResult:
    ckpt_path = checkpoint_path(out)
    last = cfg.epochs if stop_at is None else stop_at
    if resume:
        state, row, later = _resume_state(out, ckpt_path, experiment, cfg)
        if int(state["epoch"]) > last:
            raise UserError(f"{out} is already at epoch {int(state['epoch']):,}, past --stop-at {last:,}")
    elif out.exists() and not force:
        raise UserError(_exists_message(out, ckpt_path, experiment))

    torch.manual_seed(cfg.seed)
    task = task_cls(cfg)
    task.overlap, task.threads = overlap, torch.get_num_threads()
    schedule = config_schedule(cfg)
    t0 = time.perf_counter()
    hint = _hint(experiment, out)
    if resume:
        task.load_state_dict(state["task"])
        torch.set_rng_state(state["torch_rng"])
        start = int(state["epoch"])
        _check_same_weights(out, ckpt_path, task.snapshot(), row, start)
        if later:                        # a kill (or a second Ctrl-C) came after the checkpoint
            print(f"resuming {out} from its checkpoint at epoch {start:,}: its {later} later snapshot"
                  f"{'s' if later > 1 else ''} will be trained again", file=sys.stderr, flush=True)
        attrs = {"config": json.dumps(dataclasses.asdict(cfg), sort_keys=True)}
        before = int(state["config"]["epochs"])
        if cfg.epochs != before:         # kept: the epochs before `start` ran under that schedule (forks check it)
            with runfile.open_for_reading(out) as f:
                history = json.loads(f.attrs.get("extensions", "[]"))
            attrs["extensions"] = json.dumps(history + [{"at": start, "epochs_before": before}])
        writer = RunWriter.reopen(out, start, attrs)
    else:
        start = 0
        writer = new_run(experiment, cfg, task, out)
    writer.hint = hint

    metrics = {}
    last_ckpt = time.monotonic()
    todo = set(int(e) for e in schedule if e > start)
    try:
        bar = tqdm(range(start + 1, last + 1), desc=experiment, unit="epoch", disable=not progress,
                   initial=start, total=last, dynamic_ncols=True, mininterval=0.5)
        stopping = False
        # Ctrl-C / SIGTERM: train on to the next snapshot, checkpoint it and stop there, so that
        # --resume loses nothing; a second one stops at once (never inside h5py: interrupts.py)
        with deferred_signals() as signals:
            for epoch in bar:
                if signals.pending.is_set() and not stopping:
                    stopping = True
                    _say_stopping(min((e for e in todo if e >= epoch), default=last), bar)
                task.step(epoch)
                if epoch in todo:
                    metrics = task.evaluate()
                    writer.append(epoch, task.snapshot(), metrics)
                    diverged = sorted(k for k, v in metrics.items() if "loss" in k and not np.isfinite(v))
                    if diverged:
                        raise UserError(f"training diverged by epoch {epoch} ({', '.join(diverged)} not finite); "
                                        f"{out} keeps the snapshots so far; lower lr or the loss weights and "
                                        "retrain with --force")
                    bar.set_postfix(task.progress(metrics), refresh=False)
                    if stopping or epoch == last or time.monotonic() - last_ckpt > checkpoint_seconds:
                        _save_checkpoint(ckpt_path, task, epoch,
                                         f"{out} holds every snapshot through epoch {epoch}; {hint}")
                        last_ckpt = time.monotonic()
                    if stopping and epoch < last:      # at the last epoch: mark the run complete first
                        signals.deliver()
            bar.close()
            if not metrics:  # last == start: nothing trained now
                metrics = task.evaluate()
            if last == cfg.epochs:
                writer.mark_complete()
            signals.deliver()                    # a signal in the last epoch: the run is whole, then stop
    finally:
        writer.close()
    seconds = time.perf_counter() - t0
    return TrainResult(out, last, metrics, task.summary(metrics), seconds, task.overlapped_steps, start)


def _say_stopping(epoch: int, bar) -> None:
    """One line on stderr, above the progress bar, when Ctrl-C or SIGTERM arrives."""
    bar.clear()
    print(f"stopping after the snapshot at epoch {epoch:,}, with a checkpoint there (Ctrl-C again stops "
          "at once, losing the epochs since the last checkpoint)", file=sys.stderr, flush=True)


def _exists_message(out: Path, ckpt_path: Path, experiment: str) -> str:
    try:
        runfile.open_for_reading(out).close()
    except RunFileError:
        return f"{out} exists and is not a readable run file; pass --force to replace it, or choose another --out"
    if ckpt_path.exists():
        return f"{out} exists; pass --resume to continue it or --force to replace it"
    return (f"{out} exists but has no checkpoint ({ckpt_path.name}), so it cannot be resumed: pass --force to "
            f"replace it, after keeping its snapshots with `headmovies recover {out} --out COPY.h5` if you want them")


def _snapshot_count(f) -> int:
    """Complete snapshots: the epochs, and no more than any weight holds."""
    return min(ds.shape[0] for ds in f[runfile.SNAPSHOTS].values())


def _load_checkpoint(ckpt_path: Path, out: Path, count: int) -> dict:
    recover = (f"keep the {count} snapshots of {out} as a closed file with `headmovies recover {out}`, "
               "or retrain with --force")
    try:
        state = torch.load(ckpt_path, weights_only=False)
    except Exception as exc:  # torch raises RuntimeError, EOFError, UnpicklingError, ... on damage
        raise RunFileError(f"checkpoint {ckpt_path} is damaged (truncated?): {str(exc).splitlines()[0][:120]}; "
                           f"it cannot resume {out}: {recover}") from None
    if not isinstance(state, dict) or not {"epoch", "task", "torch_rng", "config"} <= set(state):
        raise RunFileError(f"{ckpt_path} is not a headmovies checkpoint; it cannot resume {out}: {recover}")
    return state


def _resume_state(out: Path, ckpt_path: Path, experiment: str, cfg: TrainConfig) -> tuple[dict, dict, int]:
    """The checkpoint of `out` after checking that it may resume `out` with `cfg`; also the
    file's row at the checkpoint epoch and the number of snapshots after it (retrained). A run may only be resumed with its own config (epochs
    may grow, which stretches any schedule tied to the final epoch, such as a cosine learning
    rate, from there on), from its own checkpoint."""
    if not out.exists():
        raise UserError(f"cannot resume: {out} does not exist; start a new run without --resume")
    with runfile.open_for_reading(out) as f:
        if f.attrs["experiment"] != experiment:
            raise UserError(f"cannot resume: {out} is a run of {f.attrs['experiment']!r}, not {experiment!r}")
        stored = runfile.read_config(f)
        count = _snapshot_count(f)
        epochs = f[runfile.SNAPSHOTS][runfile.EPOCH][:count]
        if not ckpt_path.exists():
            raise UserError(f"cannot resume {out}: its checkpoint {ckpt_path.name} is missing, so training cannot "
                            f"continue; `headmovies recover {out}` keeps its {count} snapshots as a closed file, "
                            f"`headmovies train {experiment} --out {out} --force` starts over")
        state = _load_checkpoint(ckpt_path, out, count)
        asked = config_dict(cfg)
        diff = sorted(k for k in asked if k != "epochs" and stored.get(k) != asked[k])
        if diff:
            raise ConfigError(f"cannot resume {out} with a different config ({', '.join(diff)}); "
                              "use the stored config or --force a new run")
        saved = json.loads(json.dumps(state["config"], sort_keys=True))
        foreign = sorted(k for k in set(saved) | set(stored) if k != "epochs" and saved.get(k) != stored.get(k))
        start = int(state["epoch"])
        if foreign:
            shown = ", ".join(f"{k} {saved.get(k)!r} vs {stored.get(k)!r}" for k in foreign[:3])
            raise RunFileError(f"cannot resume {out}: its checkpoint {ckpt_path.name} belongs to another run "
                               f"(checkpoint vs file: {shown}); `headmovies recover {out}` keeps the file's "
                               f"{count} snapshots as a closed file, --force retrains")
        if cfg.epochs < start:
            raise UserError(f"cannot resume {out} to epochs={cfg.epochs}: its checkpoint is already at epoch "
                            f"{start}; pass epochs >= {start}")
        where = np.flatnonzero(epochs == start)
        if not len(where):
            raise RunFileError(f"cannot resume: {out} holds no snapshot at its checkpoint's epoch {start} "
                               f"(it ends at epoch {int(epochs[-1])}); retrain with --force")
        row = {k: f[runfile.SNAPSHOTS][k][int(where[0])] for k in runfile.weight_names(f)}
    return state, row, int(np.count_nonzero(epochs > start))


def _check_same_weights(out: Path, ckpt_path: Path, weights: dict, row: dict, epoch: int) -> None:
    """The checkpoint's model must be the file's snapshot at its epoch, bit for bit."""
    if set(weights) != set(row) or any(not np.array_equal(np.asarray(weights[k], np.float32), row[k], equal_nan=True)
                                       for k in row):
        raise RunFileError(f"cannot resume {out}: its checkpoint {ckpt_path.name} does not hold the weights of the "
                           f"file's snapshot at epoch {epoch} (they come from different runs); "
                           f"`headmovies recover {out}` keeps the file's snapshots as a closed file, --force retrains")

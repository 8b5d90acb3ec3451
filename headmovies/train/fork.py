"""Forks (`train --fork-from SRC.h5`): a new run that starts from another run's snapshot at the
task's fork epoch (for the orbit experiment, the start of its second phase) and is bit for bit
the run its config trains from scratch, for the cost of the epochs after the fork
(docs/sweeps.md, "Forks").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from headmovies import runfile
from headmovies.errors import ConfigError, RunFileError, UserError
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.runfile.writer import fork_copy
from headmovies.train import experiments
from headmovies.train.checkpoints import save_checkpoint
from headmovies.train.config import TrainConfig, config_dict, file_value, set_file_values
from headmovies.train.new_run import run_attrs
from headmovies.train.schedule import config_schedule, neighbours


class ForkTooEarly(UserError):
    """The fork's source has no snapshot at the fork epoch (yet)."""


def fork_epoch(experiment: str, cfg: TrainConfig) -> int:
    """The task's fork epoch for `cfg` (`Task.fork_epoch`), which must be a snapshot epoch:
    UserError, saying why, when runs of `cfg` cannot fork."""
    epoch = experiments.get(experiment).fork_epoch(cfg)  # 0 < epoch < cfg.epochs
    schedule = config_schedule(cfg)
    if epoch not in schedule:
        before, after = neighbours(schedule, epoch)
        raise UserError(
            f"runs of this config cannot fork: they would fork at epoch {epoch:,}, which is not a "
            f"snapshot epoch (snapshots at {before:,} and {after:,})"
        )
    return epoch


def _differences(cfg: TrainConfig, theirs: dict, mine: dict, keys: list[str]) -> str:
    shown = "; ".join(f"{k}: {file_value(cfg, theirs, k)!r} there, {mine.get(k)!r} here" for k in keys[:3])
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
        diff = sorted(
            k for k in set(stored) | set(asked) if stored.get(k) != asked.get(k) and k not in task_cls.FORK_KEYS
        )
        if diff:
            raise ConfigError(
                f"cannot fork from {src}: its config differs in what acts before epoch {epoch:,} "
                f"({_differences(cfg, stored, asked, diff)}); only {', '.join(task_cls.FORK_KEYS)} may differ"
                + (f"; with {hint} this run forks from it" if (hint := set_file_values(cfg, stored, diff)) else "")
            )
        if int(stored["epochs"]) < epoch:
            raise UserError(
                f"cannot fork from {src}: it is trained to {int(stored['epochs']):,} epochs, fewer than "
                f"the fork epoch {epoch:,}, so its first phase ran under another lr schedule"
            )
        epochs = runfile.snapshot_epochs(f)
        extended = [e for e in json.loads(f.attrs.get("extensions", "[]")) if e["epochs_before"] < epoch]
        mine = config_schedule(cfg)
        upto = min(epoch, int(epochs[-1])) if len(epochs) else -1
        if extended or not np.array_equal(epochs[epochs <= epoch], mine[mine <= upto]):
            raise UserError(
                f"cannot fork from {src}: it was first trained to fewer epochs than {epoch:,} and then "
                "extended, so its first phase ran under another lr schedule; fork from a run trained "
                "with its final epochs from the start"
            )
        if epoch not in epochs:
            last = f"it ends at epoch {int(epochs[-1]):,}" if len(epochs) else "it holds no snapshot"
            raise ForkTooEarly(
                f"cannot fork from {src}: it holds no snapshot at epoch {epoch:,}, where this run forks "
                f"({last}); let it train that far, or train without --fork-from"
            )
    return epoch


def fork(experiment: str, task_cls: type, cfg: TrainConfig, src: Path, out: Path, epoch: int) -> None:
    """Make `out` and its checkpoint what training `cfg` from scratch would leave at the fork
    epoch: `src`'s records through it (attributes: this run's, plus `forked_from`), and a
    checkpoint of `cfg`'s task, built as training builds it, holding `src`'s weights there.
    Built as `<out>.partial`, renamed over `out` last. `epoch`: `fork_check`'s, done before."""
    torch.manual_seed(cfg.seed)
    task = task_cls(cfg)  # the initial state a full run has; only the weights move
    with runfile.open_for_reading(src) as f:
        split = runfile.read_split(f)
        mine = task.split()
        if set(split) != set(mine) or any(not np.array_equal(split[k], mine[k]) for k in mine):
            raise RunFileError(
                f"cannot fork from {src}: its data split is not the one seed {cfg.seed} makes here "
                "(another version of the code?); train without --fork-from"
            )
        row = runfile.read_snapshot(f, epoch)
        if row is None:  # `fork_check` found it; the source was replaced since
            raise ForkTooEarly(
                f"cannot fork from {src}: it holds no snapshot at epoch {epoch:,} any more; train without --fork-from"
            )
        task.model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in row.items()})
        attrs = run_attrs(experiment, cfg, task)
        attrs["forked_from"] = {"run": os.path.relpath(src.resolve(), out.resolve().parent), "epoch": epoch}
        attrs["extensions"] = None  # the source's, if any, are not this run's
        tmp = fork_copy(f, out, epoch, attrs)
    try:
        save_checkpoint(checkpoint_path(out), task, epoch, f"nothing was written to {out}")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)

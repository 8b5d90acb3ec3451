"""`--resume`: the checks that a run file and its checkpoint may continue with a config, and
reopening the file at the checkpoint's epoch. Every random draw comes from saved generators,
so the resumed run equals an uninterrupted one bit for bit (docs/run-file.md, "Faults").
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import torch

from headmovies import disk, runfile
from headmovies.errors import ConfigError, RunFileError, UserError, plural
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.train.checkpoints import load_checkpoint, save_checkpoint
from headmovies.train.config import TrainConfig, config_dict, file_value, set_file_values, stored_config
from headmovies.train.recording import Recording
from headmovies.train.schedule import config_schedule
from headmovies.train.task import Task


def resume_state(out: Path, experiment: str, cfg: TrainConfig) -> tuple[dict, dict, int]:
    """The checkpoint of `out` (`checkpoints.load_checkpoint`'s dict) after checking that it may
    resume `out` with `cfg`; also the file's weights at the checkpoint epoch and the number of
    snapshots after it (retrained). A run may only be resumed with its own config (epochs may
    grow, which stretches any schedule tied to the final epoch, such as a cosine learning rate,
    from there on), from its own checkpoint. UserError, ConfigError or RunFileError (one line,
    naming `headmovies recover` where snapshots could be kept) otherwise."""
    ckpt_path = checkpoint_path(out)
    if not out.exists():
        raise UserError(f"cannot resume: {out} {disk.missing(out)}; start a new run without --resume")
    with runfile.open_for_reading(out) as f:
        if f.attrs["experiment"] != experiment:
            raise UserError(f"cannot resume: {out} is a run of {f.attrs['experiment']!r}, not {experiment!r}")
        stored = runfile.read_config(f)
        epochs = runfile.snapshot_epochs(f)
        count = len(epochs)
        if not ckpt_path.exists():
            raise UserError(
                f"cannot resume {out}: its checkpoint {ckpt_path.name} is missing, so training cannot "
                f"continue; `headmovies recover {out}` keeps its {plural(count, 'snapshot')} as a closed file, "
                f"`headmovies train {experiment} --out {out} --force` starts over"
            )
        state = load_checkpoint(ckpt_path, out, count)
        asked = config_dict(cfg)
        # both ways, a key that either omits taken at the value a file without it means: a key the
        # asked config omits differs from a file that stores another value
        keys = {f.name for f in dataclasses.fields(cfg)} - {"epochs"}
        diff = sorted(
            k for k in keys & (set(asked) | set(stored)) if file_value(cfg, stored, k) != file_value(cfg, asked, k)
        )
        if diff:
            raise ConfigError(
                f"cannot resume {out} with a different config ({', '.join(diff)}); "
                f"use the stored config ({set_file_values(cfg, stored, diff) or 'its file'}) or --force a new run"
            )
        saved = json.loads(json.dumps(state["config"], sort_keys=True))
        foreign = sorted(k for k in set(saved) | set(stored) if k != "epochs" and saved.get(k) != stored.get(k))
        start = int(state["epoch"])
        if foreign:
            shown = ", ".join(f"{k} {saved.get(k)!r} vs {stored.get(k)!r}" for k in foreign[:3])
            raise RunFileError(
                f"cannot resume {out}: its checkpoint {ckpt_path.name} belongs to another run "
                f"(checkpoint vs file: {shown}); `headmovies recover {out}` keeps the file's "
                f"{plural(count, 'snapshot')} as a closed file, --force retrains"
            )
        if cfg.epochs < start:
            raise UserError(
                f"cannot resume {out} to epochs={cfg.epochs}: its checkpoint is already at epoch "
                f"{start}; pass epochs >= {start}"
            )
        row = runfile.read_snapshot(f, start)
        if row is None:
            raise RunFileError(
                f"cannot resume: {out} holds no snapshot at its checkpoint's epoch {start} "
                f"({f'it ends at epoch {int(epochs[-1])}' if count else 'it holds none'}); "
                "retrain with --force"
            )
    return state, row, int(np.count_nonzero(epochs > start))


def reopen(
    out: Path,
    cfg: TrainConfig,
    task: Task,
    state: dict,
    row: dict,
    later: int,
    hint: str = "",
    checkpoint_seconds: float = 30.0,
) -> tuple[int, Recording]:
    """Continue `out` from `resume_state`'s (`state`, `row`, `later`): load the checkpoint into
    `task` (built from `cfg` as a new run builds it) and the global torch RNG, check its weights
    against the file's, and reopen the file for writing with every snapshot after the
    checkpoint dropped (one line on stderr says how many will be trained again). A grown
    `epochs` is recorded in the root attribute `extensions`. Returns (the checkpoint's epoch,
    its `Recording`: checkpoints every `checkpoint_seconds`, `hint` after a full disk);
    RunFileError when the checkpoint's weights are not the file's."""
    ckpt_path = checkpoint_path(out)
    task.load_state_dict(state["task"])
    torch.set_rng_state(state["torch_rng"])
    start = int(state["epoch"])
    check_same_weights(out, ckpt_path, task.snapshot(), row, start)
    if later:  # a kill (or a second Ctrl-C) came after the checkpoint
        print(
            f"resuming {out} from its checkpoint at epoch {start:,}: its {later} later snapshot"
            f"{'s' if later > 1 else ''} will be trained again",
            file=sys.stderr,
            flush=True,
        )
    attrs = {"config": json.dumps(stored_config(cfg), sort_keys=True)}
    before = int(state["config"]["epochs"])
    if cfg.epochs != before:  # kept: the epochs before `start` ran under that schedule (forks check it)
        with runfile.open_for_reading(out) as f:
            history = json.loads(f.attrs.get("extensions", "[]"))
        attrs["extensions"] = json.dumps(history + [{"at": start, "epochs_before": before}])
    rec = Recording.reopen(
        out,
        start,
        config_schedule(cfg),
        attrs,
        checkpoint=lambda epoch, then: save_checkpoint(ckpt_path, task, epoch, then),
        checkpoint_seconds=checkpoint_seconds,
        hint=hint,
        diverged_fix="lower lr or the loss weights and retrain with --force",
    )
    return start, rec


def check_same_weights(out: Path, ckpt_path: Path, weights: dict, row: dict, epoch: int) -> None:
    """The checkpoint's model must be the file's snapshot at its epoch, bit for bit."""
    if set(weights) != set(row) or any(
        not np.array_equal(np.asarray(weights[k], np.float32), row[k], equal_nan=True) for k in row
    ):
        raise RunFileError(
            f"cannot resume {out}: its checkpoint {ckpt_path.name} does not hold the weights of the "
            f"file's snapshot at epoch {epoch} (they come from different runs); "
            f"`headmovies recover {out}` keeps the file's snapshots as a closed file, --force retrains"
        )

"""`--reuse`: what to do with a run file already at `--out` (reuse it, resume it, or train
anew), and moving a run of another config aside instead of replacing it (docs/sweeps.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from headmovies import runfile
from headmovies.errors import RunFileError, UserError
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.train.config import TrainConfig, changed_keys, config_dict, file_value


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


def _config_change(cfg: TrainConfig, old: dict, new: dict) -> str:
    """'seed 24 → 9, lr 0.001 → 0.002' for the keys whose values differ (at most 4 shown); a key
    the old file lacks shows the value such a file means (`file_value`)."""
    keys = changed_keys(old, new)
    was = {k: file_value(cfg, old, k) for k in keys}
    shown = ", ".join(f"{k} {'(absent)' if was[k] is None else was[k]} → {new.get(k, '(absent)')}" for k in keys[:4])
    return shown + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")


def set_aside(path: Path, cfg: TrainConfig) -> str | None:
    """Called by `train(keep_other=True)` under `path`'s lock, before training anew over it: a
    run file of another config, or an incomplete one of this config that lost its checkpoint, is
    moved (with any checkpoint) to the first free `<stem>.previous[-k].h5` beside it (never over
    an existing file), so a change of config or of the package's defaults never destroys a run.
    Returns the line saying so, or None when `path` is missing or holds this config's run.
    UserError, with nothing moved, when `path` is not a readable run file or cannot be moved."""
    if not path.exists():
        return None
    try:
        with runfile.open_for_reading(path) as f:
            old = runfile.read_config(f)
    except RunFileError:
        raise UserError(
            f"{path} exists and is not a readable run file: move it away, or pass --force instead of "
            "--reuse to replace it"
        ) from None
    new = config_dict(cfg)
    ckpt = checkpoint_path(path)
    if old != new:
        what = f"a run of another config ({_config_change(cfg, old, new)})"
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
                os.link(src, dst, follow_symlinks=False)  # fails rather than replace an existing file
                moved.append((src, dst))
                os.unlink(src)
    except OSError as exc:
        for src, dst in reversed(moved):  # put back what was moved
            if not os.path.lexists(src):
                os.link(dst, src, follow_symlinks=False)
            os.unlink(dst)
        raise UserError(
            f"cannot move {path} ({what}) aside to {aside}: "
            f"{exc.strerror or exc}; move it yourself, or pass --force to replace it"
        ) from None
    return f"{path} held {what}: moved to {aside}; training anew"

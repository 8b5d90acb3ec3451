"""A run's checkpoint (`<run>.ckpt`): the task's state (model, optimizer, data generators), the
global torch RNG state, the epoch and the config, serialised with `torch.save`.

The file itself (where it lives, its atomic replacement, reading it back) is the run file's
format: `headmovies.runfile.checkpoint`. `--resume` loads it (train/resume.py); because every
random draw comes from saved generators, a resumed run equals an uninterrupted one bit for bit.
"""

from __future__ import annotations

import io
from pathlib import Path

import torch

from headmovies.errors import RunFileError, plural
from headmovies.runfile.checkpoint import read_checkpoint, write_checkpoint
from headmovies.train.config import stored_config
from headmovies.train.task import Task

KEYS = {"epoch", "task", "torch_rng", "config"}  # what every checkpoint holds


def save_checkpoint(path: Path, task: Task, epoch: int, then: str = "", torch_rng: torch.Tensor | None = None) -> None:
    """Replace the checkpoint at `path` with `task`'s state at `epoch`: serialised in memory,
    then written atomically (`runfile.checkpoint.write_checkpoint`: room checked, `<ckpt>.tmp`,
    fsync, rename). On failure the old checkpoint stays and no .tmp is left; a full disk raises
    DiskFullError (its message ends with `then`). `torch_rng`: the global torch RNG state to
    store (default: the current one; batched runs keep one per instance)."""
    buf = io.BytesIO()
    rng = torch.get_rng_state() if torch_rng is None else torch_rng
    torch.save({"epoch": epoch, "task": task.state_dict(), "torch_rng": rng, "config": stored_config(task.cfg)}, buf)
    write_checkpoint(path, buf.getbuffer(), epoch, then)


def load_checkpoint(ckpt_path: Path, out: Path, count: int) -> dict:
    """The checkpoint at `ckpt_path` of the run file `out` (which holds `count` complete
    snapshots), as {'epoch', 'task', 'torch_rng', 'config'}. RunFileError, naming `headmovies
    recover`, when it is damaged or not a headmovies checkpoint."""
    snapshots = plural(count, "snapshot")
    recover = f"keep the {snapshots} of {out} as a closed file with `headmovies recover {out}`, or retrain with --force"
    try:
        state = torch.load(io.BytesIO(read_checkpoint(ckpt_path)), weights_only=False)
    except Exception as exc:  # torch raises RuntimeError, EOFError, UnpicklingError, ... on damage
        raise RunFileError(
            f"checkpoint {ckpt_path} is damaged or truncated (PyTorch cannot load it: {type(exc).__name__}); "
            f"it cannot resume {out}: {recover}"
        ) from None
    if not isinstance(state, dict) or not set(state) >= KEYS:
        raise RunFileError(f"{ckpt_path} is not a headmovies checkpoint; it cannot resume {out}: {recover}")
    return state

"""A new run file: its `--out` path checked, its root attributes, and its first snapshot
written with its checkpoint, so that the run file never exists without one (docs/run-file.md).
Used by the training loop (`loop.train`) and by batched training (`batch_loop.train_batch`).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import torch

from headmovies import disk, runfile
from headmovies.errors import RunFileError, UserError
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.train.checkpoints import save_checkpoint
from headmovies.train.config import TrainConfig, stored_config
from headmovies.train.recording import Recording
from headmovies.train.schedule import config_schedule
from headmovies.train.task import Task
from headmovies.version import __version__


def versions() -> dict:
    """The versions of headmovies, Python, torch and the run file's libraries, by name."""
    return {
        "headmovies": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        **runfile.library_versions(),
    }


def git_commit() -> str:
    """The package's git commit (`git rev-parse HEAD`), or "" outside a repository or without git."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).resolve().parent
        )
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what `platform` knows; "" if nothing."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """The machine that trains (root attribute `machine`, JSON): {"cpu": model name, "cores":
    logical CPUs this process may use, "system": e.g. "Linux x86_64"}. Provenance only: another
    CPU's kernels round differently, so a run's last digits can differ there (docs/run-file.md)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    return {"cpu": _cpu_model(), "cores": cores, "system": f"{platform.system()} {platform.machine()}".strip()}


def run_attrs(experiment: str, cfg: TrainConfig, task: Task) -> dict:
    """Root attributes of a new run file (docs/run-file.md)."""
    return {
        "schema_version": runfile.SCHEMA_VERSION,
        "experiment": experiment,
        "config": json.dumps(stored_config(cfg), sort_keys=True),
        "seed": cfg.seed,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": json.dumps(versions(), sort_keys=True),
        "git_commit": git_commit(),
        "machine": json.dumps(machine(), sort_keys=True),
        **task.attrs(),
    }


def resume_hint(experiment: str, out: Path) -> str:
    """What to do after a full disk stopped the run `out` (the end of a DiskFullError)."""
    return f"free space, then continue with `headmovies train {experiment} --out {out} --resume`"


def create(
    experiment: str,
    cfg: TrainConfig,
    task: Task,
    out: Path,
    torch_rng: torch.Tensor | None = None,
    checkpoint_seconds: float = 30.0,
    diverged_fix: str = "lower lr or the loss weights",
) -> Recording:
    """The recording of a new run file at `out` holding the first snapshot, with its checkpoint
    (`Recording.create`: built aside, checkpointed, then renamed over any old run (--force), so
    that a failure on the way leaves the old run (or nothing) in place and `out` never exists
    without a checkpoint). `torch_rng`: the global torch RNG state to checkpoint (default: the
    current one at each checkpoint)."""
    ckpt = checkpoint_path(out)
    return Recording.create(
        out,
        run_attrs(experiment, cfg, task),
        task.snapshot(),
        task.evaluate(),
        task.split(),
        config_schedule(cfg),
        checkpoint=lambda epoch, then: save_checkpoint(ckpt, task, epoch, then, torch_rng),
        checkpoint_seconds=checkpoint_seconds,
        hint=resume_hint(experiment, out),
        diverged_fix=diverged_fix,
        probe=task.probe_record(),
        probe_tokens=task.probe_tokens(),
    )


def check_out_path(out: Path) -> None:
    """UserError unless `out` can be a run file: its folder exists and is writable, and neither
    it nor its checkpoint path is a folder, a named pipe (FIFO), a socket or a device."""
    disk.check_folder(out.parent, may_create=False)
    if out.is_dir():
        raise UserError(f"{out} is a folder; --out names the run file, e.g. {out / 'run.h5'}")
    disk.check_file_kind(out, "--out")  # a FIFO would block the first open forever
    ckpt = checkpoint_path(out)
    if ckpt.is_dir():
        raise UserError(f"{ckpt} is a folder where {out}'s checkpoint goes; move it, or choose another --out")
    disk.check_file_kind(ckpt, f"the checkpoint path of {out},")


def exists_message(out: Path, experiment: str) -> str:
    """Why a new run may not be written over the existing file `out` (no --resume or --force),
    and what to pass instead."""
    ckpt_path = checkpoint_path(out)
    try:
        runfile.open_for_reading(out).close()
    except RunFileError:
        return f"{out} exists and is not a readable run file; pass --force to replace it, or choose another --out"
    if ckpt_path.exists():
        return f"{out} exists; pass --resume to continue it or --force to replace it"
    return (
        f"{out} exists but has no checkpoint ({ckpt_path.name}), so it cannot be resumed: pass --force to "
        f"replace it, after keeping its snapshots with `headmovies recover {out} --out COPY.h5` if you want them"
    )

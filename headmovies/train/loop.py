"""The shared training loop: any registered experiment → snapshots streamed into a run file.

Checkpoints (model, optimizer and RNG state) live beside the run file as `<run>.ckpt`,
replaced atomically every `checkpoint_seconds` and at the end. `--resume` loads the
checkpoint, drops any snapshots the file holds beyond it, and continues; because every
random draw comes from saved generators, the result equals an uninterrupted run bit for bit.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from headmovies import runfile
from headmovies.train import experiments
from headmovies.train.config import TrainConfig
from headmovies.train.schedule import snapshot_epochs
from headmovies.train.writer import RunWriter
from headmovies.errors import ConfigError, RunFileError, UserError


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


def _versions() -> dict:
    import h5py
    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "h5py": h5py.__version__}


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _save_checkpoint(path: Path, task: experiments.Task, epoch: int, torch_rng: torch.Tensor | None = None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    rng = torch.get_rng_state() if torch_rng is None else torch_rng
    torch.save({"epoch": epoch, "task": task.state_dict(), "torch_rng": rng,
                "config": dataclasses.asdict(task.cfg)}, tmp)
    os.replace(tmp, path)


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
          force: bool = False, progress: bool = True, checkpoint_seconds: float = 30.0) -> TrainResult:
    """Train `experiment` with `cfg`, streaming snapshots into `out`.

    Raises UserError (before touching any file) if `out` exists without `resume`/`force`,
    or if `resume` is asked for a run with no checkpoint or a different config.
    """
    out = Path(out)
    task_cls = experiments.get(experiment)
    ckpt_path = checkpoint_path(out)
    if resume and force:
        raise UserError("--resume and --force exclude each other")
    if not out.parent.is_dir():
        raise UserError(f"output folder {out.parent} does not exist")
    if not os.access(out.parent, os.W_OK):
        raise UserError(f"output folder {out.parent} is not writable")
    if resume:
        if not out.exists() or not ckpt_path.exists():
            raise UserError(f"cannot resume: {out} or its checkpoint {ckpt_path.name} is missing; "
                            "start a new run without --resume")
        _check_resumable(out, experiment, cfg)
    elif out.exists() and not force:
        raise UserError(f"{out} exists; pass --resume to continue it or --force to replace it")

    torch.manual_seed(cfg.seed)
    task = task_cls(cfg)
    schedule = snapshot_epochs(cfg.epochs, cfg.early_every, cfg.switch_epoch, cfg.late_every, cfg.log_early)
    t0 = time.perf_counter()
    if resume:
        state = torch.load(ckpt_path, weights_only=False)
        task.load_state_dict(state["task"])
        torch.set_rng_state(state["torch_rng"])
        start = int(state["epoch"])
        if cfg.epochs < start:
            raise UserError(f"cannot resume {out} to epochs={cfg.epochs}: its checkpoint is already at epoch "
                            f"{start}; pass epochs >= {start}")
        writer = RunWriter.reopen(out, start, {"config": json.dumps(dataclasses.asdict(cfg), sort_keys=True)})
        if writer.last_epoch() != start:
            writer.close()
            raise UserError(f"cannot resume: {out} holds no snapshot at checkpoint epoch {start}; "
                            "retrain with --force")
    else:
        if force:
            out.unlink(missing_ok=True)
            ckpt_path.unlink(missing_ok=True)
        start = 0
        writer = RunWriter.create(out, run_attrs(experiment, cfg, task), 0, task.snapshot(), task.evaluate(),
                                  task.split())
        _save_checkpoint(ckpt_path, task, 0)

    metrics = {}
    last_ckpt = time.monotonic()
    todo = set(int(e) for e in schedule if e > start)
    try:
        bar = tqdm(range(start + 1, cfg.epochs + 1), desc=experiment, unit="epoch", disable=not progress,
                   initial=start, total=cfg.epochs, dynamic_ncols=True, mininterval=0.5)
        for epoch in bar:
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
                if epoch == cfg.epochs or time.monotonic() - last_ckpt > checkpoint_seconds:
                    _save_checkpoint(ckpt_path, task, epoch)
                    last_ckpt = time.monotonic()
        bar.close()
        if not metrics:  # epochs == start: nothing trained now
            metrics = task.evaluate()
        writer.mark_complete()
    finally:
        writer.close()
    seconds = time.perf_counter() - t0
    return TrainResult(out, cfg.epochs, metrics, task.summary(metrics), seconds)


def _check_resumable(out: Path, experiment: str, cfg: TrainConfig) -> None:
    """A run may only be resumed with its own config (epochs may grow, which stretches any
    schedule tied to the final epoch, such as a cosine learning rate, from there on)."""
    with runfile.open_for_reading(out) as f:
        if f.attrs["experiment"] != experiment:
            raise UserError(f"cannot resume: {out} is a run of {f.attrs['experiment']!r}, not {experiment!r}")
        stored = runfile.read_config(f)
    asked = dataclasses.asdict(cfg)
    diff = sorted(k for k in asked if k != "epochs" and stored.get(k) != asked[k])
    if diff:
        raise ConfigError(f"cannot resume {out} with a different config ({', '.join(diff)}); "
                          "use the stored config or --force a new run")

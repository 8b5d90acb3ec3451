"""The registry of experiments, by name. Each family's model module (`headmovies/train/<family>.py`,
one per module of `headmovies.tasks`) defines `Task` subclasses decorated with `@register`;
adding an experiment touches no shared code (docs/extending.md).

A Task owns one run's data, model and optimizer and exposes what the shared training loop
(`headmovies.train.loop`) needs: `step` (one optimizer step), `evaluate` (metrics for /metrics),
`snapshot` (weights for /snapshots, TransformerLens names) and its state for checkpoints.
"""
from __future__ import annotations

import importlib

import numpy as np
import torch

from headmovies import tasks
from headmovies.errors import ConfigError, UserError
from headmovies.train.config import TrainConfig

EXPERIMENTS: dict[str, type["Task"]] = {}
BATCHING: dict[str, type] = {}      # experiment name -> its batched trainer (`Task.batching`)


def register(cls: type["Task"]) -> type["Task"]:
    EXPERIMENTS[cls.name] = cls
    return cls


def register_batching(name: str):
    """Class decorator: the decorated class is experiment `name`'s batched trainer, what
    `Task.batching()` returns (e.g. `orbits.batch.OrbitBatch`). It lives beside the Task and
    imports it, so the Task never imports its batched trainer."""
    def decorate(cls: type) -> type:
        BATCHING[name] = cls
        return cls
    return decorate


class Task:
    """One run of one experiment. Subclasses set `name`, `Config`, `description` and build
    `self.model`, `self.optimizer` in `__init__` (called under `torch.manual_seed(cfg.seed)`)."""

    name: str = ""
    description: str = ""
    Config: type[TrainConfig] = TrainConfig
    # May `step` compute independent loss terms at once in a second thread? Set by the loop
    # (`train --overlap`); a task that can must give the same bits either way.
    overlap: bool = False
    overlapped_steps: int = 0       # steps this process ran with overlapped terms (reported by `train`)
    # torch intra-op threads of the steps (`train --threads`); a task may run some steps on one
    # thread to keep a one-thread run's bits (the orbit experiment: those with sequence terms)
    threads: int = 1

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        # Draws made during training (batches, shifts) come from this generator, saved in checkpoints.
        self.generator = torch.Generator().manual_seed(cfg.seed + 1)
        self.model: torch.nn.Module
        self.optimizer: torch.optim.Optimizer

    def step(self, epoch: int) -> None:
        """One optimizer step; `epoch` counts from 1 (an epoch is one optimizer step)."""
        raise NotImplementedError

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Metrics written at every snapshot (same keys every call)."""
        raise NotImplementedError

    def snapshot(self) -> dict[str, np.ndarray]:
        """Current weights by TransformerLens name, as float32 numpy arrays."""
        return {k: v.detach().cpu().numpy().astype(np.float32) for k, v in self.model.state_dict().items()}

    def split(self) -> dict[str, np.ndarray]:
        """Index arrays of the data split to store in /split (empty for fresh-batch tasks)."""
        return {}

    def attrs(self) -> dict:
        """Extra root attributes (e.g. n and m of the symmetry group)."""
        return {}

    def progress(self, metrics: dict[str, float]) -> dict[str, float]:
        """The few metrics shown on the progress bar at each snapshot."""
        return {}

    def summary(self, metrics: dict[str, float]) -> str:
        """One line for the end of training."""
        return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())

    # Config keys that act only after `fork_epoch`: a run may fork from another whose config
    # differs only in these (`loop.train(fork_from=...)`, docs/sweeps.md, "Forks").
    FORK_KEYS: tuple[str, ...] = ()

    @classmethod
    def fork_epoch(cls, cfg: TrainConfig) -> int:
        """The epoch from which a run of `cfg` continues from its weights alone (no optimizer state,
        no generator draws before it), so that it can fork from the snapshot of another run there
        and equal its own full run bit for bit. UserError, saying why, when there is none."""
        raise UserError(f"runs of {cls.name} cannot be forked: no epoch of its schedule starts from weights alone")

    @classmethod
    def batching(cls):
        """The experiment's batched trainer, which trains several runs as one computation in one
        process (`headmovies.train.batch_loop`; e.g. `orbits.batch.OrbitBatch`, registered with
        `register_batching`), or None: one run per process. Such a class has `key(cfg)` (runs with
        equal keys can share a batch), `max_size(cfg)` (the most runs per batch worth batching)
        and a `(cfgs, device)` constructor."""
        return BATCHING.get(cls.name)

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])


def get(name: str) -> type[Task]:
    """The Task class registered as `name`; ConfigError lists the known ones otherwise."""
    _load_all()
    if name not in EXPERIMENTS:
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(sorted(EXPERIMENTS))}")
    return EXPERIMENTS[name]


def all_experiments() -> dict[str, type[Task]]:
    _load_all()
    return dict(sorted(EXPERIMENTS.items()))


def _load_all() -> None:
    for family in tasks.families():
        importlib.import_module(f"headmovies.train.{family}")

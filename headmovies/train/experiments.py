"""The registry of experiments, by name: every family's `TASKS`, listed here.

Each family's model module or package (`headmovies/train/<family>`, one per module of
`headmovies.tasks`) defines `Task` subclasses (`headmovies.train.task`) and lists them in
`TASKS`, and its batched trainers, which train several runs as one computation in one process
(`headmovies.train.batch_loop`; e.g. `orbits.batch.OrbitBatch`), in `BATCHING` ({experiment
name: class}, empty when it has none). A new family adds its module to `FAMILIES` below
(docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from headmovies.errors import ConfigError
from headmovies.train import induction, orbits, ov_coherent
from headmovies.train.config import TrainConfig
from headmovies.train.task import Task

# {family: its model module}, the families of `headmovies.tasks.FAMILIES`
FAMILIES = {"induction": induction, "orbits": orbits, "ov_coherent": ov_coherent}

EXPERIMENTS: dict[str, type[Task]] = dict(
    sorted((cls.name, cls) for module in FAMILIES.values() for cls in module.TASKS)
)


class BatchedRuns(Protocol):
    """Several runs trained as one computation (`headmovies.train.batch_loop`): `cfg` (the
    shared keys), `views` (run i as a Task), `step(epoch)`, `sync(i)` before reading view i,
    `torch_rng(i)` (run i's global torch RNG state after its init, for its checkpoints)."""

    cfg: TrainConfig

    @property
    def views(self) -> Sequence[Task]: ...

    def step(self, epoch: int) -> None: ...

    def sync(self, i: int, optimizer: bool = True) -> Task: ...

    def torch_rng(self, i: int) -> torch.Tensor: ...


class Batching(Protocol):
    """A batched trainer class: `key(cfg)` (runs with equal keys can share a batch; None: the run
    trains alone), `max_size(cfg)` (the most runs per batch worth batching), and a
    `(cfgs, device)` constructor."""

    def __call__(self, cfgs: list, device: str | torch.device = "cpu") -> BatchedRuns: ...

    def key(self, cfg: TrainConfig) -> tuple | None: ...

    def max_size(self, cfg: TrainConfig) -> int: ...


# {experiment name: its batched trainer}, for the experiments that have one
BATCHING: dict[str, Batching] = {name: cls for module in FAMILIES.values() for name, cls in module.BATCHING.items()}


def get(name: str) -> type[Task]:
    """The Task class registered as `name`; ConfigError lists the known ones otherwise."""
    if name not in EXPERIMENTS:
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def all_experiments() -> dict[str, type[Task]]:
    """{name: Task class} of every experiment, in name order."""
    return dict(EXPERIMENTS)


def batching(name: str) -> Batching | None:
    """The batched trainer of experiment `name`, or None: one run per process. Such a class has
    `key(cfg)` (runs with equal keys can share a batch), `max_size(cfg)` (the most runs per batch
    worth batching) and a `(cfgs, device)` constructor (docs/extending.md)."""
    return BATCHING.get(name)

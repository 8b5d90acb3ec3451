"""The registry of experiments, by name: every family's `TASKS`, listed here.

Each family's model module (`headmovies/train/<family>`, one per module of `headmovies.tasks`)
defines `Task` subclasses (`headmovies.train.task`) and lists them in `TASKS`; a new family adds
its module to `FAMILIES` below (docs/extending.md).
"""
from __future__ import annotations

from headmovies.errors import ConfigError
from headmovies.train import induction, orbits, ov_coherent
from headmovies.train.task import Task

# {family: its model module}, the families of `headmovies.tasks.FAMILIES`
FAMILIES = {"induction": induction, "orbits": orbits, "ov_coherent": ov_coherent}

EXPERIMENTS: dict[str, type[Task]] = dict(sorted(
    (cls.name, cls) for module in FAMILIES.values() for cls in module.TASKS))


def get(name: str) -> type[Task]:
    """The Task class registered as `name`; ConfigError lists the known ones otherwise."""
    if name not in EXPERIMENTS:
        raise ConfigError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def all_experiments() -> dict[str, type[Task]]:
    """{name: Task class} of every experiment, in name order."""
    return dict(EXPERIMENTS)

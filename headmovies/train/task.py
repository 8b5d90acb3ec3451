"""The base class of one run of one experiment: what the shared training loop needs of it.

A Task owns one run's data, model and optimizer and exposes what `headmovies.train.loop`
needs: `step` (one optimizer step), `evaluate` (metrics for /metrics), `snapshot` (weights for
/snapshots, TransformerLens names) and its state for checkpoints. Each family's model module
(`headmovies/train/<family>`) subclasses it and lists its classes in `TASKS`; the registry by
name is `headmovies.train.experiments`.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import numpy as np
import torch

from headmovies.errors import UserError
from headmovies.train.config import TrainConfig

C = TypeVar("C", bound=TrainConfig)


class Task(Generic[C]):
    """One run of one experiment. Subclasses set `name`, `Config`, `description` and build
    `self.model`, `self.optimizer` in `__init__` (called under `torch.manual_seed(cfg.seed)`).
    The type parameter is the config class (`Task[OrbitConfig]`), for the type checker."""

    name: str = ""
    description: str = ""
    Config: type[TrainConfig] = TrainConfig
    # May `step` compute independent loss terms at once in a second thread? Set by the loop
    # (`train --overlap`); a task that can must give the same bits either way.
    overlap: bool = False
    overlapped_steps: int = 0  # steps this process ran with overlapped terms (reported by `train`)
    # torch intra-op threads of the steps (`train --threads`); a task may run some steps on one
    # thread to keep a one-thread run's bits (the orbit experiment: those with sequence terms)
    threads: int = 1

    def __init__(self, cfg: C):
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

    def probe_record(self) -> dict[str, np.ndarray] | None:
        """This snapshot's probe record (`train.probe.Probe.run`: per-head patterns and scores on
        a fixed probe batch, stored under /probe), or None for a task without a probe."""
        return None

    def probe_tokens(self) -> np.ndarray | None:
        """The probe batch [B, P] int64 (stored once as /probe/tokens), or None."""
        return None

    def split(self) -> dict[str, np.ndarray]:
        """Index arrays of the data split to store in /split (empty for fresh-batch tasks)."""
        return {}

    def attrs(self) -> dict:
        """Extra root attributes (e.g. n and m of the symmetry group)."""
        return {}

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        """The few metrics shown on the progress bar at each snapshot, formatted."""
        return {}

    def summary(self, metrics: dict[str, float]) -> str:
        """One line for the end of training."""
        return ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())

    # Config keys that act only after `fork_epoch`: a run may fork from another whose config
    # differs only in these (`loop.train(fork_from=...)`, docs/sweeps.md, "Forks").
    FORK_KEYS: tuple[str, ...] = ()

    @classmethod
    def fork_epoch(cls, cfg: C) -> int:
        """The epoch from which a run of `cfg` continues from its weights alone (no optimizer state,
        no generator draws before it), so that it can fork from the snapshot of another run there
        and equal its own full run bit for bit. UserError, saying why, when there is none."""
        raise UserError(f"runs of {cls.name} cannot be forked: no epoch of its schedule starts from weights alone")

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])

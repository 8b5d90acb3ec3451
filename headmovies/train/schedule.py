"""The snapshot schedule: which epochs are streamed into the run file (docs/math.md, "Snapshot schedule")."""

from __future__ import annotations

import numpy as np


def snapshot_epochs(
    epochs: int, early_every: int = 25, switch_epoch: int = 4000, late_every: int = 100, log_early: bool = False
) -> np.ndarray:
    """Sorted int64 array of snapshot epochs in [0, epochs].

    0, early_every, 2*early_every, ... up to switch_epoch, then switch_epoch + late_every, ...
    up to `epochs`; `epochs` itself is always included. With `log_early`, also 1, 2, 4, ...
    below `early_every` (early dynamics are fast). Source: source 000 ("one frame per 25 epochs
    up to epoch 4000, then one per 100").
    """
    early = np.arange(0, min(epochs, switch_epoch) + 1, early_every)
    late: np.ndarray | list[int] = (
        np.arange(switch_epoch + late_every, epochs + 1, late_every) if epochs > switch_epoch else []
    )
    extra = [epochs]
    if log_early:
        extra += [2**k for k in range(64) if 2**k < min(early_every, epochs)]
    return np.unique(np.concatenate([early, late, extra]).astype(np.int64))


def config_schedule(cfg) -> np.ndarray:
    """`snapshot_epochs` of a training config (its epochs, early_every, switch_epoch, late_every
    and log_early)."""
    return snapshot_epochs(cfg.epochs, cfg.early_every, cfg.switch_epoch, cfg.late_every, cfg.log_early)


def neighbours(schedule: np.ndarray, epoch: int) -> tuple[int, int]:
    """The snapshot epochs just before and just after `epoch` (0 < epoch < the last one)."""
    return int(schedule[schedule < epoch].max()), int(schedule[schedule > epoch].min())

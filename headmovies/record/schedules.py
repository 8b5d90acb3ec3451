"""When a Recorder writes snapshots (docs/recording.md, "Schedules"): the training configs'
default schedule, about 200 snapshots over a known number of steps (`total=`), or the user's
list of epochs or function."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable

from headmovies.errors import UserError
from headmovies.train.config import TrainConfig


def default_schedule(epoch: int) -> bool:
    """The training configs' default snapshot schedule (`TrainConfig`'s early_every, switch_epoch
    and late_every; source 000's) without an end: every 25 epochs through 4000, then every 100."""
    if epoch <= TrainConfig.switch_epoch:
        return epoch % TrainConfig.early_every == 0
    return (epoch - TrainConfig.switch_epoch) % TrainConfig.late_every == 0


SNAPSHOTS_OVER_TOTAL = 200  # Recorder(..., total=N): about this many snapshots over N steps


def spaced_schedule(total: int, count: int = SNAPSHOTS_OVER_TOTAL) -> Callable[[int], bool]:
    """About `count` snapshots spread evenly over epochs 0..total: every total / count epochs
    rounded (at least 1), and `total` itself. UserError for a total that is not a positive whole number."""
    if isinstance(total, bool) or not isinstance(total, numbers.Integral) or total < 1:
        raise UserError(f"total must be a positive int (the steps the loop will run), got {total!r}")
    every, last = max(1, int(total / count + 0.5)), int(total)
    return lambda epoch: epoch % every == 0 or epoch == last


def as_schedule(schedule: Iterable[int] | Callable[[int], bool] | None) -> Callable[[int], bool]:
    """The Recorder's `schedule` as a function epoch -> bool: None the default schedule, a function
    as given, a list of epochs as membership. UserError for anything else."""
    if schedule is None:
        return default_schedule
    if callable(schedule):
        return schedule
    try:
        epochs = {int(e) for e in schedule}
    except (TypeError, ValueError):
        raise UserError("schedule must be None, a list of epochs or a function epoch -> bool") from None
    return epochs.__contains__

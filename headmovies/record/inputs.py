"""What a `Recorder` is given, checked before anything is written: metric values and names,
epochs, the group order, and the model staying the model whose snapshots the file holds. Each
refusal is one line (`UserError`, `ConfigError`, `ModelError`; docs/recording.md, "Errors").
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

import numpy as np
import torch

from headmovies import runfile
from headmovies.errors import ConfigError, ModelError, UserError


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def metric_value(name: str, value: Any) -> float:
    """A metric's value as a float: a Python or numpy number, or a one-element tensor or array.
    UserError (one line) for anything else, such as a vector, a string or None."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if value.size != 1 if isinstance(value, np.ndarray) else value.numel() != 1:
            shape = list(value.shape)
            raise UserError(f"metric {name!r} is a tensor of shape {shape}: give one number (e.g. loss.item())")
        value = value.item()
    if not isinstance(value, numbers.Real):
        raise UserError(f"metric {name!r} must be a number, got {type(value).__name__} {_shown(value)}")
    try:
        return float(value)
    except OverflowError:  # an int beyond float64 (10**400); inf itself is a float, checked as a loss
        raise UserError(f"metric {name!r} is {_shown(value)}, beyond the range of a float64 (about 1.8e308)") from None


# What HDF5 cannot hold as a metric's dataset name: '/' nests groups, '.' is the group itself,
# and /metrics/epoch holds the records' epochs.
def metric_name(name: str) -> str:
    """`name` if it can be a metric's name in the run file; UserError (one line) otherwise."""
    if name == runfile.EPOCH:
        raise UserError("a metric may not be named 'epoch': the run file keeps the snapshots' epochs under that name")
    if not name or name in (".", "..") or "/" in name or "\0" in name or name != name.strip():
        raise UserError(
            f"metric name {name!r} cannot name a dataset in the run file (no '/', NUL, surrounding spaces, "
            "'.' or '..', and not empty); use e.g. train_loss or heldout_acc"
        )
    return name


EPOCH_MAX = 2**63 - 1  # /snapshots/epoch is int64


def as_epoch(epoch: Any) -> int:
    """An epoch as an int (any whole number in 0..2**63-1, which /snapshots/epoch stores as
    int64: an int, a numpy integer, a one-element tensor); UserError (one line) for anything
    else, such as 2.5, a string, -1 or 10**30."""
    try:
        value = int(epoch)
        whole = bool(value == epoch) and not isinstance(epoch, (bool, np.bool_))  # True is not epoch 1
    except (TypeError, ValueError, RuntimeError):
        whole = False
    if not whole:
        raise UserError(f"epoch must be a whole number (a step count), got {type(epoch).__name__} {_shown(epoch)}")
    if not 0 <= value <= EPOCH_MAX:
        raise UserError(f"epoch must be in 0..2**63-1 (a step count, stored as int64), got {_shown(value)}")
    return value


def check_group_order(p: int, weights: dict[str, np.ndarray], tokens: int) -> None:
    """ConfigError when the group order `p` exceeds the token values or output classes stored in
    `weights` (W_E's rows, W_U's columns, cut to `tokens`; without them d_model): renderers
    draw Z_p on the tokens 0..p-1."""
    d_model = next(w.shape[1] for k, w in weights.items() if k.endswith("W_Q"))
    sizes = {
        "token values (W_E's rows)": weights["W_E"].shape[0] if "W_E" in weights else d_model,
        "output classes (W_U's columns)": weights["W_U"].shape[1] if "W_U" in weights else d_model,
    }
    for what, size in sizes.items():
        if p > size:
            cut = f", the first tokens={tokens} of them stored" if size == tokens else ""
            raise ConfigError(
                f"group_order={p} is more than the model's {size} {what}{cut}: the group's elements are the "
                "tokens 0..p-1; give the p of Z_p that the tokens carry"
            )


def check_same_model(
    path: Path, shapes: dict[str, tuple[int, ...]] | None, weights: dict[str, np.ndarray], epoch: int, last: int
) -> None:
    """ModelError when `weights` (read at `epoch`) differ in name or shape from the `shapes` in
    the run file `path` (None: nothing written yet), whose last snapshot is at epoch `last`. (A
    replaced attention module is the adapter's ModelError, `adapters.find_adapter`.)"""
    if shapes is None:
        return
    differs = shape_difference({k: tuple(w.shape) for k, w in weights.items()}, shapes)
    if differs:
        name, here, there = differs
        raise ModelError(
            f"the model changed under the Recorder of {path}: at epoch {epoch} its {name} is {here}, "
            f"in the file {there}; the file keeps its snapshots through epoch {last} (not marked "
            "complete): record the changed model into a new file, or restore it and resume=True"
        )


def shape_difference(
    now: dict[str, tuple[int, ...]], stored: dict[str, tuple[int, ...]]
) -> tuple[str, list[int] | str, list[int] | str] | None:
    """The first weight name (in sorted order) whose shape differs between `now` and `stored`,
    with each side's shape as a list ("missing" where it has none); None when all agree."""
    for name in sorted(set(now) | set(stored)):
        if now.get(name) != stored.get(name):
            return (
                name,
                list(now[name]) if name in now else "missing",
                list(stored[name]) if name in stored else "missing",
            )
    return None

"""Forks of a sweep's new runs from another sweep's runs (`headmovies sweep --fork-from SRC_DIR`,
docs/sweeps.md, "Forks"): which run file in SRC_DIR a new run starts from.
"""

from __future__ import annotations

from pathlib import Path

from headmovies.errors import UserError
from headmovies.sweeps.sweep_rows import ROWS_FILE, latest, read_sweep_rows
from headmovies.train import experiments
from headmovies.train.config import TrainConfig, config_dict
from headmovies.train.fork import ForkTooEarly, fork_check, fork_epoch


def fork_source(
    experiment: str, cfg: TrainConfig, folder: Path, name: str, sources: dict | None, stop_at: int | None
) -> Path | None:
    """The run file in the sweep folder `folder` a new run of `cfg` forks from: the run of the same
    name, else a run of the same seed whose recorded config differs only in what acts after the
    fork (a source sweep over other `refine_*` values), provided it reached the fork epoch; None
    when there is none (missing, or not that far yet). UserError when runs of `cfg` cannot fork
    at all, for --stop-at before the fork, or when no candidate fits but one was refused (another
    first phase, extended, damaged): the reason of the first refusal."""
    epoch = fork_epoch(experiment, cfg)
    if stop_at is not None and stop_at <= epoch:
        raise UserError(
            f"--stop-at {stop_at:,} is not after the fork at epoch {epoch:,}; a screen before the fork "
            "has nothing to fork"
        )
    keys = set(experiments.get(experiment).FORK_KEYS)
    mine = config_dict(cfg)
    same_seed = [
        folder / r["file"]
        for r in (sources or {}).get(cfg.seed, [])
        if r.get("file")
        and all(v == mine.get(k) for k, v in (r.get("config") or {}).items() if k not in keys)
        and set(r.get("config") or {}) == set(mine)
    ]
    candidates = [folder / f"{name}.h5"] + [p for p in same_seed if p.name != f"{name}.h5"]
    refused = None
    for src in candidates:
        if not src.exists():
            continue
        try:
            fork_check(experiment, cfg, src)
        except ForkTooEarly:
            continue
        except UserError as exc:  # of another first phase, extended, damaged: try the others
            refused = refused or exc
            continue
        return src
    if refused is not None:
        raise refused  # a run of this seed is there but cannot be forked: say why
    return None


def source_rows(folder: Path) -> dict[int, list[dict]]:
    """A source sweep's rows by seed (the last row of each run), or {} for a folder of plain runs."""
    by_seed: dict[int, list[dict]] = {}
    for r in latest(read_sweep_rows(folder / ROWS_FILE)):
        by_seed.setdefault(int(r["seed"]), []).append(r)
    return by_seed

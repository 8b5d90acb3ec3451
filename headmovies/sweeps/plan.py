"""A sweep's plan (docs/sweeps.md): the seeds and grid from the command line, every run with its
config, file and action, and the jobs that train them.

    --seeds 0-199, --grid KEY=V1,V2, --set/--config -> one PlannedRun per seed and grid point
    (named from both: `seed3-eq_weight10.h5`) -> Jobs (new runs in batches where their configs
    allow, every other run alone)

A run's action comes from what DIR already holds (`reuse.reuse_plan`, as `train --reuse` does):
'skip' a run complete and recorded, 'record' one complete but not in sweep.jsonl, 'resume' an
incomplete one from its checkpoint, train a 'new' one. The folder's recorded settings and run
files are checked first (`folder`); a new run may fork from another sweep's run (`forks`).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from headmovies import runfile
from headmovies.errors import ConfigError, RunFileError, UserError, warn
from headmovies.sweeps.folder import check_settings, refuse_overwrite, settings_error
from headmovies.sweeps.forks import fork_source, source_rows
from headmovies.sweeps.sweep_rows import ROWS_FILE, read_sweep_rows
from headmovies.train import config, experiments, loop
from headmovies.train.config import TrainConfig
from headmovies.train.fork import fork_epoch
from headmovies.train.reuse import reuse_plan

MAX_SEEDS = 1_000_000  # one sweep's seeds; a typo like 0-99999999999 fails at once


# ----------------------------------------------------------------------------- the command line


def parse_seeds(text: str) -> list[int]:
    """'0-199', '0,3,5' or '0-3,10' -> sorted distinct seeds. UserError otherwise."""
    seeds: set[int] = set()
    for part in text.replace(" ", "").split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or (m[2] is not None and int(m[2]) < int(m[1])):
            raise UserError(f"--seeds takes non-negative integers and ranges, e.g. 0-199 or 0,3,5; got {text!r}")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if hi >= 2**62 or hi - lo + len(seeds) >= MAX_SEEDS:  # before the set is built
            raise UserError(
                f"--seeds {text} asks for more than {MAX_SEEDS:,} seeds or a seed above 2**62-1; "
                "split the sweep into smaller ranges"
            )
        seeds.update(range(lo, hi + 1))
    return sorted(seeds)


def parse_grid(items: list[str]) -> list[tuple[str, list[str]]]:
    """['eq_weight=1,10', 'split=orbit,random'] -> [(key, [values...]), ...] in the given order.
    Values are split on ',' or, when the text holds a ';', on ';' (for values with commas, e.g.
    eq_seq_lens=3;2,4). UserError for a pair without '=', no values, a repeated key or value."""
    grid, seen = [], set()
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"--grid expects KEY=V1,V2,..., got {item!r}")
        if key == "seed":
            raise UserError("seeds are not a grid key: use --seeds (e.g. --seeds 0-7)")
        if key in seen:
            raise UserError(f"--grid {key} is given twice; list all its values in one --grid {key}=V1,V2")
        values = [v.strip() for v in text.split(";" if ";" in text else ",")]
        if not text.strip() or (any(v == "" for v in values) and ";" not in text):
            raise UserError(
                f"--grid {key} has an empty value list or an empty value ({item!r}); "
                f"give values, e.g. --grid {key}=V1,V2"
            )
        if len(set(values)) != len(values):
            raise UserError(f"--grid {key} lists a value twice ({item!r})")
        seen.add(key)
        grid.append((key, values))
    return grid


def value_in_name(value) -> str:
    """A config value as it appears in run names: 10.0 -> '10', 0.001 -> '0.001', True -> 'true';
    characters other than letters, digits and . _ + - become '_'."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return re.sub(r"[^A-Za-z0-9._+-]", "_", repr(value) if isinstance(value, float) else str(value))


def run_name(seed: int, grid: dict) -> str:
    """'seed3' or 'seed3-eq_weight10-split_orbit'... : the seed, then each grid key and value."""
    return "-".join([f"seed{seed}"] + [f"{k}{value_in_name(v)}" for k, v in grid.items()])


# ----------------------------------------------------------------------------- plan


@dataclass
class PlannedRun:
    """One run of the sweep. action: 'skip' (complete and recorded), 'record' (complete, no row
    yet), 'resume' (incomplete, from its checkpoint) or 'new'."""

    name: str
    seed: int
    grid: dict
    cfg: TrainConfig
    path: Path
    action: str
    stop_at: int | None = None  # train only through this snapshot epoch (`loop.train`)
    fork_from: Path | None = None  # a new run forks from this run file (`loop.train`)


@dataclass
class Plan:
    experiment: str
    out: Path
    settings: dict  # fixed config values (--config, --set), typed
    runs: list[PlannedRun]
    new_settings: bool = False  # sweep.json is (re)written with `settings` (see `folder.check_settings`)

    @property
    def todo(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.action != "skip"]


def make_plan(
    experiment: str,
    out: str | os.PathLike,
    seeds: list[int] | None,
    grid: list[tuple[str, list[str]]],
    sets: dict[str, str],
    toml: dict | None = None,
    stop_at: int | None = None,
    fork_from: str | os.PathLike | None = None,
) -> Plan:
    """Every run of the sweep with its config, file and action. Reads DIR if it exists, creates
    nothing. UserError (ConfigError) for an unknown experiment or key, a bad value (naming the
    grid point), two grid points with one name, or a DIR holding another sweep.

    `fork_from`: the folder of another sweep; a new run forks from its run of the same name when
    that run has reached the fork epoch (`fork.fork_check`), else trains from scratch. ConfigError
    when a source's config differs in what acts before the fork."""
    task_cls = experiments.get(experiment)
    if "seed" in sets or (toml and "seed" in toml):
        raise UserError("set seeds with --seeds (e.g. --seeds 0-7), not as a config value")
    out = Path(out).absolute()
    base = config.resolve(task_cls.Config, toml, sets)
    settings = {k: getattr(base, k) for k in {**(toml or {}), **sets}}
    if seeds is None:
        seeds = [base.seed]
    for key, _ in grid:
        if key not in config.field_types(task_cls.Config):
            raise ConfigError(
                f"unknown config key {key!r} in --grid; known keys: {', '.join(config.field_types(task_cls.Config))}"
            )
    both = sorted(set(settings) & {k for k, _ in grid})
    if both:
        raise UserError(f"{', '.join(both)} is both fixed (--set/--config) and in --grid; give it in one place")
    state = check_settings(out, experiment, settings)
    rows = {r["run"]: r for r in read_sweep_rows(out / ROWS_FILE)}
    sources = source_rows(Path(fork_from)) if fork_from is not None else None
    runs: list[PlannedRun] = []
    names: dict[str, dict] = {}  # run name -> its grid point
    for combo in itertools.product(*(values for _, values in grid)):
        point = dict(zip((k for k, _ in grid), combo))
        for seed in seeds:
            try:
                cfg = config.resolve(task_cls.Config, toml, {**sets, **point, "seed": str(seed)})
            except ConfigError as exc:
                raise _at_point(exc, point) from None
            typed = {k: getattr(cfg, k) for k in point}
            name = run_name(seed, typed)
            if name in names:
                raise UserError(f"grid points {names[name]} and {point} give the same run {name}; list each value once")
            names[name] = point
            path = out / f"{name}.h5"
            try:
                loop.check_stop_at(cfg, stop_at)
            except UserError as exc:
                raise _at_point(exc, point) from None
            run = PlannedRun(
                name,
                seed,
                typed,
                cfg,
                path,
                _action(path, cfg, rows.get(name), stop_at),
                stop_at if stop_at is not None and stop_at < cfg.epochs else None,
            )
            if fork_from is not None:
                try:
                    if run.action == "new":
                        run.fork_from = fork_source(experiment, cfg, Path(fork_from).absolute(), name, sources, stop_at)
                    else:
                        fork_epoch(experiment, cfg)
                except UserError as exc:
                    raise _at_point(exc, point) from None
            runs.append(run)
    if fork_from is not None and not any(r.fork_from for r in runs) and any(r.action == "new" for r in runs):
        warn(
            f"no new run can fork: {fork_from} holds no run of the same seed that reached the fork epoch with a "
            "config differing only in what acts after it; they train from scratch"
        )
    if state == "changed" and not _runs_match(out, base, runs):
        raise settings_error(out, experiment, settings)
    return Plan(experiment, out, settings, runs, state != "same")


def _at_point(exc: UserError, point: dict) -> UserError:
    """`exc` again, naming the grid point it came from (if any)."""
    where = " ".join(f"{k}={v}" for k, v in point.items())
    return type(exc)(f"{exc} (grid point {where})" if point else str(exc))


def _action(path: Path, cfg: TrainConfig, row: dict | None, stop_at: int | None = None) -> str:
    plan = reuse_plan(path, cfg)
    if plan == "new":
        refuse_overwrite(path, cfg)
    row = row or {}
    same = bool(row) and row.get("config") == config.config_dict(cfg)
    if plan == "reuse":
        return "skip" if same and row.get("status") == "done" else "record"
    if plan == "resume" and stop_at is not None and same and row.get("status") == "stopped":
        epoch = (row.get("summary") or {}).get("epoch")
        if epoch == stop_at:
            return "skip"  # stopped here before: a screen rerun keeps it
        if isinstance(epoch, int) and epoch > stop_at:
            raise UserError(
                f"{path.name} was stopped at epoch {epoch:,}, past --stop-at {stop_at:,}: rerun with "
                f"--stop-at {epoch} (or later), or without --stop-at to finish the runs"
            )
    return plan


def _runs_match(out: Path, base: TrainConfig, runs: list[PlannedRun]) -> bool:
    """Every run file in `out` (at least one) has the config this sweep gives it: a planned run's
    exactly, or, for a run of another seed, `base` with one of this grid's values for each grid key."""
    planned = {r.path.name: config.config_dict(r.cfg) for r in runs}
    grid_values: dict[str, list] = {}
    for r in runs:
        for k, v in json.loads(json.dumps(r.grid)).items():
            grid_values.setdefault(k, []).append(v)
    want = config.config_dict(base)
    files = sorted(out.glob("*.h5"))
    for path in files:
        try:
            with runfile.open_for_reading(path) as f:
                have = runfile.read_config(f)
        except RunFileError:
            return False
        if path.name in planned:
            if have != planned[path.name]:
                return False
        elif any(
            k != "seed" and (have.get(k) not in grid_values[k] if k in grid_values else have.get(k) != want.get(k))
            for k in set(have) | set(want)
        ):
            return False
    return bool(files)


# ----------------------------------------------------------------------------- jobs


@dataclass
class Job:
    """Runs trained by one worker process: one run, or several new ones as one batch."""

    experiment: str
    runs: list[PlannedRun]
    batched: bool = False


def make_jobs(plan: Plan, workers: int, batch: int | None = None) -> list[Job]:
    """New runs whose configs can share a batch (`experiments.batching(name).key`, not None) go in batches of at most
    `batch` runs (default: `max_size`, what pays for the config), cut so that every worker gets
    work; every other run is a job of its own."""
    batching = experiments.batching(plan.experiment)
    groups: dict[tuple, list[PlannedRun]] = {}
    jobs = []
    for r in plan.todo:
        key = batching.key(r.cfg) if batching is not None else None  # None: this run trains alone
        if r.action == "new" and key is not None and r.stop_at is None and r.fork_from is None:
            groups.setdefault(key, []).append(r)
        else:
            jobs.append(Job(plan.experiment, [r]))
    for runs in groups.values():
        assert batching is not None  # groups are made only with it
        cap = batch or batching.max_size(runs[0].cfg)
        cap = max(1, min(cap, math.ceil(len(runs) / workers)))
        for i in range(0, len(runs), cap):
            chunk = runs[i : i + cap]
            jobs.append(Job(plan.experiment, chunk, batched=len(chunk) > 1))
    order = {r.name: i for i, r in enumerate(plan.runs)}
    return sorted(jobs, key=lambda j: order[j.runs[0].name])

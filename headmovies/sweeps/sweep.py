"""Sweeps: one experiment over a grid of seeds and configs, trained on local cores or a Ray
cluster, one ordinary run file per run (docs/sweeps.md).

    plan (names, what each run needs) -> jobs (batches where configs allow) -> backend (a
    process pool, or Ray tasks) -> one row per run, appended to DIR/sweep.jsonl by the driver
    -> the table and the census figure (`sweeps.report`)

Each run file is named from its seed and grid point (`seed3-eq_weight10.h5`). Rerunning the
same command skips runs that are complete and recorded, records complete ones that are not,
resumes incomplete ones from their checkpoints and trains the rest anew (`loop.reuse_plan`, as
`train --reuse` does); a changed grid adds only its new runs. A row's summary comes from the
rendering side reading the finished run file: `render/<family>/report.py::sweep_summary`.

Workers write run files straight into DIR, so DIR must be one folder that every worker sees (a
local disk, or a shared filesystem on a cluster); rows travel back to the driver, which alone
writes sweep.jsonl.
"""
from __future__ import annotations

import fcntl
import contextlib
import importlib
import importlib.util
import itertools
import json
import math
import multiprocessing
import os
import re
import signal
import socket
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from headmovies import runfile, tasks
from headmovies.errors import ConfigError, RunFileError, UserError, warn
from headmovies.interrupts import ignore_between_jobs, interrupts_in_pool_jobs
from headmovies.sweeps.report import latest, read_rows  # noqa: F401 (also S.read_rows)
from headmovies.train import config, experiments, loop
from headmovies.train.config import TrainConfig

SETTINGS_FILE = "sweep.json"      # the experiment and its fixed settings, checked on every rerun
ROWS_FILE = "sweep.jsonl"         # one row per finished (or failed) run, appended
LOCK_FILE = ".sweep.lock"         # one sweep at a time per folder
RAY_INSTALL = "pip install -e .[ray]"
MAX_SEEDS = 1_000_000             # one sweep's seeds; a typo like 0-99999999999 fails at once


# ----------------------------------------------------------------------------- parsing

def parse_seeds(text: str) -> list[int]:
    """'0-199', '0,3,5' or '0-3,10' -> sorted distinct seeds. UserError otherwise."""
    seeds = set()
    for part in text.replace(" ", "").split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or (m[2] is not None and int(m[2]) < int(m[1])):
            raise UserError(f"--seeds takes non-negative integers and ranges, e.g. 0-199 or 0,3,5; got {text!r}")
        lo, hi = int(m[1]), int(m[2] or m[1])
        if hi >= 2 ** 62 or hi - lo + len(seeds) >= MAX_SEEDS:     # before the set is built
            raise UserError(f"--seeds {text} asks for more than {MAX_SEEDS:,} seeds or a seed above 2**62-1; "
                            "split the sweep into smaller ranges")
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
        if not text.strip() or any(v == "" for v in values) and ";" not in text:
            raise UserError(f"--grid {key} has an empty value list or an empty value ({item!r}); "
                            f"give values, e.g. --grid {key}=V1,V2")
        if len(set(values)) != len(values):
            raise UserError(f"--grid {key} lists a value twice ({item!r})")
        seen.add(key)
        grid.append((key, values))
    return grid


def value_text(value) -> str:
    """A config value as it appears in run names: 10.0 -> '10', 0.001 -> '0.001', True -> 'true';
    characters other than letters, digits and . _ + - become '_'."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return re.sub(r"[^A-Za-z0-9._+-]", "_", repr(value) if isinstance(value, float) else str(value))


def run_name(seed: int, grid: dict) -> str:
    """'seed3' or 'seed3-eq_weight10-split_orbit'... : the seed, then each grid key and value."""
    return "-".join([f"seed{seed}"] + [f"{k}{value_text(v)}" for k, v in grid.items()])


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An error on one line: a UserError's message, else 'Type: message' (whitespace collapsed)."""
    text = " ".join(str(exc).split())
    if not isinstance(exc, UserError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


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
    stop_at: int | None = None       # train only through this snapshot epoch (`loop.train`)
    fork_from: Path | None = None    # a new run forks from this run file (`loop.train`)


@dataclass
class Plan:
    experiment: str
    out: Path
    settings: dict                   # fixed config values (--config, --set), typed
    runs: list[PlannedRun]
    new_settings: bool = False       # sweep.json is (re)written with `settings` (see _check_settings)

    @property
    def todo(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.action != "skip"]


def make_plan(experiment: str, out: str | os.PathLike, seeds: list[int] | None, grid: list[tuple[str, list[str]]],
              sets: dict[str, str], toml: dict | None = None, stop_at: int | None = None,
              fork_from: str | os.PathLike | None = None) -> Plan:
    """Every run of the sweep with its config, file and action. Reads DIR if it exists, creates
    nothing. UserError (ConfigError) for an unknown experiment or key, a bad value (naming the
    grid point), two grid points with one name, or a DIR holding another sweep.

    `fork_from`: the folder of another sweep; a new run forks from its run of the same name when
    that run has reached the fork epoch (`loop.fork_check`), else trains from scratch. ConfigError
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
            raise ConfigError(f"unknown config key {key!r} in --grid; known keys: "
                              f"{', '.join(config.field_types(task_cls.Config))}")
    both = sorted(set(settings) & {k for k, _ in grid})
    if both:
        raise UserError(f"{', '.join(both)} is both fixed (--set/--config) and in --grid; give it in one place")
    state = _check_settings(out, experiment, settings)
    rows = {r["run"]: r for r in read_rows(out / ROWS_FILE)}
    sources = _source_rows(Path(fork_from)) if fork_from is not None else None
    runs, names = [], {}
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
            run = PlannedRun(name, seed, typed, cfg, path, _action(path, cfg, rows.get(name), stop_at),
                             stop_at if stop_at is not None and stop_at < cfg.epochs else None)
            if fork_from is not None:
                try:
                    if run.action == "new":
                        run.fork_from = _fork_source(experiment, cfg, Path(fork_from).absolute(), name, sources, stop_at)
                    else:
                        loop.fork_epoch(experiment, cfg)
                except UserError as exc:
                    raise _at_point(exc, point) from None
            runs.append(run)
    if fork_from is not None and not any(r.fork_from for r in runs) and any(r.action == "new" for r in runs):
        warn(f"no new run can fork: {fork_from} holds no run of the same seed that reached the fork epoch with a "
             "config differing only in what acts after it; they train from scratch")
    if state == "changed" and not _runs_match(out, base, runs):
        raise _settings_error(out, experiment, settings)
    return Plan(experiment, out, settings, runs, state != "same")


def _at_point(exc: UserError, point: dict) -> UserError:
    """`exc` again, naming the grid point it came from (if any)."""
    where = " ".join(f"{k}={v}" for k, v in point.items())
    return type(exc)(f"{exc} (grid point {where})" if point else str(exc))


def _fork_source(experiment: str, cfg: TrainConfig, folder: Path, name: str, sources: dict | None,
                 stop_at: int | None) -> Path | None:
    """The run file in the sweep folder `folder` a new run of `cfg` forks from: the run of the same
    name, else a run of the same seed whose recorded config differs only in what acts after the
    fork (a source sweep over other `refine_*` values), provided it reached the fork epoch; None
    when there is none (missing, or not that far yet). UserError when runs of `cfg` cannot fork
    at all, for --stop-at before the fork, or when no candidate fits but one was refused (another
    first phase, extended, damaged): the reason of the first refusal."""
    epoch = loop.fork_epoch(experiment, cfg)
    if stop_at is not None and stop_at <= epoch:
        raise UserError(f"--stop-at {stop_at:,} is not after the fork at epoch {epoch:,}; a screen before the fork "
                        "has nothing to fork")
    keys = set(experiments.get(experiment).FORK_KEYS)
    mine = loop.config_dict(cfg)
    same_seed = [folder / r["file"] for r in (sources or {}).get(cfg.seed, [])
                 if r.get("file") and all(v == mine.get(k) for k, v in (r.get("config") or {}).items() if k not in keys)
                 and set(r.get("config") or {}) == set(mine)]
    candidates = [folder / f"{name}.h5"] + [p for p in same_seed if p.name != f"{name}.h5"]
    refused = None
    for src in candidates:
        if not src.exists():
            continue
        try:
            loop.fork_check(experiment, cfg, src)
        except loop.ForkTooEarly:
            continue
        except UserError as exc:        # of another first phase, extended, damaged: try the others
            refused = refused or exc
            continue
        return src
    if refused is not None:
        raise refused                   # a run of this seed is there but cannot be forked: say why
    return None


def _source_rows(folder: Path) -> dict[int, list[dict]]:
    """A source sweep's rows by seed (the last row of each run), or {} for a folder of plain runs."""
    by_seed: dict[int, list[dict]] = {}
    for r in latest(read_rows(folder / ROWS_FILE)):
        by_seed.setdefault(int(r["seed"]), []).append(r)
    return by_seed


def _action(path: Path, cfg: TrainConfig, row: dict | None, stop_at: int | None = None) -> str:
    plan = loop.reuse_plan(path, cfg)
    if plan == "new":
        _refuse_overwrite(path, cfg)
    same = row is not None and row.get("config") == loop.config_dict(cfg)
    if plan == "reuse":
        return "skip" if same and row.get("status") == "done" else "record"
    if plan == "resume" and stop_at is not None and same and row.get("status") == "stopped":
        epoch = (row.get("summary") or {}).get("epoch")
        if epoch == stop_at:
            return "skip"             # stopped here before: a screen rerun keeps it
        if isinstance(epoch, int) and epoch > stop_at:
            raise UserError(f"{path.name} was stopped at epoch {epoch:,}, past --stop-at {stop_at:,}: rerun with "
                            f"--stop-at {epoch} (or later), or without --stop-at to finish the runs")
    return plan


def _refuse_overwrite(path: Path, cfg: TrainConfig) -> None:
    """A sweep never replaces a finished (or resumable) run trained with another config: that
    happens when the package's defaults changed since the sweep started, and retraining would
    throw the run away. UserError naming the keys that differ."""
    if not path.exists():
        return
    try:
        with runfile.open_for_reading(path) as f:
            old = runfile.read_config(f)
    except RunFileError:
        warn(f"{path} is not a readable run file (killed while being created?): training it anew")
        return
    if loop.run_status(path) != "complete" and not loop.checkpoint_path(path).exists():
        return
    new = loop.config_dict(cfg)
    diff = loop.changed_keys(old, new)
    if not diff:
        return
    shown = ", ".join(f"{k}={old.get(k, '(absent)')} (this sweep: {new.get(k, '(absent)')})" for k in diff[:4])
    fix = " ".join(f"--set {k}={old[k]}" for k in diff[:4] if k in old)
    raise UserError(f"{path} was trained with {shown}{' …' if len(diff) > 4 else ''}; a sweep does not replace "
                    f"it: rerun with {fix} (the defaults may have changed since), or choose a new --out")


def _check_settings(out: Path, experiment: str, settings: dict) -> str:
    """'new' (no sweep.json yet), 'same' (the recorded settings), or 'changed': other settings
    for the same experiment, accepted only if they make exactly the configs of the folder's run
    files (`_runs_match`, e.g. `--set refine_prune=0.25` for runs trained when 0.25 was the
    default). UserError for another experiment or an unreadable sweep.json."""
    path = out / SETTINGS_FILE
    if out.exists() and not out.is_dir():
        raise UserError(f"output folder {out} is a file; remove it or choose another --out")
    if not path.exists():
        return "new"
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is unreadable ({' '.join(str(exc).split())}); remove it and rerun "
                        "this command to rewrite it, or choose a new --out") from None
    if old.get("experiment") != experiment:
        raise _settings_error(out, experiment, settings)
    return "same" if old.get("settings") == json.loads(json.dumps(settings)) else "changed"


def _settings_error(out: Path, experiment: str, settings: dict) -> UserError:
    old = json.loads((out / SETTINGS_FILE).read_text(encoding="utf-8"))
    if old.get("experiment") != experiment:
        return UserError(f"{out} holds a sweep of {old.get('experiment')}, not {experiment}: choose a new --out")
    was, now = old.get("settings") or {}, json.loads(json.dumps(settings))
    keys = loop.changed_keys(was, now)
    diff = ", ".join(f"{k}={was.get(k, '(unset)')} there, {now.get(k, '(unset)')} here" for k in keys)
    return UserError(f"{out} holds a sweep of {experiment} with other fixed settings ({diff}): rerun with its "
                     f"--set/--config values, or choose a new --out")


def _runs_match(out: Path, base: TrainConfig, runs: list[PlannedRun]) -> bool:
    """Every run file in `out` (at least one) has the config this sweep gives it: a planned run's
    exactly, or, for a run of another seed, `base` with one of this grid's values for each grid key."""
    planned = {r.path.name: loop.config_dict(r.cfg) for r in runs}
    grid_values: dict[str, list] = {}
    for r in runs:
        for k, v in json.loads(json.dumps(r.grid)).items():
            grid_values.setdefault(k, []).append(v)
    want = loop.config_dict(base)
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
        elif any(k != "seed" and (have.get(k) not in grid_values[k] if k in grid_values else have.get(k) != want.get(k))
                 for k in set(have) | set(want)):
            return False
    return bool(files)


# ----------------------------------------------------------------------------- jobs (run in workers)

@dataclass
class Job:
    """Runs trained by one worker process: one run, or several new ones as one batch."""
    experiment: str
    runs: list[PlannedRun]
    batched: bool = False


def make_jobs(plan: Plan, workers: int, batch: int | None = None) -> list[Job]:
    """New runs whose configs can share a batch (`Task.batching().key`) go in batches of at most
    `batch` runs (default: `max_size`, what pays for the config), cut so that every worker gets
    work; every other run is a job of its own."""
    batching = experiments.get(plan.experiment).batching()
    groups: dict = {}
    jobs = []
    for r in plan.todo:
        if r.action == "new" and batching is not None and r.stop_at is None and r.fork_from is None:
            groups.setdefault(batching.key(r.cfg), []).append(r)
        else:
            jobs.append(Job(plan.experiment, [r]))
    for runs in groups.values():
        cap = batch or batching.max_size(runs[0].cfg)
        cap = max(1, min(cap, math.ceil(len(runs) / workers)))
        for i in range(0, len(runs), cap):
            chunk = runs[i:i + cap]
            jobs.append(Job(plan.experiment, chunk, batched=len(chunk) > 1))
    order = {r.name: i for i, r in enumerate(plan.runs)}
    return sorted(jobs, key=lambda j: order[j.runs[0].name])


def summarise(experiment: str, path: Path) -> tuple[dict, dict]:
    """(final metrics, the family's `sweep_summary`) of a finished run file, read by the
    rendering side."""
    from headmovies.runfile.reader import Run
    report = importlib.import_module(f"headmovies.render.{tasks.experiments()[experiment]}.report")
    with Run(path) as run:
        metrics = {k: float(v[-1]) for k, v in run.metrics().items() if k != "epoch" and len(v)}
        return metrics, report.sweep_summary(run)


def forked_from(path: Path) -> str | None:
    """'SOURCE@EPOCH' (SOURCE relative to the run's folder) for a run started with --fork-from."""
    from headmovies import runfile
    with runfile.open_for_reading(path) as f:
        value = f.attrs.get("forked_from")
    if value is None:
        return None
    fork = json.loads(value)
    return f"{fork['run']}@{fork['epoch']}"


def make_row(experiment: str, r: PlannedRun, seconds: float, batch: int, error: BaseException | None = None) -> dict:
    """The sweep.jsonl row of one run; reads the run file when it finished."""
    row = {"run": r.name, "file": r.path.name, "experiment": experiment, "seed": r.seed, "grid": r.grid,
           "status": "done", "error": None, "action": r.action, "metrics": None, "summary": None,
           "forked_from": None}
    if error is None:
        try:
            row["forked_from"] = forked_from(r.path)
            row["metrics"], row["summary"] = summarise(experiment, r.path)
        except Exception as exc:        # the run trained but its summary failed: record that, go on
            error = exc
        if r.stop_at is not None:
            row["status"] = "stopped"   # at --stop-at: the summary is of that snapshot; a rerun without it continues
    if error is not None:
        row["status"], row["error"] = "failed", one_line(error)
    row.update(seconds=round(seconds, 2), batch=batch, host=socket.gethostname(), config=loop.config_dict(r.cfg))
    return row


def run_job(job: Job) -> list[dict]:
    """Train the job's runs (one torch thread) and return their rows. Never raises for a
    failing run: its row carries the error."""
    with interrupts_in_pool_jobs():      # a pool worker ignores Ctrl-C between jobs
        return _run_job(job)


def _run_job(job: Job) -> list[dict]:
    import torch
    from tqdm import tqdm
    torch.set_num_threads(1)
    # tqdm's default lock is a multiprocessing lock; one in a spawned worker that Ctrl-C stops
    # is reported as leaked at exit. Workers show no bars, so a thread lock does.
    tqdm.set_lock(threading.RLock())
    if job.batched:
        from headmovies.train.batch_loop import train_batch
        t0 = time.perf_counter()
        try:
            results = train_batch(job.experiment, [r.cfg for r in job.runs], [r.path for r in job.runs])
        except Exception as exc:
            results = [exc] * len(job.runs)
        seconds = time.perf_counter() - t0
        return [make_row(job.experiment, r, seconds, len(job.runs), res if isinstance(res, BaseException) else None)
                for r, res in zip(job.runs, results)]
    rows = []
    for r in job.runs:
        t0, error = time.perf_counter(), None
        try:
            if r.action in ("new", "resume"):
                loop.train(job.experiment, r.cfg, r.path, resume=r.action == "resume", force=r.action == "new",
                           progress=False, stop_at=r.stop_at, fork_from=r.fork_from if r.action == "new" else None)
        except Exception as exc:
            error = exc
        rows.append(make_row(job.experiment, r, time.perf_counter() - t0, 1, error))
    return rows


def failed_rows(job: Job, exc: BaseException) -> list[dict]:
    """Rows for a job whose worker died or could not run it."""
    return [make_row(job.experiment, r, 0.0, len(job.runs), exc) for r in job.runs]


# ----------------------------------------------------------------------------- backends

def default_workers() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_local(jobs: list[Job], workers: int, on_rows: Callable[[list[dict]], None]) -> None:
    """Run the jobs in a pool of `workers` spawned processes, one torch thread each (with one
    worker, in this process). A script calling this needs the `if __name__ == "__main__":`
    guard that spawned processes need."""
    if workers == 1:
        for job in jobs:
            on_rows(run_job(job))
        return
    os.environ["OMP_NUM_THREADS"] = "1"            # inherited by the spawned workers
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=ignore_between_jobs)
    try:
        futures = {pool.submit(run_job, job): job for job in jobs}
        for future in as_completed(futures):
            try:
                rows = future.result()
            except Exception as exc:     # BrokenProcessPool: a worker was killed (e.g. out of memory)
                rows = failed_rows(futures[future], UserError(f"its worker process died ({one_line(exc)})"))
            on_rows(rows)
    except BaseException:            # Ctrl-C, SIGTERM: stop the workers as Ctrl-C stops `train`
        pool.shutdown(wait=False, cancel_futures=True)
        children = multiprocessing.active_children()          # the pool's workers
        # A terminal's Ctrl-C reached them too: give them time to stop their runs at a snapshot,
        # since a second SIGINT from here would stop them at once, without that checkpoint.
        deadline = time.monotonic() + 3
        for child in children:
            child.join(timeout=max(0.0, deadline - time.monotonic()))
        for child in children:
            if child.is_alive():
                with contextlib.suppress(ProcessLookupError):   # it ended just now
                    os.kill(child.pid, signal.SIGINT)           # their run files close, resumable
        for child in children:
            child.join(timeout=10)
            if child.is_alive():
                child.terminate()
        pool.shutdown(wait=True)
        raise
    pool.shutdown()


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """UserError unless a TCP connection to the host:port of `address` ('HOST:PORT' or
    'ray://HOST:PORT') opens within `timeout` seconds: Ray itself may wait for minutes."""
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise UserError(f"--address {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379 or ray://10.0.0.5:10001) or auto")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise UserError(f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}); start one with "
                        "`ray start --head` there, or fix --address") from None


def connect_ray(address: str | None, workers: int | None) -> None:
    """Start a local Ray instance (address None) or connect to a cluster. UserError if Ray is
    not installed or the cluster cannot be reached."""
    if importlib.util.find_spec("ray") is None:
        raise UserError(f"--backend ray needs Ray, an optional extra: {RAY_INSTALL}")
    if address is not None and address != "auto":
        _check_reachable(address)
    import logging

    import ray
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ray.init(address=address, num_cpus=workers if address is None else None, include_dashboard=False,
                 logging_level=logging.ERROR, log_to_driver=False)
    except Exception as exc:
        raise UserError(f"cannot start or reach Ray{f' at {address}' if address else ''}: {one_line(exc)}") from None
    finally:
        for sig, handler in handlers.items():      # Ray's own SIGTERM handler aborts the driver
            signal.signal(sig, handler)


def run_ray(jobs: list[Job], workers: int | None, on_rows: Callable[[list[dict]], None]) -> None:
    """Run the jobs as Ray tasks (1 CPU each), at most `workers` at a time (default: the
    cluster's CPUs). Needs `connect_ray` first."""
    import ray
    task = ray.remote(num_cpus=1, max_retries=0)(run_job)
    limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    queue, running = list(jobs), {}
    try:
        while queue or running:
            while queue and len(running) < limit:
                job = queue.pop(0)
                running[task.remote(job)] = job
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                job = running.pop(ref)
                try:
                    rows = ray.get(ref)
                except Exception as exc:       # the task's worker died, or the node was lost
                    rows = failed_rows(job, UserError(f"its Ray task failed ({one_line(exc)})"))
                on_rows(rows)
    except BaseException:
        for ref in running:
            ray.cancel(ref, force=True)
        raise


# ----------------------------------------------------------------------------- the sweep

@dataclass
class SweepResult:
    out: Path
    done: int = 0
    failed: int = 0
    skipped: int = 0
    forked: int = 0                  # runs forked from another sweep's runs (and done) in this pass
    seconds: float = 0.0
    reports: list[Path] = field(default_factory=list)


def sweep(experiment: str, out: str | os.PathLike, *, seeds: list[int] | None = None,
          grid: list[tuple[str, list[str]]] = (), sets: dict[str, str] | None = None, toml: dict | None = None,
          backend: str = "local", workers: int | None = None, address: str | None = None,
          batch: int | None = None, progress: bool = True, stop_at: int | None = None,
          fork_from: str | os.PathLike | None = None) -> SweepResult:
    """Train every run of the sweep that is not complete, append a row per run to
    DIR/sweep.jsonl, then write DIR/summary.md and DIR/census.{png,svg}.

    Everything is checked before anything is created: UserError for bad input (see
    `make_plan`), workers or batch < 1, --address without Ray, Ray missing or unreachable."""
    from headmovies.render.core.outputs import prepare_out_dir
    if backend not in ("local", "ray"):
        raise UserError(f"--backend must be local or ray, got {backend!r}")
    for flag, value in (("--workers", workers), ("--batch", batch)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be >= 1, got {value}")
    if address is not None and backend != "ray":
        raise UserError("--address is for --backend ray")
    if fork_from is not None and not Path(fork_from).is_dir():
        raise UserError(f"--fork-from {fork_from} is not a folder; give the folder of the sweep to fork from")
    plan = make_plan(experiment, out, seeds, list(grid), dict(sets or {}), toml, stop_at, fork_from)
    if backend == "ray":
        connect_ray(address, workers)
    try:
        out = prepare_out_dir(plan.out)
        with open(out / LOCK_FILE, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise UserError(f"another sweep is running in {out}; wait for it or choose a new --out") from None
            return _run(plan, backend, workers, batch, progress)
    finally:
        if backend == "ray":
            import ray
            ray.shutdown()


def _run(plan: Plan, backend: str, workers: int | None, batch: int | None, progress: bool) -> SweepResult:
    """The sweep in its (created, locked) folder: jobs, backend, rows, then the report."""
    from tqdm import tqdm

    from headmovies.sweeps import report as sweep_report
    from headmovies.render.core.outputs import write_text
    out, experiment = plan.out, plan.experiment
    if plan.new_settings:
        write_text(out / SETTINGS_FILE, json.dumps({"experiment": experiment, "settings": plan.settings},
                                                   indent=1, sort_keys=True) + "\n")
    result = SweepResult(out, skipped=len(plan.runs) - len(plan.todo))
    n_workers = workers or default_workers()
    if backend == "ray" and workers is None:
        import ray
        n_workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    jobs = make_jobs(plan, n_workers, batch)
    t0 = time.perf_counter()
    bar = tqdm(total=len(plan.todo), desc=f"sweep {experiment}", unit="run", disable=not progress,
               dynamic_ncols=True, smoothing=0)

    def on_rows(rows: list[dict]) -> None:
        rows_path = out / ROWS_FILE
        if rows_path.exists() and rows_path.stat().st_size:
            with open(rows_path, "rb") as fh:          # a line cut short by a kill: end it, so the
                fh.seek(-1, os.SEEK_END)             # next row starts on a line of its own
                cut = fh.read(1) != b"\n"
            if cut:
                with open(rows_path, "a", encoding="utf-8") as fh:
                    fh.write("\n")
        with open(rows_path, "a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        for row in rows:
            if row["status"] in ("done", "stopped"):
                result.done += 1
                result.forked += row["action"] == "new" and row.get("forked_from") is not None
            else:
                result.failed += 1
                bar.write(f"failed: {row['run']}: {row['error']}")
        bar.set_postfix(done=result.done, failed=result.failed, refresh=False)
        bar.update(len(rows))

    try:
        if jobs:
            (run_ray(jobs, workers, on_rows) if backend == "ray"
             else run_local(jobs, min(n_workers, len(jobs)), on_rows))
    finally:                # also after Ctrl-C: the table and census of the runs finished so far
        bar.close()
        result.seconds = time.perf_counter() - t0
        family = importlib.import_module(f"headmovies.render.{tasks.experiments()[experiment]}.report")
        result.reports = sweep_report.write_report(out, read_rows(out / ROWS_FILE), experiment,
                                                   family.SWEEP_OUTCOME, plan.settings)
    return result

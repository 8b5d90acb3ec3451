"""`headmovies sweep EXPERIMENT --out DIR ...`: train a grid of seeds and configs, with a table and a census figure."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "sweep"
HELP = "train a grid of seeds and configs on local cores or a Ray cluster, with a table and a census figure"
DESCRIPTION = """\
Train EXPERIMENT for every seed and every point of the grid, one ordinary run file per run in
DIR (named from its seed and grid point, e.g. seed3-eq_weight10.h5; every render command reads
it). After each run a row goes into DIR/sweep.jsonl (config, final metrics, wall time and the
experiment's own summary, e.g. the orbit check); at the end DIR/summary.md groups the runs by
config across seeds and DIR/census.png shows the outcomes (e.g. orbit structures) per config.

Rerunning the same command skips complete runs, resumes incomplete ones and trains the rest; a
changed grid adds only its new runs. A failed run is recorded with its error and the sweep goes
on. Runs of small models that share their shapes train several to a process as one batched
computation. Exit code 0 when every run finished, 1 when some failed, 2 for bad input.
Docs: docs/sweeps.md.

examples:
  headmovies sweep orbits --out data/sweeps/s0-7 --seeds 0-7 --set epochs=2000
  headmovies sweep orbits --out data/sweeps/eq --seeds 0-3 --grid eq_weight=1,10,100 \\
      --grid split=orbit,random
  headmovies sweep orbits --out data/sweeps/prune-only --seeds 0-7 --set refine_prune=0.25 \\
      --set refine_ov_bias_weight=0 --fork-from data/sweeps/seed-objective
  headmovies sweep orbits --out /shared/sweep --seeds 0-199 --backend ray \\
      --address 10.0.0.5:6379"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", help="registered experiment name (see `headmovies train --help`)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder of the sweep's run files and tables")
    p.add_argument(
        "--seeds",
        metavar="SEEDS",
        help="seeds: a range 0-199, a list 0,3,5, or both 0-3,10 (default: the experiment's seed)",
    )
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="train every value of KEY (repeatable: the product of all grids; values with commas: "
        "separate them with ';')",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="sets",
        help="fix one config key for every run (repeatable)",
    )
    p.add_argument("--config", type=Path, metavar="FILE.toml", help="TOML file of fixed key = value settings")
    p.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="local: a pool of processes on this machine (default); ray: Ray tasks on a local Ray "
        "instance or the cluster at --address (pip install -e .[ray])",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes (local) or concurrent Ray tasks, one torch thread each "
        "(default: this machine's cores, or the Ray cluster's CPUs)",
    )
    p.add_argument(
        "--address",
        metavar="ADDR",
        help="Ray cluster to use, HOST:PORT, ray://HOST:PORT or auto (default: start a local instance); "
        "DIR must be on a filesystem every node sees",
    )
    p.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help="train at most N new runs per process as one batched computation (default: as many as "
        "pay on a CPU for the config, 1 for the default orbit model; 1 = one run per process)",
    )
    p.add_argument(
        "--stop-at",
        type=int,
        metavar="EPOCH",
        help="train each run's schedule only through this snapshot epoch and record it as stopped "
        "(an early screen); rerunning without --stop-at continues the runs chosen with --seeds",
    )
    p.add_argument(
        "--fork-from",
        type=Path,
        metavar="SRC_DIR",
        help="the folder of another sweep: each new run starts at its fork epoch (the orbit experiment: "
        "refine_start) from the run there of the same name, or else of the same seed and a config "
        "differing only in what acts after the fork, when that run got so far; else it trains "
        "from scratch; the same runs either way, bit for bit, for a fraction of the time "
        '(docs/sweeps.md, "Forks")',
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from headmovies.sweeps.plan import parse_grid, parse_seeds
    from headmovies.sweeps.sweep import sweep
    from headmovies.sweeps.sweep_rows import ROWS_FILE
    from headmovies.train import config

    seeds = parse_seeds(args.seeds) if args.seeds is not None else None
    grid = parse_grid(args.grid)
    toml = config.load_toml(args.config) if args.config else None
    try:
        res = sweep(
            args.experiment,
            args.out,
            seeds=seeds,
            grid=grid,
            sets=config.parse_sets(args.sets),
            toml=toml,
            backend=args.backend,
            workers=args.workers,
            address=args.address,
            batch=args.batch,
            progress=not args.no_progress,
            stop_at=args.stop_at,
            fork_from=args.fork_from,
        )
    except KeyboardInterrupt:
        rows = Path(args.out) / ROWS_FILE
        done = f"finished runs are recorded in {rows}" if rows.exists() else "no run finished"
        print(f"interrupted: {done}; rerun the same command to resume", file=sys.stderr)
        return 130
    ended = f"stopped at epoch {args.stop_at}" if args.stop_at else "done"
    print(
        f"{args.out}: {res.done} run{'' if res.done == 1 else 's'} {ended}, "
        f"{res.failed} failed, {res.skipped} skipped (complete, or stopped there before), "
        f"in {res.seconds:.1f} s" + (f"; {res.forked} forked from {args.fork_from}" if args.fork_from else "")
    )
    for path in res.outcome_files:  # paths as given, as every command prints them
        print(f"  {_as_given(Path(path), res.out, Path(args.out))}")
    return 1 if res.failed else 0


def _as_given(path: Path, out: Path, given: Path) -> Path:
    """`path` under the sweep folder `out` (absolute), spelled under `given` (--out as typed)."""
    try:
        return given / path.relative_to(out)
    except ValueError:
        return path

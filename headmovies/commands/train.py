"""`headmovies train EXPERIMENT ...`: train a registered experiment into a run file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from headmovies.errors import UserError

NAME = "train"
HELP = "train an experiment, streaming its head weights into an HDF5 run file"
DESCRIPTION = (
    "Train EXPERIMENT, streaming snapshots into the run file --out\n"
    "(crash-safe, readable while it grows; docs/run-file.md)."
)


def _epilog() -> str:
    from headmovies.train import config, experiments  # torch: only when `train --help` is asked

    parts = ["experiments and their config keys (override with --config FILE.toml or --set KEY=VALUE):"]
    for name, cls in experiments.all_experiments().items():
        parts.append(f"\n{name}: {cls.description}\n{config.describe(cls.Config)}")
    return "\n".join(parts)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", help="registered experiment name (listed below)")
    p.add_argument("--out", type=Path, help="run file (default data/EXPERIMENT.h5)")
    p.add_argument("--config", type=Path, metavar="FILE.toml", help="TOML file of key = value overrides")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="sets",
        help="override one config key (repeatable; applied after --config)",
    )
    p.add_argument("--resume", action="store_true", help="continue a killed or shorter run from its checkpoint")
    p.add_argument("--force", action="store_true", help="replace an existing run file")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="keep a complete run file with the same config, resume an incomplete one, "
        "else train anew, moving a run of another config (or an incomplete one without its checkpoint) "
        "to NAME.previous.h5 first "
        "(what `make movie` uses)",
    )
    p.add_argument(
        "--stop-at",
        type=int,
        metavar="EPOCH",
        help="train the config's schedule only through this snapshot epoch, then stop with a "
        "checkpoint (continue later with --resume or --reuse): an early screen of a full run",
    )
    p.add_argument(
        "--fork-from",
        type=Path,
        metavar="RUN.h5",
        help="start from this run's snapshot at the epoch where this config's run can fork (the orbit "
        "experiment: refine_start, a snapshot epoch), copying its records through that epoch: the same "
        "run as training from scratch, for the cost of the epochs after the fork; the configs may differ only in what "
        'acts after it (docs/sweeps.md, "Forks")',
    )
    p.add_argument(
        "--checkpoint-every",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="replace the resume checkpoint at most this often (default 30; 0 = every snapshot)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: the models are small, and one thread is fastest whenever anything "
        "else runs on the machine; `make movie` passes 2, for an idle machine). The orbit experiment "
        "uses them only for epochs with the grid term alone (its first phase): more threads change "
        "the bits of the epochs with sequence terms, so those run on one thread (a term each with "
        "--overlap)",
    )
    p.add_argument(
        "--overlap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compute independent loss terms at once in a second thread: in the orbit experiment, the grid "
        "term beside the sequence terms (the second phase; also the first with eq_seq_lens; not with "
        "residual), 1.1-1.4x faster per such epoch on two free cores, each term on one thread, the "
        "same bits as without it (default: on when this process may use 2 or more cores, busy or "
        "not: pass --no-overlap when other jobs hold the cores)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    plain_help = p.format_help

    def format_help() -> str:  # the experiment list imports torch: build it only for --help
        p.epilog = _epilog()
        return plain_help()

    p.format_help = format_help  # type: ignore[method-assign]  # the epilog is built on demand


MAX_THREADS = 256


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.threads <= MAX_THREADS:
        raise UserError(f"--threads must be in 1..{MAX_THREADS}, got {args.threads}")
    import torch

    from headmovies.sweeps.backend_local import default_workers
    from headmovies.train import config, experiments, loop, reuse

    torch.set_num_threads(args.threads)
    task_cls = experiments.get(args.experiment)
    toml = config.load_toml(args.config) if args.config else None
    cfg = config.resolve(task_cls.Config, toml, config.parse_sets(args.sets))
    out = args.out or Path("data") / f"{args.experiment}.h5"
    resume, force, fork_from = args.resume, args.force, args.fork_from
    loop.check_stop_at(cfg, args.stop_at)
    if args.reuse and (args.force or args.resume):
        others = " or ".join(o for o, given in (("--force", args.force), ("--resume", args.resume)) if given)
        raise UserError(
            f"--reuse chooses by itself whether to keep, continue or replace the run: give it without {others}"
        )
    if args.reuse:
        plan = reuse.reuse_plan(out, cfg)
        if plan == "reuse":
            print(f"{out}: complete run with this config, reused (pass --force instead of --reuse to train anew)")
            return 0
        resume, force = plan == "resume", plan == "new"
        fork_from = None if resume else fork_from  # a forked run already under way just continues
    overlap = args.overlap if args.overlap is not None else default_workers() >= 2
    try:
        result = loop.train(
            args.experiment,
            cfg,
            out,
            resume=resume,
            force=force,
            progress=not args.no_progress,
            checkpoint_seconds=args.checkpoint_every,
            stop_at=args.stop_at,
            fork_from=fork_from,
            keep_other=args.reuse,
            overlap=overlap,
        )
    except KeyboardInterrupt:
        if out.exists():
            print(
                f"interrupted: {out} holds every snapshot so far; continue with --resume "
                f"(`headmovies recover {out}` writes a closed copy for other HDF5 tools)",
                file=sys.stderr,
            )
        else:
            print(f"interrupted before the first snapshot: nothing was written to {out}", file=sys.stderr)
        return 130
    stopped = " (stopped at --stop-at; continue with --resume)" if result.epochs < cfg.epochs else ""
    if result.overlapped_steps:
        stopped += f"; {result.overlapped_steps:,} epochs overlapped their grid term"
    elif args.overlap:
        stopped += "; --overlap had no effect (no epoch of this run has terms to overlap)"
    # after --resume or a fork, the time and the overlapped count cover only this call's epochs
    if result.start >= result.epochs:
        done = f"already at epoch {result.epochs:,}, nothing to train"
    elif result.start:
        done = f"epochs {result.start + 1:,}-{result.epochs:,} in {result.seconds:.1f} s"
    else:
        done = f"{result.epochs:,} epochs in {result.seconds:.1f} s"
    print(f"{result.path}: {result.summary}, {done}{stopped}")
    return 0

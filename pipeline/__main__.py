"""`python -m pipeline train EXPERIMENT ...`: train a registered experiment into a run file."""
from __future__ import annotations

import argparse
import os
import signal
import sys

# With more threads than free cores, OpenMP threads that spin at barriers slow these small
# models down ~30x (measured); sleeping threads cost little. Must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
from pathlib import Path

from runfile import UserError


def _epilog() -> str:
    from pipeline import config, experiments
    parts = ["experiments and their config keys (override with --config FILE.toml or --set KEY=VALUE):"]
    for name, cls in experiments.all_experiments().items():
        parts.append(f"\n{name}: {cls.description}\n{config.describe(cls.Config)}")
    return "\n".join(parts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline",
                                     description="Train tiny attention-only transformers and stream "
                                                 "their head weights into an HDF5 run file.")
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train an experiment into a run file",
                        description="Train EXPERIMENT, streaming snapshots into the run file --out.",
                        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    tr.add_argument("experiment", help="registered experiment name (listed below)")
    tr.add_argument("--out", type=Path, help="run file (default data/EXPERIMENT.h5)")
    tr.add_argument("--config", type=Path, metavar="FILE.toml", help="TOML file of key = value overrides")
    tr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                    help="override one config key (repeatable; applied after --config)")
    tr.add_argument("--resume", action="store_true", help="continue a killed or shorter run from its checkpoint")
    tr.add_argument("--force", action="store_true", help="replace an existing run file")
    tr.add_argument("--reuse", action="store_true",
                    help="keep a complete run file with the same config, resume an incomplete one, "
                         "else train anew (what `make movie` uses)")
    tr.add_argument("--checkpoint-every", type=float, default=30.0, metavar="SECONDS",
                    help="replace the resume checkpoint at most this often (default 30; 0 = every snapshot)")
    tr.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: the models are small, and one thread is fastest "
                         "whenever anything else runs on the machine)")
    tr.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _interrupt(signum, frame):
    """SIGTERM unwinds like Ctrl-C, so temporary outputs are removed and run files closed."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        import torch
        from pipeline import config, experiments, train
        if args.threads < 1:
            raise UserError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
        task_cls = experiments.get(args.experiment)
        toml = config.load_toml(args.config) if args.config else None
        cfg = config.resolve(task_cls.Config, toml, config.parse_sets(args.sets))
        out = args.out or Path("data") / f"{args.experiment}.h5"
        resume, force = args.resume, args.force
        if args.reuse:
            plan = train.reuse_plan(out, cfg)
            if plan == "reuse":
                print(f"{out}: complete run with this config, reused (make retrain to train anew)")
                return 0
            resume, force = plan == "resume", plan == "new"
        result = train.train(args.experiment, cfg, out, resume=resume, force=force,
                             progress=not args.no_progress, checkpoint_seconds=args.checkpoint_every)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the run file holds every snapshot so far; continue with --resume", file=sys.stderr)
        return 130
    print(f"{result.path}: {result.summary}, {result.epochs} epochs in {result.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

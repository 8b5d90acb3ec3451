"""Training speed of the induction experiments (source 003): optimizer steps per second.

    .venv/bin/python bench/induction_speed.py [--steps 300] [--threads 1]

Times `Task.step` (fresh batch of 256, forward, backward, AdamW) for each variant, after a
short warm-up, and prints steps/s and the projected time of a 10,000-step run.
"""

from __future__ import annotations

import argparse
import time

import torch

from headmovies.train import experiments
from headmovies.train.config import resolve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for name in ("induction-1l", "induction-smeared", "induction-2l"):
        cls = experiments.get(name)
        cfg = resolve(cls.Config)
        torch.manual_seed(0)
        task = cls(cfg)
        for e in range(20):
            task.step(e + 1)
        t0 = time.perf_counter()
        for e in range(args.steps):
            task.step(e + 21)
        dt = time.perf_counter() - t0
        t1 = time.perf_counter()
        task.evaluate()
        ev = time.perf_counter() - t1
        rate = args.steps / dt
        print(
            f"{name:18s} {rate:7.1f} steps/s  ({1e3 / rate:.2f} ms/step, eval {1e3 * ev:.1f} ms) "
            f"-> {cfg.epochs} steps in {cfg.epochs / rate:.0f} s  [{args.threads} thread(s)]"
        )


if __name__ == "__main__":
    main()

"""Training speed of the OV-coherent superposition experiment (source 004): optimizer steps per second.

    .venv/bin/python bench/ov_coherent_speed.py [--steps 500] [--threads 1]

Times `Task.step` (fresh batch, forward, backward, Adam) for 2 heads x d_head 1 and 1 head x
d_head 4 at a few batch sizes, and `Task.evaluate` (the exact expectation over all 17,160
(class, noise multiset) cases of L = 10); prints steps/s and the projected time of a default run.
"""

from __future__ import annotations

import argparse
import time

import torch

from headmovies.train import experiments
from headmovies.train.config import resolve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cls = experiments.get("ov-coherent")
    default_epochs = resolve(cls.Config).epochs
    for heads, d_head in ((2, 1), (1, 4)):
        for batch in (128, 256, 1024):
            cfg = resolve(cls.Config, sets={"n_heads": str(heads), "d_head": str(d_head), "batch": str(batch)})
            torch.manual_seed(0)
            task = cls(cfg)
            for e in range(20):  # warm-up
                task.step(e + 1)
            t0 = time.perf_counter()
            for e in range(args.steps):
                task.step(e + 21)
            rate = args.steps / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            task.evaluate()
            ev = time.perf_counter() - t0
            print(
                f"{heads} head(s) x d_head {d_head}, batch {batch:4d}: {rate:6.0f} steps/s, "
                f"evaluate {ev * 1e3:5.1f} ms, {default_epochs} steps ~ {default_epochs / rate:5.1f} s "
                f"(+ snapshots)"
            )


if __name__ == "__main__":
    main()

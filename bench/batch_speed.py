"""Many orbit models per process: model-epochs per second per core of the batched orbit trainer
(`headmovies/train/orbits/batch.py`) at B = 1, 4, 16, 64 instances, against B = 1 and against the
single-run trainer (`OrbitTask.step`), in one run (docs/benchmarks.md, "Many models per process").

Each size trains B seeds of one config for a few steps at the same epoch (by default the first
phase with the equivariance term at full weight); timings interleave the sizes round by round
and the best round counts. Options:

    .venv/bin/python bench/batch_speed.py [--set KEY=VALUE ...] [--sizes 1,4,16,64] [--epoch E]
        [--seconds 3] [--rounds 2] [--threads 1] [--device cpu] [--profile] [--check EPOCHS]

--profile prints torch.profiler's operator table at B = 1 and at the largest B (where batching
does not pay, it shows why: per-element work that grows with B, not per-call overhead).
--check EPOCHS trains 4 instances for EPOCHS epochs batched and one by one, and prints the
largest relative weight difference (0 when they are equal bit for bit).
"""

from __future__ import annotations

import argparse
import time

import torch

from headmovies.train import config
from headmovies.train.orbits.batch import OrbitBatch
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.task import OrbitTask


def configs(sets: dict, n: int) -> list[OrbitConfig]:
    return [config.resolve(OrbitConfig, sets={**sets, "seed": str(s)}) for s in range(n)]


def seconds_per_step(step, epoch: int, budget: float, device: str = "cpu") -> float:
    """Mean seconds of step(epoch) over as many calls as fit in `budget` seconds (at least 2).
    On a GPU the queued work is waited for before the clock starts and before it stops."""
    wait = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    step(epoch)  # warm up (allocator, first-call paths)
    wait()
    calls, t0 = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - t0 < budget:
        step(epoch)
        calls += 1
    wait()
    return (time.perf_counter() - t0) / calls


def profile(batch: OrbitBatch, epoch: int, rows: int = 12) -> str:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof

    batch.step(epoch)
    with prof(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(2):
            batch.step(epoch)
    return p.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows)


def check(sets: dict, epochs: int, device: str) -> None:
    cfgs = configs({**sets, "epochs": str(epochs)}, 4)
    batch = OrbitBatch(cfgs, device)
    wait = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    t0 = time.perf_counter()
    for epoch in range(1, epochs + 1):
        batch.step(epoch)
    wait()  # the queued GPU work, before the clock stops
    t_batch = time.perf_counter() - t0
    worst, equal, t_single = 0.0, True, 0.0
    for i, cfg in enumerate(cfgs):
        torch.manual_seed(cfg.seed)
        single = OrbitTask(cfg)
        t0 = time.perf_counter()
        for epoch in range(1, epochs + 1):
            single.step(epoch)
        t_single += time.perf_counter() - t0
        view = batch.sync(i)
        for name, w in single.model.state_dict().items():
            v = view.model.state_dict()[name]
            equal &= torch.equal(w, v)
            worst = max(worst, float((w - v).abs().max() / w.abs().max().clamp_min(1e-30)))
    print(
        f"check: 4 instances x {epochs} epochs, batched ({t_batch:.1f} s) vs one by one ({t_single:.1f} s): "
        f"max relative weight difference {worst:.3g}" + (" (equal bit for bit)" if equal else "")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config key (default: the default)")
    ap.add_argument("--sizes", default="1,4,16,64", help="instances per batch (default 1,4,16,64)")
    ap.add_argument(
        "--epoch",
        type=int,
        help="epoch whose step is timed (default: eq_start + eq_ramp, the equivariance term at full weight)",
    )
    ap.add_argument("--seconds", type=float, default=3.0, help="time budget per size per round (default 3)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the best counts (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--device", default="cpu", help="device of the batched tensors (default cpu)")
    ap.add_argument("--profile", action="store_true", help="operator tables at B = 1 and the largest B")
    ap.add_argument("--check", type=int, default=0, metavar="EPOCHS", help="equality check over EPOCHS epochs")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sets = config.parse_sets(args.set)
    sizes = [int(b) for b in args.sizes.split(",")]
    cfg = configs(sets, 1)[0]
    epoch = args.epoch or cfg.eq_start + cfg.eq_ramp
    print(
        f"config: p={cfg.p} n_heads={cfg.n_heads} d_model={cfg.d_model} d_head={cfg.d_head} residual={cfg.residual}; "
        f"step of epoch {epoch} (lambda, sequence lengths, mu: {OrbitTask(cfg).schedule(epoch - 1)[2:]}); "
        f"threads={torch.get_num_threads()} device={args.device}"
    )
    batches = {b: OrbitBatch(configs(sets, b), args.device) for b in sizes}
    single = OrbitTask(cfg)  # the reference: one run on one CPU core (`threads`), as a sweep worker trains it
    best: dict = {}
    for _ in range(args.rounds):
        best["single"] = min(best.get("single", float("inf")), seconds_per_step(single.step, epoch, args.seconds))
        for b, batch in batches.items():
            best[b] = min(best.get(b, float("inf")), seconds_per_step(batch.step, epoch, args.seconds, args.device))
    base = best[sizes[0]] / sizes[0]
    gpu = args.device != "cpu"
    per = "model-epochs/s" if gpu else "model-epochs/s/core"
    print(f"{'B':>8} {'ms/step':>10} {per:>20} {f'vs B={sizes[0]}':>9} {'vs single':>10}")
    print(
        f"{'single':>8} {best['single'] * 1e3:10.1f} {1 / best['single'] / (1 if gpu else args.threads):20.1f} "
        f"{base / best['single']:8.2f}x {1:9.2f}x   (OrbitTask.step on the CPU)"
    )
    for b in sizes:
        rate = b / best[b] / (1 if gpu else args.threads)
        vs_single = b / best[b] * best["single"]  # model-epochs/s of the batch over the single run's
        print(f"{b:>8} {best[b] * 1e3:10.1f} {rate:20.1f} {base / (best[b] / b):8.2f}x {vs_single:9.2f}x")
    if gpu:
        print(
            f"(on {args.device}: rates of the whole device and of the whole single run; 'vs single': "
            f"how many single runs at {args.threads} CPU thread(s) it equals)"
        )
    if args.profile:
        for b in (sizes[0], sizes[-1]):
            print(f"\nprofile at B = {b} (2 steps):\n{profile(batches[b], epoch)}")
    if args.check:
        check(sets, args.check, args.device)


if __name__ == "__main__":
    main()

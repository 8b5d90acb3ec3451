"""Training speed of the orbit experiment: our grid trainer vs a straightforward reference.

Prints the CPU (model name, AVX-512 or not) and the load average before and after, then for each
thread count (default 1 and 2, the same count for both trainers), from one run at one config
(default: d_model 128, d_head 4, 32 heads, p 24, 30 % split):
  - epochs/s of the reference: per-sample forward (embed, 32-head attention with per-sample
    projections, unembed) on the whole train split, plus the equivariance term on 4,096 random
    inputs with one random shift each; AdamW step;
  - epochs/s of our trainer (`OrbitTask.step` at epoch 3,000, after lambda's ramp: the whole p^3
    grid from per-head QK/OV tables, cross-entropy on the train split and the exact equivariance
    loss over all inputs and all shifts, i.e. strictly more work than the reference);
  - their ratio, with the default fused kernels, and the same step with the eager kernel
    (grid_kernel=eager, the kernel of runs before 2026-12-08);
  - ms/epoch of our second phase (epoch 12,000: also the length-6 sequence term and the OV-bias
    penalty), one after the other and overlapped (`train --overlap`: the grid term in a second
    thread; needs a second free core), and the sequence term's forward and backward with its QK
    gather written as advanced indexing M[:, t_i, t_j] (the straightforward way), the eager form
    (index_select on flat cells, bit for bit the same gradients) and the fused form;
  - the streaming overhead: time to append one snapshot to a SWMR run file (and, separately, to
    evaluate the snapshot's metrics) as a fraction of the training time between two snapshots;
  - an estimate of the default run's training time at that thread count (`make movie` trains
    on 2): every first-phase epoch at epoch 3,000's cost (an upper bound: epochs before eq_start
    have no equivariance term), every second-phase epoch at epoch 12,000's (overlapped when the
    count is 2 or more, as `train` does on two cores), and one metrics evaluation and snapshot
    append per snapshot of the schedule.
Timings interleave the two trainers (ours, reference, ours, ...) so that load drifts hit both;
each figure is the best of `--rounds` rounds. On a shared machine, read the load average first.
OpenMP's threads sleep at barriers (OMP_WAIT_POLICY=PASSIVE, as `headmovies train` sets) unless
the environment says otherwise: `make movie` trains its first phase with OMP_WAIT_POLICY=ACTIVE,
so run the script that way too to time that phase's two threads.

    .venv/bin/python bench/train_speed.py [--epochs 30] [--rounds 3] [--threads 1,2]
    OMP_WAIT_POLICY=ACTIVE .venv/bin/python bench/train_speed.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

# as `headmovies train` does (headmovies/cli.py): sleeping OpenMP threads, so that two torch
# threads beside other work do not spin (set before torch is imported)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
from torch.nn import functional

from headmovies.runfile.writer import RunWriter
from headmovies.tasks.orbits import M_SHIFT, all_inputs, targets
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.losses import seq_eq_loss, seq_eq_loss_fused, seq_eq_loss_indexed
from headmovies.train.orbits.task import OrbitTask
from headmovies.train.schedule import config_schedule


class ReferenceTrainer:
    """The straightforward implementation, same model and optimiser as ours."""

    def __init__(self, task: OrbitTask, eq_batch: int = 4096):
        cfg = task.cfg
        self.model, self.cfg, self.eq_batch = task.model, cfg, eq_batch
        x = all_inputs(cfg.p)
        self.x_all = torch.from_numpy(x)
        self.x_train = torch.from_numpy(x[task.train_idx])
        self.y_train = torch.from_numpy(targets(x[task.train_idx], cfg.p))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.g = torch.Generator().manual_seed(0)

    def step(self) -> None:
        p = self.cfg.p
        logits = self.model(self.x_train)  # (B, 3, p)
        ce = functional.cross_entropy(logits.reshape(-1, p), self.y_train.reshape(-1))
        idx = torch.randint(0, p**3, (self.eq_batch,), generator=self.g)
        s = torch.randint(1, p, (self.eq_batch, 1), generator=self.g)
        x = self.x_all[idx]
        lp = self.model(x).log_softmax(-1)  # (B, 3, p)
        lp_s = self.model((x + s) % p).log_softmax(-1)
        cls = (torch.arange(p)[None, :] - M_SHIFT * s) % p  # roll_{ms}: out[c] = lp[c - ms]
        rolled = torch.gather(lp, 2, cls[:, None, :].expand(-1, 3, -1))
        eq = (lp_s - rolled).pow(2).sum((1, 2)).mean()
        loss = ce + self.cfg.eq_weight * eq
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


def seconds_per_call(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def cpu_line() -> str:
    """'CPU: <model name>, AVX-512 yes|no, N cores' from lscpu (or /proc/cpuinfo)."""
    model, flags = platform.processor() or "unknown", ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        model = fields.get("Model name", model).strip()
        flags = fields.get("Flags", "")
    except (OSError, subprocess.CalledProcessError):
        pass
    if not flags and Path("/proc/cpuinfo").exists():
        flags = next((ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")), "")
    avx512 = "yes" if "avx512f" in flags.split() else "no"
    return f"CPU: {model}, AVX-512 {avx512}, {os.cpu_count()} cores"


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f}, {five:.2f}, {fifteen:.2f} (1, 5, 15 min)"


def measure(cfg: OrbitConfig, threads: int, epochs: int, rounds: int) -> dict[str, float]:
    """Best-of-rounds seconds per call of each timed piece at `threads` torch threads."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ours = OrbitTask(cfg)
    torch.manual_seed(0)
    ref = ReferenceTrainer(OrbitTask(cfg))
    torch.manual_seed(0)
    overlapped = OrbitTask(cfg)
    torch.manual_seed(0)
    eager = OrbitTask(replace(cfg, grid_kernel="eager"))  # the kernel of runs before 2026-12-08
    ours.threads = overlapped.threads = eager.threads = threads
    # the overlapped step's second thread: not under active waits, where its idle OpenMP threads
    # would spin on a core beside every other piece (`make movie` overlaps only with passive waits)
    overlapped.overlap = threads > 1 and not active_waits()
    phase1, phase2 = 3000, 12000  # lambda at eq_weight; second phase with its sequence term
    M, R = (c.detach().requires_grad_() for c in ours.model.circuits())
    M2, v, OU = (c.detach().requires_grad_() for c in ours.model.circuit_factors())
    x = torch.randint(0, cfg.p, (cfg.eq_seq_batch, 6), generator=torch.Generator().manual_seed(0))

    def seq_fused():
        return seq_eq_loss_fused(M2, v, OU, x).backward()

    def seq_ours():
        return seq_eq_loss(M, R, x).backward()

    def seq_ref():
        return seq_eq_loss_indexed(M, R, x).backward()

    def step(task: OrbitTask, epoch: int):
        def run():
            task.step(epoch)
            torch.set_num_threads(threads)  # a second-phase step leaves this thread on one

        return run

    pieces = {
        "ours": (step(ours, phase1), epochs),
        "eager": (step(eager, phase1), epochs),
        "ref": (ref.step, max(3, epochs // 10)),
        "two": (step(ours, phase2), epochs),
        **({"over": (step(overlapped, phase2), epochs)} if overlapped.overlap else {}),
        "seq": (seq_ours, epochs),
        "seq_fused": (seq_fused, epochs),
        "seq_ref": (seq_ref, epochs),
    }
    for fn, _ in pieces.values():  # warm up
        for _ in range(3):
            fn()
    best = {name: float("inf") for name in pieces}
    for _ in range(rounds):
        for name, (fn, n) in pieces.items():
            best[name] = min(best[name], seconds_per_call(fn, n))

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.h5"
        writer = RunWriter.create(
            path,
            {"schema_version": 1, "experiment": "bench", "config": {}, "seed": 0, "created": "", "versions": {}},
            0,
            ours.snapshot(),
            ours.evaluate(),
            ours.split(),
        )
        metrics = ours.evaluate()
        best["write"] = seconds_per_call(lambda: writer.append(0, ours.snapshot(), metrics), 40)
        best["eval"] = seconds_per_call(ours.evaluate, 10)
        writer.close()
    return best


def report(cfg: OrbitConfig, threads: int, t: dict[str, float]) -> None:
    interval = cfg.early_every * t["ours"]  # training time between two snapshots (densest part of the schedule)
    print(f"--- {threads} torch thread{'s' if threads > 1 else ''}, both trainers")
    print(
        f"reference (per-sample, eq term on 4096 inputs): {1 / t['ref']:8.1f} epochs/s  "
        f"({t['ref'] * 1e3:7.1f} ms/epoch)"
    )
    print(
        f"ours (p^3 grid, eq term on all inputs x shifts): {1 / t['ours']:8.1f} epochs/s  "
        f"({t['ours'] * 1e3:7.1f} ms/epoch)"
    )
    print(f"speed-up, same threads: {t['ref'] / t['ours']:.1f}x")
    print(
        f"ours with the eager kernel (grid_kernel=eager, runs before 2026-12-08): {t['eager'] * 1e3:7.1f} ms/epoch "
        f"({t['ref'] / t['eager']:.1f}x the reference; the fused kernels {t['eager'] / t['ours']:.2f}x faster)"
    )
    print(
        f"ours, second phase (+ length-6 sequence term, OV-bias penalty): {t['two'] * 1e3:7.1f} ms/epoch "
        f"({t['two'] / t['ours']:.2f}x the first phase's)"
    )
    if "over" in t:
        print(
            f"ours, second phase overlapped (grid term in a second thread): {t['over'] * 1e3:7.1f} ms/epoch "
            f"({t['two'] / t['over']:.2f}x faster than one after the other)"
        )
    print(
        f"sequence term forward + backward: {t['seq_ref'] * 1e3:.2f} ms with advanced indexing and one-hot "
        f"tokens, {t['seq'] * 1e3:.2f} ms with index_select and scatter_add (eager, {t['seq_ref'] / t['seq']:.2f}x), "
        f"{t['seq_fused'] * 1e3:.2f} ms fused ({t['seq_ref'] / t['seq_fused']:.2f}x)"
    )
    print(
        f"streaming: {t['write'] * 1e3:.2f} ms per snapshot append = {t['write'] / interval:.2%} of training time "
        f"at one snapshot per {cfg.early_every} epochs"
    )
    print(f"metrics evaluation: {t['eval'] * 1e3:.2f} ms per snapshot = {t['eval'] / interval:.2%} of training time")
    first = cfg.refine_start if cfg.refines() else cfg.epochs
    second = cfg.epochs - first
    snaps = len(config_schedule(cfg))
    t1, t2, t3 = first * t["ours"], second * t.get("over", t["two"]), snaps * (t["eval"] + t["write"])
    print(
        f"default run's training, estimated: {t1 + t2 + t3:.0f} s = first phase {first:,} x {t['ours'] * 1e3:.1f} ms "
        f"({t1:.0f} s) + second phase {second:,} x {(t2 / max(1, second)) * 1e3:.1f} ms ({t2:.0f} s) "
        f"+ {snaps} snapshots' metrics and appends ({t3:.0f} s)"
    )


def active_waits() -> bool:
    """Whether OpenMP's idle threads spin (OMP_WAIT_POLICY=ACTIVE) rather than sleep."""
    return os.environ["OMP_WAIT_POLICY"].upper() == "ACTIVE"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=30, help="timed epochs per trainer per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best round is reported)")
    ap.add_argument("--threads", default="1,2", help="comma-separated torch thread counts (default 1,2)")
    args = ap.parse_args()
    counts = [int(n) for n in args.threads.split(",") if n]
    cfg = OrbitConfig()
    print(cpu_line())
    print(load_line(), "at the start")
    print(
        f"config: p={cfg.p} n_heads={cfg.n_heads} d_model={cfg.d_model} d_head={cfg.d_head} "
        f"train_frac={cfg.train_frac}; torch {torch.__version__}; OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}"
    )
    for threads in counts:
        report(cfg, threads, measure(cfg, threads, args.epochs, args.rounds))
    print(load_line(), "at the end")


if __name__ == "__main__":
    main()

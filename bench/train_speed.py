"""Training speed of the orbit experiment: our grid trainer vs a straightforward reference.

Prints, from one run at one config (default: d_model 128, d_head 4, 32 heads, p 24, 30 % split):
  - epochs/s of the reference: per-sample forward (embed, 32-head attention with per-sample
    projections, unembed) on the whole train split, plus the equivariance term on 4,096 random
    inputs with one random shift each; AdamW step;
  - epochs/s of our trainer (`OrbitTask.step` at epoch 3,000, after lambda's ramp: the whole p^3
    grid from per-head QK/OV tables, cross-entropy on the train split and the exact equivariance
    loss over all inputs and all shifts, i.e. strictly more work than the reference);
  - their ratio;
  - ms/epoch of our second phase (epoch 12,000: also the length-6 sequence term and the OV-bias
    penalty), one after the other and overlapped (`train --overlap`: the grid term in a second
    thread; needs a second free core), and the sequence term's forward and backward with its QK gather written as
    advanced indexing M[:, t_i, t_j] (the straightforward way, bit for bit the same gradients)
    against ours (index_select on flat cells);
  - the streaming overhead: time to append one snapshot to a SWMR run file (and, separately, to
    evaluate the snapshot's metrics) as a fraction of the training time between two snapshots.
Timings interleave the two trainers (ours, reference, ours, ...) so that load drifts hit both.

    .venv/bin/python bench/train_speed.py [--epochs 30] [--rounds 3] [--threads N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from torch.nn import functional

from headmovies.runfile.writer import RunWriter
from headmovies.tasks.orbits import M_SHIFT, all_inputs, targets
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.losses import seq_eq_loss, seq_eq_loss_indexed
from headmovies.train.orbits.task import OrbitTask


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=30, help="timed epochs per trainer per round")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best round is reported)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = OrbitConfig()
    torch.manual_seed(0)
    ours = OrbitTask(cfg)
    torch.manual_seed(0)
    ref = ReferenceTrainer(OrbitTask(cfg))
    torch.manual_seed(0)
    overlapped = OrbitTask(cfg)
    overlapped.overlap = True
    phase1, phase2 = 3000, 12000  # lambda at eq_weight; second phase with its sequence term
    M, R = (c.detach().requires_grad_() for c in ours.model.circuits())
    x = torch.randint(0, cfg.p, (cfg.eq_seq_batch, 6), generator=torch.Generator().manual_seed(0))

    def seq_ours():
        return seq_eq_loss(M, R, x).backward()

    def seq_ref():
        return seq_eq_loss_indexed(M, R, x).backward()

    for _ in range(3):  # warm up
        ours.step(phase1)
        ref.step()
        ours.step(phase2)
        overlapped.step(phase2)
        seq_ours()
        seq_ref()
    t_ours, t_ref, t_two, t_over, t_seq, t_seq_ref = [], [], [], [], [], []
    for _ in range(args.rounds):
        t_ours.append(seconds_per_call(lambda: ours.step(phase1), args.epochs))
        t_ref.append(seconds_per_call(ref.step, max(3, args.epochs // 10)))
        t_two.append(seconds_per_call(lambda: ours.step(phase2), args.epochs))
        t_over.append(seconds_per_call(lambda: overlapped.step(phase2), args.epochs))
        t_seq.append(seconds_per_call(seq_ours, args.epochs))
        t_seq_ref.append(seconds_per_call(seq_ref, args.epochs))
    t_ours, t_ref, t_two, t_over, t_seq, t_seq_ref = map(min, (t_ours, t_ref, t_two, t_over, t_seq, t_seq_ref))

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
        t_write = seconds_per_call(lambda: writer.append(0, ours.snapshot(), metrics), 40)
        t_eval = seconds_per_call(ours.evaluate, 10)
        writer.close()
    interval = cfg.early_every * t_ours  # training time between two snapshots (densest part of the schedule)
    print(
        f"config: p={cfg.p} n_heads={cfg.n_heads} d_model={cfg.d_model} d_head={cfg.d_head} "
        f"train_frac={cfg.train_frac} threads={torch.get_num_threads()}"
    )
    print(f"reference (per-sample, eq term on 4096 inputs): {1 / t_ref:8.1f} epochs/s  ({t_ref * 1e3:7.1f} ms/epoch)")
    print(
        f"ours (p^3 grid, eq term on all inputs x shifts): {1 / t_ours:8.1f} epochs/s  ({t_ours * 1e3:7.1f} ms/epoch)"
    )
    print(f"speed-up: {t_ref / t_ours:.1f}x")
    print(
        f"ours, second phase (+ length-6 sequence term, OV-bias penalty): {t_two * 1e3:7.1f} ms/epoch "
        f"({t_two / t_ours:.2f}x the first phase's)"
    )
    print(
        f"ours, second phase overlapped (grid term in a second thread): {t_over * 1e3:7.1f} ms/epoch "
        f"({t_two / t_over:.2f}x faster than one after the other)"
    )
    print(
        f"sequence term forward + backward: {t_seq_ref * 1e3:.2f} ms with advanced indexing, "
        f"{t_seq * 1e3:.2f} ms with index_select ({t_seq_ref / t_seq:.2f}x)"
    )
    print(
        f"streaming: {t_write * 1e3:.2f} ms per snapshot append = {t_write / interval:.2%} of training time "
        f"at one snapshot per {cfg.early_every} epochs"
    )
    print(f"metrics evaluation: {t_eval * 1e3:.2f} ms per snapshot = {t_eval / interval:.2%} of training time")


if __name__ == "__main__":
    main()

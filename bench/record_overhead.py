"""What recording costs a nanoGPT-size loop: `headmovies.Recorder` with its default probe
against the same loop without it (docs/benchmarks.md, "Recording overhead").

The model and loop are our copy of nanoGPT's (`model.py`, `train.py`) at its CPU "baby GPT"
config: 4 layers x 4 heads, d_model 128, context 64, 65 characters, LayerNorm, GELU MLP,
dropout 0, AdamW lr 1e-3, batch 12. The data are random characters with repeated spans (the
cost does not depend on what is learnt). Runs alternate (plain, recorded, plain, ...) so that
load drifts hit both; each prints its wall time; the summary gives the median overhead and the
cost of one snapshot (weights, probe, write). Last, 30 snapshots and 30 training steps are timed
directly in one process (steadier than whole runs on a shared machine). The recorded runs use
the default schedule (every 25 steps) unless --total is given.

    .venv/bin/python bench/record_overhead.py [--steps 2000] [--rounds 3] [--threads 2] [--total N]

Measure on a quiet machine: on a shared one the spread between rounds says how far to trust it.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

import headmovies


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.c_attn, self.c_proj, self.n_head, self.n_embd = nn.Linear(d, 3 * d), nn.Linear(d, d), n_head, d

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        y = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, d: int, n_head: int):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), CausalSelfAttention(d, n_head), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 65, ctx: int = 64, d: int = 128, n_head: int = 4, n_layer: int = 4):
        super().__init__()
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab, d),
                wpe=nn.Embedding(ctx, d),
                h=nn.ModuleList(Block(d, n_head) for _ in range(n_layer)),
                ln_f=nn.LayerNorm(d),
            )
        )
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT

    def forward(self, idx):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1]))
        for block in t.h:
            x = block(x)
        return self.lm_head(t.ln_f(x))  # (B, T, vocab): every position (nanoGPT with targets)


def batch(g: torch.Generator, B: int = 12, T: int = 64, V: int = 65) -> torch.Tensor:
    x = torch.randint(0, V, (B, T + 1), generator=g)
    x[:, 40:56] = x[:, 8:24]  # a repeated span
    return x


def run(steps: int, path: Path | None, total: int | None) -> tuple[float, int]:
    """Wall seconds of `steps` training steps (recorded into `path` when given), snapshots written."""
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    rec = headmovies.Recorder(path, model, total=total, force=True) if path is not None else None
    written = 0
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        x = batch(g)
        logits = model(x[:, :-1])
        loss = functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rec is not None:
            written += rec.step(step, train_loss=loss.item())
    if rec is not None:
        rec.close()
    return time.perf_counter() - t0, written


def direct(n: int, path: Path) -> tuple[float, float]:
    """Median seconds of one `Recorder.step` that writes a snapshot and of one training step, each
    timed `n` times in this process (the snapshots on a schedule of every step)."""
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    rec = headmovies.Recorder(path, model, schedule=list(range(n + 1)), force=True)
    rec.step(0, train_loss=1.0)  # the first snapshot creates the file
    snap, train = [], []
    for step in range(1, n + 1):
        t0 = time.perf_counter()
        rec.step(step, train_loss=1.0)
        snap.append(time.perf_counter() - t0)
    rec.close()
    for _ in range(n):
        t0 = time.perf_counter()
        x = batch(g)
        logits = model(x[:, :-1])
        loss = functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        train.append(time.perf_counter() - t0)
    return statistics.median(snap), statistics.median(train)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000, help="training steps per run")
    ap.add_argument("--rounds", type=int, default=3, help="pairs of runs (plain, recorded)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--total", type=int, default=None, help="Recorder(total=N) instead of the default schedule")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    plain, recorded = [], []
    written = 0
    with tempfile.TemporaryDirectory() as d:
        for r in range(args.rounds):
            t, _ = run(args.steps, None, args.total)
            plain.append(t)
            t, written = run(args.steps, Path(d) / "run.h5", args.total)
            recorded.append(t)
            size = (Path(d) / "run.h5").stat().st_size
            pair = 100 * (recorded[-1] - plain[-1]) / plain[-1]
            print(
                f"round {r + 1}: plain {plain[-1]:.2f} s, recorded {recorded[-1]:.2f} s "
                f"({written} snapshots): {pair:+.2f} %"
            )
    a, b = statistics.median(plain), statistics.median(recorded)
    per = (b - a) / max(written, 1)
    pairs = statistics.median(100 * (r - p) / p for p, r in zip(plain, recorded, strict=True))
    print(
        f"median: plain {a:.2f} s, recorded {b:.2f} s: overhead {100 * (b - a) / a:+.2f} % "
        f"({1000 * per:.1f} ms a snapshot, {written} snapshots, run file {size / 1e6:.1f} MB); "
        f"median of the rounds' overheads {pairs:+.2f} %; "
        f"spread of plain runs {100 * (max(plain) - min(plain)) / a:.1f} %"
    )
    with tempfile.TemporaryDirectory() as d:
        snap, step = direct(30, Path(d) / "direct.h5")
    print(
        f"timed directly: a snapshot {1000 * snap:.1f} ms, a training step {1000 * step:.1f} ms: "
        f"{100 * snap / (25 * step):.2f} % at a snapshot every 25 steps"
    )
    if not math.isfinite(a):
        raise SystemExit(1)


if __name__ == "__main__":
    main()

"""What recording costs a nanoGPT-size loop: `headmovies.Recorder` with its default probe
against the same loop without it (docs/benchmarks.md, "Recording overhead").

The model and loop are our copy of nanoGPT's (`model.py`, `train.py`) at its CPU "baby GPT"
config: 4 layers x 4 heads, d_model 128, context 64, 65 characters, LayerNorm, GELU MLP,
dropout 0, AdamW lr 1e-3, batch 12. The data are random characters with repeated spans (the
cost does not depend on what is learnt).

One process trains one model through interleaved blocks of `--block` steps, plain and recorded
in turn (plain, recorded, plain, ..., plain: `--pairs` recorded blocks, each between two plain
ones), so that load drifts hit both. A recorded block calls `Recorder.step` after every step on
the default schedule (a snapshot every 25 steps). Each recorded block's overhead is its wall time
against the mean of the plain blocks on either side; the summary gives their median and range.
Every training step and every snapshot (`Recorder.step` that writes) is also timed on its own:
the median snapshot over 25 median steps is the overhead measured directly, and so is each
snapshot over 25 times the median of the 25 steps just before it (paired in time, so that load
that changes over seconds cancels). The first snapshot (it creates the file) is written before
the blocks and reported apart.

    .venv/bin/python bench/record_overhead.py [--block 200] [--pairs 5] [--threads 1]

About 2 min on one idle core at the defaults. It prints the CPU, whether it has AVX-512 and the
load average before and after: on a shared machine the range between blocks says how far to
trust the median.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

import headmovies

EVERY = 25  # the Recorder's default schedule: a snapshot every 25 steps (through 4,000)


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


def train_step(model: nn.Module, opt: torch.optim.Optimizer, g: torch.Generator) -> torch.Tensor:
    """One step of nanoGPT's loop (forward, loss, backward, AdamW); the loss."""
    x = batch(g)
    logits = model(x[:, :-1])
    loss = functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def cpu() -> str:
    """The CPU's model name (lscpu), cores, and whether it has AVX-512."""
    name, flags = platform.processor() or "unknown CPU", ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model name":
                name = value.strip()
            if key.strip() == "Flags":
                flags = value
    except OSError:
        pass
    avx = "AVX-512" if "avx512f" in flags.split() else "no AVX-512"
    return f"{name}, {os.cpu_count()} cores, {avx}"


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def blocks(block: int, pairs: int, path: Path) -> dict:
    """Train through 2 * pairs + 1 blocks of `block` steps, plain and recorded in turn (module
    docstring). Returns the blocks' wall seconds, every step's and every snapshot's seconds."""
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    for _ in range(20):  # warm up allocator and kernels
        train_step(model, opt, g)
    rec = headmovies.Recorder(path, model, force=True)
    t0 = time.perf_counter()
    rec.step(0, train_loss=1.0)  # the first snapshot creates the file
    first = time.perf_counter() - t0
    plain, recorded, steps, snaps, paired, written = [], [], [], [], [], 0
    step = 0
    for b in range(2 * pairs + 1):
        recording = b % 2 == 1
        t_block = time.perf_counter()
        for _ in range(block):
            step += 1
            t0 = time.perf_counter()
            loss = train_step(model, opt, g)
            t1 = time.perf_counter()
            steps.append(t1 - t0)
            if recording:
                wrote = rec.step(step, train_loss=loss.item())
                if wrote:
                    snaps.append(time.perf_counter() - t1)
                    paired.append(snaps[-1] / (EVERY * statistics.median(steps[-EVERY:])))
                    written += 1
            else:
                loss.item()  # the plain loop reads its loss too
        (recorded if recording else plain).append(time.perf_counter() - t_block)
    rec.close()
    return dict(plain=plain, recorded=recorded, steps=steps, snaps=snaps, paired=paired, first=first, written=written)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block", type=int, default=200, help="training steps per block (a multiple of 25)")
    ap.add_argument("--pairs", type=int, default=5, help="recorded blocks, each between two plain ones")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    if args.block < EVERY or args.block % EVERY or args.pairs < 1:
        raise SystemExit(f"--block must be a multiple of {EVERY} and --pairs at least 1")
    torch.set_num_threads(args.threads)
    print(f"CPU: {cpu()}; torch {torch.__version__}, {args.threads} thread(s); {load()}", flush=True)
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        r = blocks(args.block, args.pairs, Path(d) / "run.h5")
        size = (Path(d) / "run.h5").stat().st_size
    plain, recorded = r["plain"], r["recorded"]
    per_block = [
        100 * (rec - (plain[i] + plain[i + 1]) / 2) / ((plain[i] + plain[i + 1]) / 2) for i, rec in enumerate(recorded)
    ]
    for i, rec in enumerate(recorded):
        around = f"plain {plain[i]:.2f} s, recorded {rec:.2f} s, plain {plain[i + 1]:.2f} s"
        print(f"blocks {2 * i + 1}-{2 * i + 3}: {around}: {per_block[i]:+.2f} %")
    per_snap = len(r["snaps"]) // len(recorded)
    snap, step = statistics.median(r["snaps"]), statistics.median(r["steps"])
    q = statistics.quantiles(r["snaps"], n=4)
    spread = 100 * (max(plain) - min(plain)) / statistics.median(plain)
    print(
        f"blocks of {args.block} steps, {per_snap} snapshots each: "
        f"overhead median {statistics.median(per_block):+.2f} %, "
        f"range {min(per_block):+.2f} to {max(per_block):+.2f} % over {len(recorded)} recorded blocks; "
        f"plain blocks' spread {spread:.1f} %"
    )
    pq = statistics.quantiles(r["paired"], n=4)
    print(
        f"timed directly: a snapshot {1000 * snap:.1f} ms (median of {len(r['snaps'])}; quartiles "
        f"{1000 * q[0]:.1f}-{1000 * q[2]:.1f}), a training step {1000 * step:.1f} ms (median of {len(r['steps'])}): "
        f"{100 * snap / (EVERY * step):.2f} % at a snapshot every {EVERY} steps; each snapshot against the "
        f"median of the {EVERY} steps before it: {100 * statistics.median(r['paired']):.2f} % "
        f"(quartiles {100 * pq[0]:.2f}-{100 * pq[2]:.2f})"
    )
    print(
        f"first snapshot (creates the file) {1000 * r['first']:.0f} ms; run file {size / 1e6:.1f} MB "
        f"({r['written'] + 1} snapshots); {time.perf_counter() - t_start:.0f} s in all; {load()}"
    )


if __name__ == "__main__":
    main()

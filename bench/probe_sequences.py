"""How the probe's per-head scores depend on the number of probe sequences (docs/recording.md,
"How many probe sequences"): `make induction-bump`'s model and loop (examples/induction_bump.py,
same seed, corpus and optimizer), with each head's previous-token, duplicate-token and induction
score taken on each of 64 probe sequences every `--every` steps. The sequences come from the
default probe's generator, so its first 4 are the Recorder's default probe and its first 8 the
built-in trainers' (and the Recorder's before 7 December 2026).

It prints, per score, the spread across sequences (standard deviation of one sequence's score,
median and largest over heads and snapshots) and how far the means over the first 4 and the
first 8 sequences lie from the mean over all 64 and from each other, over every head and
snapshot and over the bump (steps 600-800); then the largest scores at the steps of
docs/results/induction-bump.md's table. `--json` writes the per-sequence scores. About 3 min
on one core.

    .venv/bin/python bench/probe_sequences.py [--steps 1500] [--every 8] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import torch
from torch.nn import functional
from transformer_lens import HookedTransformer, HookedTransformerConfig

from headmovies.train.head_scores import DETECTORS, detection_patterns, repeated_tokens
from headmovies.train.probe import Probe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from induction_bump import batch  # the example's corpus

SEQUENCES = 64
BUMP = (600, 800)


def per_sequence(probe: Probe, D: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{score: [B, L, H]}: each probe sequence's score (head_scores before its mean over B)."""
    A = [None]

    def keep(patterns, logits):
        A[0] = np.stack([p.double().numpy() for p in patterns], axis=1)  # [B, L, H, P, P]
        return {}

    probe._record = keep  # type: ignore[method-assign]
    probe.run()
    a = A[0]
    return {name: np.einsum("blhqk,bqk->blh", a, D[name]) / a.sum(axis=(-1, -2)) for name in DETECTORS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="write the per-sequence scores here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seed, vocab, ctx, span = 0, 64, 64, 12
    torch.manual_seed(seed)
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=64, d_head=16, n_heads=4, d_vocab=vocab, n_ctx=ctx, attn_only=True,
        normalization_type="LN", positional_embedding_type="standard", seed=seed,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed + 1)
    tokens = repeated_tokens(vocab, ctx // 2, SEQUENCES)
    probe = Probe(model, [b.attn for b in model.blocks], tokens)
    D = detection_patterns(tokens)
    steps, scores = [], {name: [] for name in DETECTORS}
    t0 = time.perf_counter()
    for step in range(args.steps + 1):
        if step:
            x = batch(32, ctx, vocab, span, g)
            loss = functional.cross_entropy(model(x)[:, :-1].reshape(-1, vocab), x[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        if step % args.every == 0 or step == args.steps:
            s = per_sequence(probe, D)
            steps.append(step)
            for name in DETECTORS:
                scores[name].append(s[name])
            if step % 200 == 0:
                top = s["induction"].mean(0).max()
                print(f"step {step}: largest induction score {top:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    t = np.array(steps)
    bump = (t >= BUMP[0]) & (t <= BUMP[1])
    print(f"{len(t)} snapshots; probe of {SEQUENCES} sequences; bump = steps {BUMP[0]}-{BUMP[1]}")
    for name in DETECTORS:
        s = np.stack(scores[name])  # [T, B, L, H]
        sd = s.std(axis=1, ddof=1)  # [T, L, H]: one sequence's spread
        m4, m8, m64 = s[:, :4].mean(1), s[:, :8].mean(1), s.mean(1)
        for label, sel in (("all", np.ones_like(bump)), ("bump", bump)):
            if not sel.any():
                continue
            e4, e8, e48 = np.abs(m4 - m64)[sel], np.abs(m8 - m64)[sel], np.abs(m4 - m8)[sel]
            print(
                f"{name:15s} {label:4s}: one sequence's s.d. median {np.median(sd[sel]):.4f}, max {sd[sel].max():.4f}; "
                f"from the mean of 64: 4 max {e4.max():.4f} (rms {np.sqrt((e4**2).mean()):.4f}), "
                f"8 max {e8.max():.4f} (rms {np.sqrt((e8**2).mean()):.4f}); 4 from 8 max {e48.max():.4f}"
            )
    ind, prev = np.stack(scores["induction"]), np.stack(scores["previous_token"])
    print("step: largest layer-1 induction, largest layer-0 previous-token (means of 8 / 4 / 64 sequences)")
    for step in (0, 600, 680, 720, 760, 800, args.steps):
        if step in steps:
            k = steps.index(step)
            i, p = (
                " / ".join(f"{x[k, :n, layer].mean(0).max():.3f}" for n in (8, 4, 64))
                for x, layer in ((ind, 1), (prev, 0))
            )
            print(f"{step:5d}: {i}; {p}")
    if args.json:
        Path(args.json).write_text(json.dumps({"steps": steps, **{k: np.stack(v).tolist() for k, v in scores.items()}}))


if __name__ == "__main__":
    main()

"""The induction bump, recorded: a two-layer attention-only TransformerLens model learns a corpus
with repeated spans, and headmovies records what each head does while it trains
(docs/results/induction-bump.md; `make induction-bump`).

Olsson et al. (2022, "In-context learning and induction heads") see the loss drop in a bump
when induction heads form: a previous-token head in layer 0 and, composed with it, an induction
head in layer 1. Here the corpus makes copying pay: each sequence is random tokens in which
spans reappear (a span of `--span` tokens copied to a later place, twice per sequence), so a
model that attends to "the token after the last time this token came" predicts the copies.
The Recorder's default probe (random tokens repeated twice) scores every head at every
snapshot with TransformerLens's head detectors; `headmovies heads RUN --json` prints them.

The lines that record it are marked "# headmovies". Run:

    python examples/induction_bump.py --out data/induction-bump.h5
    headmovies heads data/induction-bump.h5
    headmovies movie data/induction-bump.h5 --out outputs/induction-bump
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: no spinning threads on a busy machine

import torch
from torch.nn import functional
from transformer_lens import HookedTransformer, HookedTransformerConfig

import headmovies


def batch(n: int, ctx: int, vocab: int, span: int, g: torch.Generator) -> torch.Tensor:
    """int64 [n, ctx]: random tokens, with two spans of `span` tokens each copied from earlier in
    the sequence to a later place (the copy starts after its source ends)."""
    x = torch.randint(0, vocab, (n, ctx), generator=g)
    for _ in range(2):
        src = torch.randint(0, ctx // 2 - span, (n,), generator=g)
        dst = src + span + torch.randint(0, ctx // 2, (n,), generator=g)
        dst = torch.minimum(dst, torch.full_like(dst, ctx - span))
        idx = torch.arange(span)
        rows = torch.arange(n)[:, None]
        x[rows, dst[:, None] + idx] = x[rows, src[:, None] + idx]
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="data/induction-bump.h5", help="run file to write")
    ap.add_argument("--steps", type=int, default=1500, help="optimizer steps")
    ap.add_argument("--batch", type=int, default=32, help="sequences per step")
    ap.add_argument("--ctx", type=int, default=64, help="tokens per sequence")
    ap.add_argument("--vocab", type=int, default=64, help="tokens")
    ap.add_argument("--span", type=int, default=12, help="length of a repeated span")
    ap.add_argument("--lr", type=float, default=2e-3, help="AdamW learning rate")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=64, d_head=16, n_heads=4, d_vocab=args.vocab, n_ctx=args.ctx, attn_only=True,
        normalization_type="LN", positional_embedding_type="standard", seed=args.seed,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(args.seed + 1)
    config = {k: v for k, v in vars(args).items() if k not in ("out", "threads")}
    rec = headmovies.Recorder(args.out, model, config=config, total=args.steps, force=True)  # headmovies
    t0 = time.perf_counter()
    for step in range(args.steps + 1):
        if step:
            x = batch(args.batch, args.ctx, args.vocab, args.span, g)
            loss = functional.cross_entropy(model(x)[:, :-1].reshape(-1, args.vocab), x[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(step, train_loss=loss.item())  # headmovies
        else:
            rec.step(0)  # headmovies: the model at initialisation
    rec.close()  # headmovies
    print(f"{args.out}: {args.steps} steps in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

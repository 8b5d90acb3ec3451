"""Grokking, recorded: a one-layer TransformerLens model learns addition mod p, and headmovies
records its heads while it trains (docs/results/grokking.md; `make grokking`).

The setup is the grokking one (Power et al. 2022; Nanda et al. 2023, "Progress measures for
grokking via mechanistic interpretability"), scaled down to train in minutes on 2 cores: inputs
"a b =" for a, b in 0..p-1, the answer (a + b) mod p read at "="; a fraction of the p^2 pairs
for training (full batch), the rest held out; AdamW with weight decay 1. The model first
memorises the training pairs, then, much later, generalises: the held-out accuracy jumps.

The three lines that record it are marked "# headmovies". Run:

    python examples/grokking.py --out data/grokking.h5
    headmovies movie data/grokking.h5 --out outputs/grokking
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: no spinning threads on a busy machine

import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

import headmovies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="data/grokking.h5", help="run file to write")
    ap.add_argument("--p", type=int, default=53, help="the modulus")
    ap.add_argument("--frac", type=float, default=0.45, help="fraction of the p^2 pairs trained on")
    ap.add_argument("--epochs", type=int, default=1500, help="full-batch steps")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate (weight decay 1)")
    ap.add_argument("--attn-only", action="store_true", help="no MLP")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    p = args.p
    torch.manual_seed(args.seed)
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=128, d_head=32, n_heads=4, d_mlp=512, d_vocab=p + 1, d_vocab_out=p, n_ctx=3,
        act_fn="relu", normalization_type=None, attn_only=args.attn_only, seed=args.seed,
    )  # fmt: skip
    model = HookedTransformer(cfg)
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    tokens = torch.stack([a.flatten(), b.flatten(), torch.full((p * p,), p)], dim=1)  # "a b ="
    labels = (tokens[:, 0] + tokens[:, 1]) % p
    order = torch.randperm(p * p, generator=torch.Generator().manual_seed(args.seed))
    n_train = int(args.frac * p * p)
    train, test = order[:n_train], order[n_train:]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1.0, betas=(0.9, 0.98))
    config = {k: v for k, v in vars(args).items() if k not in ("out", "threads")}
    config |= {"weight_decay": 1.0, "n_train": n_train}

    rec = headmovies.Recorder(args.out, model, config=config, group_order=p, force=True)  # headmovies
    t0 = time.perf_counter()
    for epoch in range(args.epochs + 1):
        if epoch:
            logits = model(tokens[train])[:, -1]
            loss = torch.nn.functional.cross_entropy(logits, labels[train])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rec.due(epoch):  # metrics only where a snapshot is written
            with torch.no_grad():
                logits = model(tokens)[:, -1]
                right = (logits.argmax(-1) == labels).float()
                metrics = {
                    "train_loss": torch.nn.functional.cross_entropy(logits[train], labels[train]).item(),
                    "test_loss": torch.nn.functional.cross_entropy(logits[test], labels[test]).item(),
                    "train_acc": right[train].mean().item(),
                    "test_acc": right[test].mean().item(),
                }
            if epoch % 250 == 0:
                print(f"epoch {epoch:5d}  train {metrics['train_acc']:.1%}  test {metrics['test_acc']:.1%}", flush=True)
            rec.step(epoch, **metrics)  # headmovies
    rec.close()  # headmovies
    print(f"{args.out}: {args.epochs} epochs in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

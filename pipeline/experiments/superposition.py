"""OV-coherent head superposition (seed 004, SPEC §3): a 1-layer attention-only model names the
unordered pair of signal tokens in a sequence at a read-off token.

Source: L. Greenspan, "An OV-Coherent Toy Model of Attention Head Superposition", AI Alignment
Forum, 29 Aug 2023 (seed 004). The authors report 100 % accuracy with 2 heads of d_head 1 and,
"in almost all runs", opposite QK preference orderings of the signal tokens in the two heads.

Tokens (12): 0 = read-off, 1-4 = signal, 5-11 = noise. A sequence of length L holds two signal
tokens A, B (each uniform on 1-4, independent) at two distinct random positions among the first
L-1, uniform noise elsewhere, and the read-off last. Label: the unordered pair {A, B}, one of 10
classes ordered (1,1), (1,2), (1,3), (1,4), (2,2), ..., (4,4). Loss at the read-off only.

Model: fixed one-hot W_E (d_model = 12) -> one attention layer (n_heads heads of d_head, no
positional embedding, no biases, no mask: only the last position is read and it sees the whole
sequence) + residual -> W_U [12, 10]. Adam, fresh batches every step.

Exact evaluation. Without positions, the read-off's output depends only on how many times each
token occurs among the keys, so the whole data distribution collapses to (class, noise multiset)
cases with known probabilities: 10 x C(L-3+6, 6) cases (17,160 for L = 10). Loss and accuracy in
/metrics are exact expectations over the task distribution, not estimates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations_with_replacement

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pipeline.config import ConfigError, TrainConfig
from pipeline.experiments import Task, register

READOFF = 0
SIGNAL = (1, 2, 3, 4)
NOISE = tuple(range(5, 12))
D_VOCAB = 12
CLASSES = [(a, b) for a in SIGNAL for b in SIGNAL if a <= b]   # class index -> (A, B), A <= B
N_CLASSES = len(CLASSES)
MAX_EXACT_CASES = 200_000   # beyond this many (class, noise multiset) cases, evaluate on a sample
EVAL_SAMPLE = 65_536


@dataclass
class SuperpositionConfig(TrainConfig):
    epochs: int = 6000          # optimizer steps, each on a fresh batch (100 % by step 1500 in 5/5 seeds)
    seq_len: int = 10           # L: two signal tokens, L-3 noise tokens, read-off last
    n_heads: int = 2
    d_head: int = 1
    batch: int = 256            # sequences per step
    lr: float = 1e-3            # Adam
    init_scale: float = 1.0     # multiplies every initial weight
    log_early: bool = True      # snapshots at steps 1, 2, 4, ... too (the orderings form early)

    def validate(self) -> None:
        super().validate()
        if self.seq_len < 3:
            raise ConfigError(f"seq_len (L) must be >= 3 to hold two signal tokens and the read-off, "
                              f"got {self.seq_len}")
        for key in ("n_heads", "d_head", "batch"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.lr <= 0 or self.init_scale <= 0:
            raise ConfigError("lr and init_scale must be > 0")


def class_table() -> torch.Tensor:
    """[5, 5] int64: class index of the unordered pair {a, b} for signal tokens a, b in 1-4."""
    table = torch.full((5, 5), -1, dtype=torch.long)
    for c, (a, b) in enumerate(CLASSES):
        table[a, b] = table[b, a] = c
    return table


def sample_batch(n: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """n fresh sequences: tokens [n, L] int64 (read-off last) and labels [n] int64 (class index).

    A, B uniform on 1-4 and independent; their two positions a uniform random pair of distinct
    positions among the first L-1; noise uniform on 5-11 elsewhere. Every draw uses `generator`.
    """
    tokens = torch.randint(NOISE[0], NOISE[-1] + 1, (n, seq_len), generator=generator)
    signal = torch.randint(SIGNAL[0], SIGNAL[-1] + 1, (n, 2), generator=generator)
    pos = torch.rand(n, seq_len - 1, generator=generator).argsort(-1)[:, :2]   # (n, 2) distinct
    tokens.scatter_(1, pos, signal)
    tokens[:, -1] = READOFF
    return tokens, class_table()[signal[:, 0], signal[:, 1]]


def exact_cases(seq_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The task distribution as key-token counts: counts [N, 12], labels [N], probabilities [N]
    (summing to 1). One case per (class, multiset of the L-3 noise tokens)."""
    n_noise = seq_len - 3
    multisets = list(combinations_with_replacement(range(len(NOISE)), n_noise))
    noise = np.zeros((len(multisets), len(NOISE)), np.int64)
    for i, ms in enumerate(multisets):
        np.add.at(noise[i], list(ms), 1)
    log_fact = np.array([math.lgamma(k + 1) for k in range(n_noise + 1)])
    p_noise = np.exp(log_fact[n_noise] - log_fact[noise].sum(1) - n_noise * math.log(len(NOISE)))
    counts, labels, probs = [], [], []
    for c, (a, b) in enumerate(CLASSES):
        block = np.zeros((len(noise), D_VOCAB), np.int64)
        block[:, READOFF] = 1
        block[:, a] += 1
        block[:, b] += 1
        block[:, NOISE[0]:] = noise
        counts.append(block)
        labels.append(np.full(len(noise), c))
        probs.append(p_noise * (1 if a == b else 2) / len(SIGNAL) ** 2)
    return np.concatenate(counts), np.concatenate(labels), np.concatenate(probs)


def n_exact_cases(seq_len: int) -> int:
    return N_CLASSES * math.comb(seq_len - 3 + len(NOISE) - 1, len(NOISE) - 1)


class ReadoffAttention(nn.Module):
    """Fixed one-hot W_E [12, 12] -> n_heads heads (W_Q, W_K, W_V [H, 12, d_head], W_O
    [H, d_head, 12]) + residual -> W_U [12, 10]. Row-vector convention, TransformerLens names."""

    def __init__(self, n_heads: int, d_head: int, init_scale: float = 1.0):
        super().__init__()
        d_model, g = D_VOCAB, init_scale
        self.d_head = d_head
        self.register_buffer("W_E", torch.eye(D_VOCAB))   # fixed one-hot embedding, stored in snapshots
        self.W_Q = nn.Parameter(g * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_K = nn.Parameter(g * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_V = nn.Parameter(g * torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_O = nn.Parameter(g * torch.randn(n_heads, d_head, d_model) / math.sqrt(d_head * n_heads))
        self.W_U = nn.Parameter(g * torch.randn(d_model, N_CLASSES) / math.sqrt(d_model))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, L] -> logits at the last (read-off) position [B, 10]."""
        x = self.W_E[tokens]                                          # (B, L, d)
        q = torch.einsum("bd,hde->bhe", x[:, -1], self.W_Q)           # (B, H, dh) read-off query
        k = torch.einsum("bld,hde->bhle", x, self.W_K)                # (B, H, L, dh)
        v = torch.einsum("bld,hde->bhle", x, self.W_V)
        att = (torch.einsum("bhe,bhle->bhl", q, k) / math.sqrt(self.d_head)).softmax(-1)
        z = torch.einsum("bhl,bhle->bhe", att, v)                     # (B, H, dh)
        resid = x[:, -1] + torch.einsum("bhe,hed->bd", z, self.W_O)   # (B, d)
        return resid @ self.W_U

    def forward_counts(self, counts: torch.Tensor) -> torch.Tensor:
        """Key-token counts [N, 12] (read-off query) -> logits [N, 10]; equals `forward` on any
        sequence with those counts, since nothing depends on position."""
        q = self.W_E[READOFF] @ self.W_Q                              # (H, dh)
        k = torch.einsum("vd,hde->hve", self.W_E, self.W_K)           # (H, V, dh)
        v = torch.einsum("vd,hde->hve", self.W_E, self.W_V)
        s = torch.einsum("he,hve->hv", q, k) / math.sqrt(self.d_head)  # (H, V) QK row of the read-off
        w = counts[:, None, :] * (s - s.max(-1, keepdim=True).values).exp()  # (N, H, V)
        att = w / w.sum(-1, keepdim=True)
        z = torch.einsum("nhv,hve->nhe", att, v)                      # (N, H, dh)
        resid = self.W_E[READOFF] + torch.einsum("nhe,hed->nd", z, self.W_O)
        return resid @ self.W_U


@register
class SuperpositionTask(Task):
    name = "ov-coherent"
    description = "seed 004: 2 heads of d_head 1 name the pair of signal tokens at a read-off token"
    Config = SuperpositionConfig

    def __init__(self, cfg: SuperpositionConfig):
        super().__init__(cfg)
        self.model = ReadoffAttention(cfg.n_heads, cfg.d_head, cfg.init_scale)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        if n_exact_cases(cfg.seq_len) <= MAX_EXACT_CASES:
            counts, labels, probs = exact_cases(cfg.seq_len)
        else:  # long sequences: a fixed, seeded sample (not drawn from self.generator)
            tokens, lab = sample_batch(EVAL_SAMPLE, cfg.seq_len, torch.Generator().manual_seed(cfg.seed + 2))
            counts = F.one_hot(tokens, D_VOCAB).sum(1).numpy()
            labels, probs = lab.numpy(), np.full(EVAL_SAMPLE, 1.0 / EVAL_SAMPLE)
        self.eval_counts = torch.from_numpy(counts).float()
        self.eval_labels = torch.from_numpy(labels).long()
        self.eval_probs = torch.from_numpy(probs).double()
        self.exact = n_exact_cases(cfg.seq_len) <= MAX_EXACT_CASES

    def step(self, epoch: int) -> dict[str, float]:
        tokens, labels = sample_batch(self.cfg.batch, self.cfg.seq_len, self.generator)
        loss = F.cross_entropy(self.model(tokens), labels)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return {}

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        logits = self.model.forward_counts(self.eval_counts)
        nll = F.cross_entropy(logits, self.eval_labels, reduction="none").double()
        correct = (logits.argmax(-1) == self.eval_labels).double()
        p = self.eval_probs
        per_class = torch.zeros(N_CLASSES, dtype=torch.float64).index_add_(0, self.eval_labels, p * correct) \
            / torch.zeros(N_CLASSES, dtype=torch.float64).index_add_(0, self.eval_labels, p)
        return {"loss": float((p * nll).sum() / p.sum()), "acc": float((p * correct).sum() / p.sum()),
                "worst_class_acc": float(per_class.min())}

    def attrs(self) -> dict:
        return {"exact_eval": self.exact}

    def progress(self, metrics: dict[str, float]) -> dict[str, float]:
        return {"loss": f"{metrics['loss']:.3g}", "acc": f"{metrics['acc']:.4f}"}

    def summary(self, metrics: dict[str, float]) -> str:
        kind = "exact" if self.exact else "sampled"
        return (f"read-off accuracy {metrics['acc']:.2%} ({kind}), worst class {metrics['worst_class_acc']:.2%}, "
                f"loss {metrics['loss']:.3g}")

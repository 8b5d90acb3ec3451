"""OV-coherent head superposition (source 004; docs/experiments.md): a 1-layer attention-only model names the
unordered pair of signal tokens in a sequence at a read-off token.

Source: L. Greenspan, "An OV-Coherent Toy Model of Attention Head Superposition", AI Alignment
Forum, 29 Aug 2023 (source 004). The authors report 100 % accuracy with 2 heads of d_head 1 and,
"in almost all runs", opposite QK preference orderings of the signal tokens in the two heads.

Tokens (12): 0 = read-off, 1-4 = signal, 5-11 = noise. A sequence of length L holds two signal
tokens A, B (each uniform on 1-4, independent) at two distinct random positions among the first
L-1, uniform noise elsewhere, and the read-off last. Label: the unordered pair {A, B}, one of 10
classes ordered (1,1), (1,2), (1,3), (1,4), (2,2), ..., (4,4). Loss at the read-off only.

Model: fixed one-hot W_E (d_model = 12) -> one attention layer (n_heads heads of d_head, no
positional embedding, no biases, no mask: only the last position is read and it sees the whole
sequence) + residual -> W_U [12, 10]. Adam (AdamW with `weight_decay` > 0), the learning rate
constant or on a schedule (`lr_factor`), fresh batches every step.

Exact evaluation. Without positions, the read-off's output depends only on how many times each
token occurs among the keys, so the whole data distribution collapses to (class, noise multiset)
cases with known probabilities: 10 x C(L-3+6, 6) cases (17,160 for L = 10). Loss and accuracy in
/metrics are exact expectations over the task distribution, not estimates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from headmovies.errors import ConfigError, UserError
from headmovies.tasks.ov_coherent import (
    D_VOCAB,
    N_CLASSES,
    NOISE,
    READOFF,
    SIGNAL,
    UNIFORM_SIGNAL,
    class_table,
    signal_probs,
    task_cases,
)
from headmovies.train.config import TrainConfig, require_memory, require_signs
from headmovies.train.task import Task


@dataclass
class OVCoherentConfig(TrainConfig):
    epochs: int = 6000  # optimizer steps, each on a fresh batch (100 % by step 1500 in 5/5 seeds)
    seq_len: int = 10  # L: two signal tokens, L-3 noise tokens, read-off last
    n_heads: int = 2
    d_head: int = 1
    batch: int = 256  # sequences per step
    lr: float = 1e-3  # Adam
    init_scale: float = 1.0  # multiplies every initial weight
    log_early: bool = True  # snapshots at steps 1, 2, 4, ... too (the orderings form early)
    weight_decay: float = 0.0  # decoupled (AdamW); 0 = plain Adam
    lr_schedule: str = "constant"  # constant, cosine or linear decay to 0 at the final step
    warmup: int = 0  # steps of linear warm-up from 0 to lr, before the schedule's decay
    signal_weights: str = UNIFORM_SIGNAL  # relative frequency of signal tokens 1-4, e.g. "4,3,2,1"
    unembed: str = "learned"  # learned W_U, or "one-hot": fixed W_U, class tokens in the residual
    uniform_attention: bool = False  # a control: W_Q fixed at 0, so every head attends uniformly
    # added after run files existed: stored in the run file's config only when set
    OMIT_AT_DEFAULT = ("weight_decay", "lr_schedule", "warmup", "signal_weights", "unembed", "uniform_attention")

    def validate(self) -> None:
        super().validate()
        if self.seq_len < 3:
            raise ConfigError(
                f"seq_len (L) must be >= 3 to hold two signal tokens and the read-off, got {self.seq_len}"
            )
        for key in ("n_heads", "d_head", "batch"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, key)}")
        require_signs(self, positive=("lr", "init_scale"))
        if self.weight_decay < 0:
            raise ConfigError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}")
        if self.unembed not in UNEMBEDS:
            raise ConfigError(f"unembed must be one of {', '.join(UNEMBEDS)}, got {self.unembed!r}")
        if not 0 <= self.warmup <= self.epochs:
            raise ConfigError(f"warmup must be in 0..epochs ({self.epochs:,}), got {self.warmup:,}")
        try:
            signal_probs(self.signal_weights)
        except UserError as e:
            raise ConfigError(str(e)) from None
        require_memory(self.memory_bytes(), "batch, seq_len, n_heads or d_head")

    def memory_bytes(self) -> int:
        """Estimated bytes of the largest tensors of a step: the batch's one-hot tokens, keys,
        values and attention [B, H, L, ...] with gradients, and the sampled evaluation cases."""
        B, L, H = self.batch, self.seq_len, self.n_heads
        params = 4 * H * 12 * self.d_head + 12 * 12 + 12 * 10
        return 16 * params + 14 * B * L * (H * (self.d_head + 1) + 12) + 8 * 65_536 * L


LR_SCHEDULES = ("constant", "cosine", "linear")


def lr_factor(epoch: int, epochs: int, schedule: str = "constant", warmup: int = 0) -> float:
    """The multiplier of `lr` at optimizer step `epoch` (1..epochs): epoch / warmup during the
    warm-up, then with u = (epoch - 1 - warmup) / (epochs - warmup) in [0, 1): 1 (constant),
    (1 + cos(pi u)) / 2 (cosine) or 1 - u (linear). Exactly 1.0 for constant without warm-up."""
    if epoch <= warmup:
        return epoch / warmup
    if schedule == "constant":
        return 1.0
    u = (epoch - 1 - warmup) / max(1, epochs - warmup)
    return 0.5 * (1 + math.cos(math.pi * u)) if schedule == "cosine" else 1 - u


def _rows(w: torch.Tensor, d_model: int) -> torch.Tensor:
    """[H, 12, d_head] -> [H, d_model, d_head]: w on the 12 input tokens' rows, 0 below."""
    return torch.cat([w, w.new_zeros(w.shape[0], d_model - w.shape[1], w.shape[2])], 1)


def sample_batch(
    n: int, seq_len: int, generator: torch.Generator, signal_p: np.ndarray | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """n fresh sequences: tokens [n, L] int64 (read-off last) and labels [n] int64 (class index).

    A, B independent, uniform on 1-4 (or with probabilities `signal_p` [4]); their two positions
    a uniform random pair of distinct positions among the first L-1; noise uniform on 5-11
    elsewhere. Every draw uses `generator`; a uniform `signal_p` draws as None does.
    """
    tokens = torch.randint(NOISE[0], NOISE[-1] + 1, (n, seq_len), generator=generator)
    if signal_p is None or (signal_p == signal_p[0]).all():
        signal = torch.randint(SIGNAL[0], SIGNAL[-1] + 1, (n, 2), generator=generator)
    else:
        p = torch.from_numpy(np.asarray(signal_p, np.float64))
        signal = SIGNAL[0] + torch.multinomial(p, 2 * n, replacement=True, generator=generator).view(n, 2)
    pos = torch.rand(n, seq_len - 1, generator=generator).argsort(-1)[:, :2]  # (n, 2) distinct
    tokens.scatter_(1, pos, signal)
    tokens[:, -1] = READOFF
    return tokens, torch.from_numpy(class_table())[signal[:, 0], signal[:, 1]]


UNEMBEDS = ("learned", "one-hot")


class ReadoffAttention(nn.Module):
    """Fixed one-hot W_E [12, d_model] -> n_heads heads (W_Q, W_K, W_V [H, d_model, d_head], W_O
    [H, d_head, d_model]) + residual -> W_U [d_model, 10]. Row-vector convention, TransformerLens names.

    unembed "learned": d_model = 12, W_E the identity, W_U a parameter. "one-hot" (source 004's
    "one-hot (un)embeddings"): d_model = 22, the 12 input tokens and the 10 class tokens each own
    a residual direction; W_E = [I_12 | 0] and W_U = [0; I_10] are fixed, so the heads write
    class logits straight through W_O and the read-off's own embedding adds nothing to them.
    uniform (a control): W_Q is a buffer of zeros, every QK score 0, every head attends uniformly.
    The rows of W_Q, W_K, W_V no token uses and the columns of W_O no class reads start at 0
    and get no gradient; the others start as with the learned unembedding."""

    W_E: torch.Tensor  # a buffer (register_buffer)

    def __init__(
        self, n_heads: int, d_head: int, init_scale: float = 1.0, unembed: str = "learned", uniform: bool = False
    ):
        super().__init__()
        g = init_scale
        self.d_head = d_head
        d_in = D_VOCAB
        d_model = D_VOCAB if unembed == "learned" else D_VOCAB + N_CLASSES
        self.register_buffer("W_E", torch.eye(D_VOCAB, d_model))  # fixed one-hot embedding, stored in snapshots
        self.W_Q = nn.Parameter(g * _rows(torch.randn(n_heads, d_in, d_head), d_model) / math.sqrt(d_in))
        self.W_K = nn.Parameter(g * _rows(torch.randn(n_heads, d_in, d_head), d_model) / math.sqrt(d_in))
        self.W_V = nn.Parameter(g * _rows(torch.randn(n_heads, d_in, d_head), d_model) / math.sqrt(d_in))
        if unembed == "learned":
            self.W_O = nn.Parameter(g * torch.randn(n_heads, d_head, d_model) / math.sqrt(d_head * n_heads))
            self.W_U = nn.Parameter(g * torch.randn(d_model, N_CLASSES) / math.sqrt(d_model))
        else:
            W_O = torch.zeros(n_heads, d_head, d_model)
            W_O[..., D_VOCAB:] = g * torch.randn(n_heads, d_head, N_CLASSES) / math.sqrt(d_head * n_heads)
            self.W_O = nn.Parameter(W_O)
            W_U = torch.zeros(d_model, N_CLASSES)
            W_U[D_VOCAB:] = torch.eye(N_CLASSES)
            self.register_buffer("W_U", W_U)  # fixed one-hot unembedding, stored in snapshots
        if uniform:  # drawn as above (the other weights start as without it), then fixed at 0
            del self.W_Q
            self.register_buffer("W_Q", torch.zeros(n_heads, d_model, d_head))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, L] -> logits at the last (read-off) position [B, 10]."""
        x = self.W_E[tokens]  # (B, L, d_model)
        q = torch.einsum("bd,hde->bhe", x[:, -1], self.W_Q)  # (B, H, dh) read-off query
        k = torch.einsum("bld,hde->bhle", x, self.W_K)  # (B, H, L, dh)
        v = torch.einsum("bld,hde->bhle", x, self.W_V)
        att = (torch.einsum("bhe,bhle->bhl", q, k) / math.sqrt(self.d_head)).softmax(-1)
        z = torch.einsum("bhl,bhle->bhe", att, v)  # (B, H, dh)
        resid = x[:, -1] + torch.einsum("bhe,hed->bd", z, self.W_O)  # (B, d)
        return resid @ self.W_U

    def forward_counts(self, counts: torch.Tensor) -> torch.Tensor:
        """Key-token counts [N, 12] (read-off query) -> logits [N, 10]; equals `forward` on any
        sequence with those counts, since nothing depends on position."""
        q = self.W_E[READOFF] @ self.W_Q  # (H, dh)
        k = torch.einsum("vd,hde->hve", self.W_E, self.W_K)  # (H, V, dh)
        v = torch.einsum("vd,hde->hve", self.W_E, self.W_V)
        s = torch.einsum("he,hve->hv", q, k) / math.sqrt(self.d_head)  # (H, V) QK row of the read-off
        w = counts[:, None, :] * (s - s.max(-1, keepdim=True).values).exp()  # (N, H, V)
        att = w / w.sum(-1, keepdim=True)
        z = torch.einsum("nhv,hve->nhe", att, v)  # (N, H, dh)
        resid = self.W_E[READOFF] + torch.einsum("nhe,hed->nd", z, self.W_O)
        return resid @ self.W_U


class OVCoherentTask(Task[OVCoherentConfig]):
    model: ReadoffAttention

    name = "ov-coherent"
    description = "source 004: 2 heads of d_head 1 name the pair of signal tokens at a read-off token"
    Config = OVCoherentConfig

    def __init__(self, cfg: OVCoherentConfig):
        super().__init__(cfg)
        self.model = ReadoffAttention(cfg.n_heads, cfg.d_head, cfg.init_scale, cfg.unembed, cfg.uniform_attention)
        if cfg.weight_decay > 0:
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        else:
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.signal_p = signal_probs(cfg.signal_weights)
        # exact, or a fixed seeded sample for long L
        cases = task_cases(cfg.seq_len, seed=cfg.seed + 2, signal_weights=cfg.signal_weights)
        self.eval_counts = torch.from_numpy(cases.counts).float()
        self.eval_labels = torch.from_numpy(cases.labels).long()
        self.eval_probs = torch.from_numpy(cases.probs).double()
        self.exact = cases.exact

    def step(self, epoch: int) -> None:
        cfg = self.cfg
        tokens, labels = sample_batch(cfg.batch, cfg.seq_len, self.generator, self.signal_p)
        loss = functional.cross_entropy(self.model(tokens), labels)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.lr_schedule != "constant" or cfg.warmup:
            for group in self.optimizer.param_groups:
                group["lr"] = cfg.lr * lr_factor(epoch, cfg.epochs, cfg.lr_schedule, cfg.warmup)
        self.optimizer.step()

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        logits = self.model.forward_counts(self.eval_counts)
        nll = functional.cross_entropy(logits, self.eval_labels, reduction="none").double()
        correct = (logits.argmax(-1) == self.eval_labels).double()
        p = self.eval_probs
        per_class = torch.zeros(N_CLASSES, dtype=torch.float64).index_add_(
            0, self.eval_labels, p * correct
        ) / torch.zeros(N_CLASSES, dtype=torch.float64).index_add_(0, self.eval_labels, p)
        return {
            "loss": float((p * nll).sum() / p.sum()),
            "acc": float((p * correct).sum() / p.sum()),
            "worst_class_acc": float(per_class.min()),
        }

    def attrs(self) -> dict:
        return {"exact_eval": self.exact}

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"loss": f"{metrics['loss']:.3g}", "acc": f"{metrics['acc']:.4f}"}

    def summary(self, metrics: dict[str, float]) -> str:
        kind = "exact" if self.exact else "sampled"
        return (
            f"read-off accuracy {metrics['acc']:.2%} ({kind}), worst class {metrics['worst_class_acc']:.2%}, "
            f"loss {metrics['loss']:.3g}"
        )


TASKS = (OVCoherentTask,)  # the registered experiment (train/experiments.py)
BATCHING: dict[str, type] = {}  # no batched trainer: one run per process

"""Induction heads (source 003; docs/experiments.md): attention-only transformers continuing sequences made
of one random 6-letter block repeated 4 times.

Three registered variants share one model class and one config:

- `induction-1l`      one attention layer (the source: fails; a key is a linear function of its
                      own token and position, so it cannot say "the token *before* me was A").
- `induction-smeared` one layer with smeared keys (Olsson et al. 2022, "In-context learning
                      and induction heads", §"smeared keys"): per head a learned alpha,
                      k'_j = sigmoid(alpha) k_j + (1 - sigmoid(alpha)) k_{j-1}, with k_{-1} = k_0.
- `induction-2l`      two layers (the source: nearly succeeds, via K-composition).

Model (row vectors, TransformerLens names): x = W_E[tokens]; per layer
x += sum_h softmax(causal((x W_Q[h] + P_h) (x W_K[h] + P_h)^T / sqrt(d_head))) x W_V[h] W_O[h];
logits = x W_U. P_h is head h's slice of d_head columns of the sinusoidal table W_pos
(Vaswani et al. 2017): the positions are added to the query and key vectors (`positions=qk_vector`,
the default: source 003's "added to Q and K", read literally), so q.k holds the fixed term
W_pos[i].W_pos[j], which no weight can turn into "attend 5 back". `positions=qk_input` adds
W_pos to the inputs of W_Q and W_K instead: q = (x + W_pos) W_Q[h], a placement under which
heads can attend by position (docs/results/induction.md). Either way W_pos never reaches V or
the residual stream. No MLP, LayerNorm or biases.

Data: 26 letters; each sequence is a fresh block of `block_len` letters (distinct within the
block by default; `distinct=false` draws them independently, so repeats occur) repeated to
`seq_len`. Next-token cross-entropy on every position. AdamW (lr 1e-3, weight decay 1.0 on
the weight matrices; the smearing weights alpha are not decayed, nanoGPT's rule of decaying
only >= 2-D parameters). "Epochs" are optimizer steps on fresh batches drawn from
`self.generator`, so a resumed run equals an uninterrupted one bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from headmovies.errors import ConfigError
from headmovies.tasks.induction import DEFAULT_POSITIONS, POSITIONS, repeat_blocks, sinusoidal_table
from headmovies.train.config import TrainConfig, require_memory, require_signs
from headmovies.train.head_scores import repeated_tokens
from headmovies.train.probe import DEFAULT_BATCH, Probe
from headmovies.train.task import Task


@dataclass
class InductionConfig(TrainConfig):
    epochs: int = 10000  # optimizer steps (source 003)
    n_vocab: int = 26  # letters A..Z
    seq_len: int = 24  # context length
    block_len: int = 6  # the repeated block
    distinct: bool = True  # letters within a block are distinct (false: drawn independently)
    n_layers: int = 1
    smeared_keys: bool = False  # per-head learned mix of each key with the previous one
    d_model: int = 32
    n_heads: int = 4
    d_head: int = 8  # seed: 4 x 32^2 parameters per W_Q/W_K/W_V/W_O stack -> 4 heads x 8
    pos_base: float = 10000.0  # sinusoidal table W_pos[t, 2i] = sin(t / base^(2i/width)), cos for 2i+1
    positions: str = DEFAULT_POSITIONS  # "qk_vector": q = x W_Q + W_pos per head slice (source 003's
    # "added to Q and K", read literally); "qk_input": q = (x + W_pos) W_Q
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 1.0  # AdamW, decoupled; weight matrices only
    alpha_init: float = 0.0  # initial smearing logit: sigmoid(0) = half own key, half previous
    eval_size: int = 1024  # fixed evaluation batch (drawn from its own generator)

    @property
    def pos_width(self) -> int:
        """Columns of W_pos: d_model (added to Q/K inputs) or n_heads * d_head (to Q/K vectors)."""
        return self.d_model if self.positions == "qk_input" else self.n_heads * self.d_head

    def validate(self) -> None:
        super().validate()
        for key in (
            "n_vocab",
            "seq_len",
            "block_len",
            "n_layers",
            "d_model",
            "n_heads",
            "d_head",
            "batch_size",
            "eval_size",
        ):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.distinct and self.block_len > self.n_vocab:
            raise ConfigError(f"block_len ({self.block_len}) exceeds n_vocab ({self.n_vocab}) with distinct=true")
        if self.block_len >= self.seq_len:
            raise ConfigError(
                f"block_len ({self.block_len}) must be < seq_len ({self.seq_len}): nothing would be predictable"
            )
        if self.positions not in POSITIONS:
            raise ConfigError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
        if self.pos_width % 2:
            raise ConfigError(
                f"the sinusoidal table needs an even width, got {self.pos_width} "
                "(d_model, or n_heads * d_head with positions=qk_vector)"
            )
        require_signs(self, positive=("lr",), nonnegative=("weight_decay",))
        if not self.pos_base > 1:
            raise ConfigError(f"pos_base must be > 1, got {self.pos_base}")
        require_memory(self.memory_bytes(), "batch_size, eval_size, seq_len, n_layers, n_heads, d_head or d_model")

    def memory_bytes(self) -> int:
        """Estimated bytes of the largest tensors of a step: weights with gradients and AdamW
        moments, and per layer the attention scores [B, H, T, T], Q/K/V and the residual stream of
        the larger of the training and evaluation batches, with their gradients."""
        H, T, d = self.n_heads, self.seq_len, self.d_model
        params = 2 * self.n_vocab * d + self.n_layers * 4 * H * d * self.d_head + T * self.pos_width
        B = max(self.batch_size, self.eval_size)
        acts = self.n_layers * (3 * H * T * T + 10 * T * H * self.d_head + 6 * T * d) + 12 * T * self.n_vocab
        return 16 * params + 4 * B * acts


def repeated_blocks(
    n: int, cfg: InductionConfig, generator: torch.Generator, block_len: int | None = None
) -> torch.Tensor:
    """int64 [n, seq_len]: a fresh block of `block_len` letters per row, repeated (and cut) to
    seq_len. Distinct letters within a block unless cfg.distinct is false."""
    L = block_len or cfg.block_len
    if cfg.distinct:
        block = torch.rand(n, cfg.n_vocab, generator=generator).argsort(-1)[:, :L]  # (n, L)
    else:
        block = torch.randint(cfg.n_vocab, (n, L), generator=generator)
    return repeat_blocks(block, cfg.seq_len)  # (n, T)


class Attention(nn.Module):
    """One causal attention layer; W_pos enters Q and K only. Optional smeared keys."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_head: int,
        smeared: bool,
        alpha_init: float,
        positions: str = DEFAULT_POSITIONS,
    ):
        super().__init__()
        self.d_head, self.positions = d_head, positions
        self.W_Q = nn.Parameter(torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_K = nn.Parameter(torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_V = nn.Parameter(torch.randn(n_heads, d_model, d_head) / math.sqrt(d_model))
        self.W_O = nn.Parameter(torch.randn(n_heads, d_head, d_model) / math.sqrt(d_head * n_heads))
        self.alpha = nn.Parameter(torch.full((n_heads,), float(alpha_init))) if smeared else None

    def forward(
        self, x: torch.Tensor, pos: torch.Tensor, x_key: torch.Tensor | None = None, return_pattern: bool = False
    ):
        """x [B, T, d], pos = W_pos [T, d or H*dh] -> layer output [B, T, d] (added to the
        residual by the caller). `x_key` replaces x as the key input (removes K-composition)."""
        xk = x if x_key is None else x_key
        B, T, d = x.shape
        H, dh = self.W_Q.shape[0], self.d_head
        # One (d, H*dh) matmul per projection: much faster on CPU than per-head einsums.
        W_Q, W_K = self.W_Q.transpose(0, 1).reshape(d, H * dh), self.W_K.transpose(0, 1).reshape(d, H * dh)
        if self.positions == "qk_input":
            q, k = (x + pos) @ W_Q, (xk + pos) @ W_K  # (B, T, H*dh)
        else:
            q, k = x @ W_Q + pos, xk @ W_K + pos
        q = q.view(B, T, H, dh).transpose(1, 2)  # (B, H, T, dh)
        k = k.view(B, T, H, dh).transpose(1, 2)
        v = (x @ self.W_V.transpose(0, 1).reshape(d, H * dh)).view(B, T, H, dh).transpose(1, 2)  # (B, H, T, dh)
        if self.alpha is not None:
            s = torch.sigmoid(self.alpha)[None, :, None, None]  # (1, H, 1, 1)
            k_prev = torch.cat([k[:, :, :1], k[:, :, :-1]], dim=2)  # k_{j-1}, k_{-1} = k_0
            k = s * k + (1 - s) * k_prev
        scores = (q / math.sqrt(dh)) @ k.transpose(-1, -2)  # (B, H, T, T); scale the smaller tensor
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        pattern = scores.masked_fill(mask, float("-inf")).softmax(-1)
        z = pattern @ v  # (B, H, T, dh)
        out = z.transpose(1, 2).reshape(B, T, H * dh) @ self.W_O.reshape(H * dh, d)  # (B, T, d)
        return (out, pattern) if return_pattern else out


class Block(nn.Module):
    """Holds `attn` so that state-dict names read `blocks.0.attn.W_Q` (TransformerLens)."""

    def __init__(self, attn: Attention):
        super().__init__()
        self.attn = attn


class InductionTransformer(nn.Module):
    """Attention-only transformer: W_E [V, d] -> n_layers x Attention -> W_U [d, V]."""

    W_pos: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, cfg: InductionConfig):
        super().__init__()
        self.W_E = nn.Parameter(torch.randn(cfg.n_vocab, cfg.d_model))
        self.blocks = nn.ModuleList(
            Block(Attention(cfg.d_model, cfg.n_heads, cfg.d_head, cfg.smeared_keys, cfg.alpha_init, cfg.positions))
            for _ in range(cfg.n_layers)
        )
        self.W_U = nn.Parameter(torch.randn(cfg.d_model, cfg.n_vocab) / math.sqrt(cfg.d_model))
        # A constant, not a weight: kept out of the state dict; stored once as a run-file attribute.
        self.register_buffer(
            "W_pos", torch.from_numpy(sinusoidal_table(cfg.seq_len, cfg.pos_width, cfg.pos_base)), persistent=False
        )

    def forward(self, tokens: torch.Tensor, k_composition: bool = True) -> torch.Tensor:
        """tokens [B, T] int64 -> logits [B, T, V]. With k_composition=False, layers after the
        first compute their keys from the embeddings alone (no earlier layer's output)."""
        x0 = self.W_E[tokens]  # (B, T, d)
        pos = self.W_pos[: tokens.shape[1]]  # (T, d)
        x = x0
        for i, block in enumerate(cast(list[Block], self.blocks)):
            x = x + block.attn(x, pos, x_key=None if k_composition or i == 0 else x0)
        return x @ self.W_U  # (B, T, V)


def predictable_accuracy(logits: torch.Tensor, tokens: torch.Tensor, block_len: int) -> torch.Tensor:
    """Fraction of targets t in [block_len, T) predicted correctly (logits at t-1), a scalar."""
    pred = logits[:, block_len - 1 : -1].argmax(-1)
    return (pred == tokens[:, block_len:]).float().mean()


class InductionTask(Task[InductionConfig]):
    """Shared training logic of the three variants (the subclasses only set defaults)."""

    model: InductionTransformer

    Config = InductionConfig

    def __init__(self, cfg: InductionConfig):
        super().__init__(cfg)
        self.model = InductionTransformer(cfg)
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": cfg.weight_decay}]
        if no_decay:
            groups.append({"params": no_decay, "weight_decay": 0.0})
        self.optimizer = torch.optim.AdamW(groups, lr=cfg.lr)
        # Own generator, so the evaluation batch does not depend on (or advance) training draws.
        self.eval_tokens = repeated_blocks(cfg.eval_size, cfg, torch.Generator().manual_seed(cfg.seed + 2))

    def step(self, epoch: int) -> None:
        tokens = repeated_blocks(self.cfg.batch_size, self.cfg, self.generator)  # (B, T)
        logits = self.model(tokens)
        loss = functional.cross_entropy(logits[:, :-1].reshape(-1, self.cfg.n_vocab), tokens[:, 1:].reshape(-1))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self._train_loss = float(loss.detach())

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        cfg, tokens = self.cfg, self.eval_tokens
        logits = self.model(tokens)
        L = cfg.block_len
        pred_loss = functional.cross_entropy(logits[:, L - 1 : -1].reshape(-1, cfg.n_vocab), tokens[:, L:].reshape(-1))
        all_loss = functional.cross_entropy(logits[:, :-1].reshape(-1, cfg.n_vocab), tokens[:, 1:].reshape(-1))
        return {
            "train_loss": getattr(self, "_train_loss", float(all_loss)),
            "heldout_loss_all": float(all_loss),
            "heldout_loss": float(pred_loss),
            "heldout_acc": float(predictable_accuracy(logits, tokens, L)),
        }

    def probe_tokens(self) -> np.ndarray:
        """The standard induction probe: 8 sequences of seq_len // 2 random letters repeated twice
        (head_scores.repeated_tokens, fixed seed), the same for every run."""
        return repeated_tokens(self.cfg.n_vocab, self.cfg.seq_len // 2, DEFAULT_BATCH)

    def probe_record(self) -> dict[str, np.ndarray]:
        """Each head's patterns and scores on the probe (train/probe.py), RNG states untouched."""
        if getattr(self, "_probe", None) is None:
            attention = [block.attn for block in cast(list[Block], self.model.blocks)]
            self._probe = Probe(self.model, attention, self.probe_tokens(), vocab_out=self.cfg.n_vocab)
        return self._probe.run()

    def attrs(self) -> dict:
        return {"W_pos": self.model.W_pos.numpy()}

    def progress(self, metrics: dict[str, float]) -> dict[str, str]:
        return {"loss": f"{metrics['heldout_loss']:.3g}", "acc": f"{metrics['heldout_acc']:.3f}"}

    def summary(self, metrics: dict[str, float]) -> str:
        return (
            f"accuracy on predictable positions {metrics['heldout_acc']:.2%}, loss there {metrics['heldout_loss']:.4f}"
        )


@dataclass
class Induction1LConfig(InductionConfig):
    pass


@dataclass
class InductionSmearedConfig(InductionConfig):
    smeared_keys: bool = True


@dataclass
class Induction2LConfig(InductionConfig):
    n_layers: int = 2


class Induction1L(InductionTask):
    name = "induction-1l"
    description = "source 003: 1-layer attention-only transformer on repeated 6-letter blocks"
    Config = Induction1LConfig


class InductionSmeared(InductionTask):
    name = "induction-smeared"
    description = "source 003: 1-layer attention-only transformer with smeared keys"
    Config = InductionSmearedConfig


class Induction2L(InductionTask):
    name = "induction-2l"
    description = "source 003: 2-layer attention-only transformer (K-composition)"
    Config = Induction2LConfig


TASKS = (Induction1L, InductionSmeared, Induction2L)  # the registered experiments (train/experiments.py)
BATCHING: dict[str, type] = {}  # no batched trainer: one run per process

"""The orbit experiment's config (`OrbitConfig`): its defaults, their checks and its memory
estimate. docs/experiments.md lists every key; docs/notebook/ says why these defaults."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from typing import Any, ClassVar

from headmovies.errors import ConfigError
from headmovies.train.config import TrainConfig, require_memory, require_signs


@dataclass
class OrbitConfig(TrainConfig):
    epochs: int = 16000  # full-batch steps (docs/notebook/2026-11-30-orbit-search.md: why these defaults)
    seed: int = 24  # the census's most source-like run (docs/notebook/2026-12-01-default-run.md)
    p: int = 24  # n: token values and the order of the group C_n (the config key is p)
    n_heads: int = 32
    d_model: int = 128
    d_head: int = 4
    residual: bool = False  # add the residual stream (direct path W_E W_U) to the layer output
    init_scale: float = 1.0  # multiplies every initial weight
    train_frac: float = 0.3  # fraction of the n^3 inputs used for cross-entropy
    split: str = "orbit"  # "random" inputs, or whole shift-"orbit"s of inputs held out together
    lr: float = 1e-3
    lr_schedule: str = "cosine"  # "constant" or "cosine" (decays to 0 at the final epoch)
    weight_decay: float = 0.1  # AdamW, decoupled
    eq_weight: float = 10.0  # lambda: loss = CE(train) + lambda * eq_loss
    eq_inputs: str = "all"  # inputs x the equivariance term sees: "all" n^3, or "train"
    eq_start: int = 500  # lambda is 0 before this epoch (fit first) ...
    eq_ramp: int = 2000  # ... then rises linearly to eq_weight over this many epochs
    eq_seq_lens: str = ""  # e.g. "2,4,8": the equivariance term also sees random sequences of these lengths ...
    eq_seq_batch: int = 16  # ... this many of each length per step, each at all n shifts
    ov_bias_weight: float = 0.0  # mu: + mu * ov_bias_penalty (the part of the OV biases a shift moves)
    # Optional second phase, a fine-tune of the first phase's weights within the same run:
    refine_start: int = 10000  # epoch at which it starts (the first phase's cosine ends here); off
    # when 0 or >= epochs
    refine_lr: float = 3e-4  # AdamW moments reset; lr restarts here (cosine to 0 at `epochs`)
    refine_weight_decay: float = 0.1
    refine_eq_weight: float = 100.0  # lambda ramps from 0 to this over refine_ramp epochs
    refine_ramp: int = 2000
    refine_seq_lens: str = "6"  # sequence lengths of the equivariance term in this phase
    refine_prune: float = 0.0  # at its start, zero the heads whose centred OV norm is below this
    # fraction of the largest head's (0: keep all; 0.25 in the census's
    # with-additions recipe)
    refine_ov_bias_weight: float = 0.01  # mu of ov_bias_penalty in this phase
    # Levers within source 000's objective (docs/experiments.md, "Levers"); stored
    # in the run file only when set (OMIT_AT_DEFAULT), so the default run's file is unchanged:
    score_scale: float = 1.0  # multiplies every attention score (QK table) of the layer
    qk_decay: bool = True  # false: W_Q and W_K get no weight decay (the others keep theirs)
    qk_init: float = 1.0  # multiplies the initial W_Q and W_K (1: the default init)
    frozen_embed: bool = False  # W_E one-hot tokens (coordinates 0..n-1, times sqrt(d_model)),
    # W_U one-hot classes (read from coordinates n..2n-1), both frozen: a shift permutes coordinates
    impose_orbit_at: int = 0  # at this epoch project each fitting frequency group onto its
    # nearest exact orbit (train/orbits/impose.py) and train on; 0: never (an experiment, labelled)
    # the grid attention's kernel (train/orbits/attention.py; each rounds its own way, so the same
    # seed gives another run): "fused" (the default since 2026-12-08), "eager" (the kernel of every
    # run before, the census's included), "compiled" (eager through torch.compile; needs a C++
    # compiler and compiles for tens of seconds at the first step)
    grid_kernel: str = "fused"

    OMIT_AT_DEFAULT = ("score_scale", "qk_decay", "qk_init", "frozen_embed", "impose_orbit_at", "grid_kernel")
    # run files from before the fused kernel have no grid_kernel: they were trained with "eager"
    ABSENT_MEANS: ClassVar[dict[str, Any]] = {"grid_kernel": "eager"}

    def levers(self) -> list[str]:
        """'key=value' of each lever key (OMIT_AT_DEFAULT but grid_kernel, which changes how the
        grid term is computed, not the objective) not at its default."""
        default = OrbitConfig()
        keys = [k for k in self.OMIT_AT_DEFAULT if k != "grid_kernel"]
        return [f"{k}={getattr(self, k)}" for k in keys if getattr(self, k) != getattr(default, k)]

    def validate(self) -> None:
        super().validate()
        if self.p < 2:
            raise ConfigError(f"p must be >= 2, got {self.p}")
        for key in ("n_heads", "d_model", "d_head"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, key)}")
        if not 0 < self.train_frac <= 1:
            raise ConfigError(f"train_frac must be in (0, 1], got {self.train_frac}")
        require_signs(
            self, positive=("lr", "init_scale", "score_scale", "qk_init"), nonnegative=("weight_decay", "eq_weight")
        )
        if self.frozen_embed and self.d_model < 2 * self.p:
            raise ConfigError(
                f"frozen_embed needs d_model >= 2 p (tokens and classes in their own coordinates), "
                f"got d_model={self.d_model}, p={self.p}"
            )
        if not 0 <= self.impose_orbit_at < max(1, self.epochs):
            raise ConfigError(f"impose_orbit_at must be an epoch in 1..epochs-1 (0: never), got {self.impose_orbit_at}")
        for key in ("ov_bias_weight", "refine_ov_bias_weight"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{key} must be >= 0 (0: no OV-bias penalty), got {getattr(self, key)}")
        if not 0 <= self.refine_prune < 1:
            raise ConfigError(f"refine_prune must be in [0, 1) (0: prune nothing), got {self.refine_prune}")
        if self.eq_start < 0 or self.eq_ramp < 0 or self.eq_seq_batch < 1:
            raise ConfigError("eq_start and eq_ramp must be >= 0, eq_seq_batch >= 1")
        for key in ("eq_seq_lens", "refine_seq_lens"):
            text = getattr(self, key).replace(" ", "")
            if (text and not re.fullmatch(r"[0-9]+(,[0-9]+)*", text)) or any(
                not 1 <= n <= MAX_SEQ_LEN for n in seq_lengths(text)
            ):
                raise ConfigError(
                    f"{key} must be a comma-separated list of lengths from 1 to {MAX_SEQ_LEN} "
                    f"(e.g. '4' or '2,4,8'), got {getattr(self, key)!r}"
                )
        if self.refine_start < 0:
            raise ConfigError(f"refine_start must be >= 0 (0: no second phase), got {self.refine_start}")
        if self.refine_lr <= 0 or self.refine_weight_decay < 0 or self.refine_eq_weight < 0 or self.refine_ramp < 0:
            raise ConfigError("refine_lr must be > 0; refine_weight_decay, refine_eq_weight and refine_ramp >= 0")
        choices = {
            "split": ("random", "orbit"),
            "eq_inputs": ("all", "train"),
            "lr_schedule": ("constant", "cosine"),
            "grid_kernel": ("fused", "eager", "compiled"),
        }
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ConfigError(f"{key} must be one of {allowed}, got {getattr(self, key)!r}")
        if self.grid_kernel == "compiled" and not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
            raise ConfigError("grid_kernel=compiled needs a C++ compiler (c++, g++ or clang++ on PATH); none found")
        require_memory(self.memory_bytes(), "p, n_heads, d_model, d_head, eq_seq_batch or the sequence lengths")

    def memory_bytes(self) -> int:
        """Estimated bytes of the largest tensors of a step: weights with gradients and AdamW
        moments, the n^4 grid (gather index, its meshgrid, logits and their gradients), the grid
        attention [H, n, n, n] and its backward, and the sequence term [H, n B, L, L]."""
        n, H = self.p, self.n_heads
        params = 2 * n * self.d_model + 4 * H * self.d_model * self.d_head
        L = max(seq_lengths(self.eq_seq_lens) + seq_lengths(self.refine_seq_lens) + [0])
        seq = 24 * H * n * self.eq_seq_batch * L * L + 8 * n * n * self.eq_seq_batch * L * H
        return 16 * params + 96 * n**4 + 40 * H * n**3 + seq

    def refines(self) -> bool:
        """True if the run has a second phase: 0 < refine_start < epochs (a shorter run, e.g.
        --set epochs=2000, is the first phase alone, its cosine ending at `epochs`)."""
        return 0 < self.refine_start < self.epochs


MAX_SEQ_LEN = 64  # the sequence term holds n_heads x 24 x eq_seq_batch x L^2 scores (L = 64: ~0.2 GB)


def seq_lengths(text: str) -> list[int]:
    """'2,4,8' -> [2, 4, 8] ([] when empty). Raises ValueError on a non-integer."""
    return [int(t) for t in text.replace(" ", "").split(",") if t]

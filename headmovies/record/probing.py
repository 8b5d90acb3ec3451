"""The Recorder's probe (docs/recording.md, "The probe"): which batch, and whether one runs.

probe=DEFAULT   the standard induction probe (`head_scores.repeated_tokens`: 4 sequences of
                32 random tokens repeated twice, fixed seed, from the recorded vocabulary,
                shorter when the model's W_pos is), when the model is a torch module whose
                W_E is found and that has a forward; else off
probe=None      off
probe=TOKENS    your own batch, ints [batch, positions] (or one sequence [positions])
forward=fn      `fn(tokens) -> output` in place of `model(tokens)`
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from headmovies.errors import ConfigError, warn
from headmovies.record.adapters import Adapter
from headmovies.train.head_scores import repeated_tokens
from headmovies.train.probe import MAX_POSITIONS, Probe

DEFAULT = "default"  # Recorder(probe=...)'s default: the standard induction probe where it can run
# The default probe's sequences: the first 4 of the built-in trainers' 8 (the same generator). While
# induction heads form, every head's mean score over them lies within 0.026 of its mean over 64
# sequences (8: 0.022), at half the probe's cost (docs/recording.md, "How many probe sequences").
SEQUENCES = 4


def default_tokens(weights: dict[str, np.ndarray], tokens: int) -> np.ndarray | None:
    """The default probe batch for a model whose weights (`Adapter.read()`) are `weights`, with
    `tokens` token values recorded: None without W_E or with under 2 tokens or 4 positions."""
    if "W_E" not in weights:
        return None
    vocab = min(int(weights["W_E"].shape[0]), tokens)
    positions = MAX_POSITIONS if "W_pos" not in weights else min(MAX_POSITIONS, int(weights["W_pos"].shape[0]))
    if vocab < 2 or positions < 4:
        return None
    return repeated_tokens(vocab, positions // 2, SEQUENCES)


def make_probe(
    model: Any,
    adapter: Adapter,
    probe: Any,
    forward: Callable[[torch.Tensor], Any] | None,
    tokens: int,
) -> Probe | None:
    """The Recorder's Probe (module docstring), or None when off. ConfigError (one line) for a
    batch that is not ints [batch, positions], holds a token id past W_E's rows or more positions
    than W_pos's rows, or a probe asked of a weights function."""
    if probe is None:
        return None
    default = isinstance(probe, str) and probe == DEFAULT
    if not isinstance(model, nn.Module) or not adapter.modules:
        if default:
            return None
        raise ConfigError("a probe needs the model itself (a torch module), not a weights function")
    weights = adapter.read()
    vocab_out = int(weights["W_U"].shape[1]) if "W_U" in weights else None
    if default:
        if forward is None and type(model).forward is nn.Module.forward:
            return None  # a model without a forward of its own (weights only) is not probed
        batch = default_tokens(weights, tokens)
        if batch is None:
            return None
    else:
        if isinstance(probe, torch.Tensor):
            probe = probe.detach().cpu().numpy()
        batch = np.asarray(probe)
        if batch.ndim == 1:
            batch = batch[None]
        if (
            batch.ndim != 2
            or batch.shape[0] < 1
            or batch.shape[1] < 2
            or not np.issubdtype(batch.dtype, np.integer)
            or batch.min() < 0
        ):
            raise ConfigError(
                "probe must be None or token ids, ints >= 0 [batch >= 1, positions >= 2]; "
                f"got {batch.dtype} {list(batch.shape)}"
            )
        d_vocab = int(weights["W_E"].shape[0]) if "W_E" in weights else None  # checked now, not at the first step
        if d_vocab is not None and int(batch.max()) >= d_vocab:
            raise ConfigError(
                f"probe token ids must be below the vocabulary's {d_vocab} (W_E's rows); got {batch.max()}"
            )
        n_ctx = int(weights["W_pos"].shape[0]) if "W_pos" in weights else None
        if n_ctx is not None and batch.shape[1] > n_ctx:
            raise ConfigError(
                f"probe sequences must fit the model's {n_ctx} positions (W_pos's rows); got {batch.shape[1]}"
            )
    if forward is not None and not callable(forward):
        raise ConfigError(f"forward must be a function tokens -> output, got {type(forward).__name__}")
    return Probe(model, list(adapter.modules), batch, forward, vocab_out)


def first_run(probe: Probe, default: bool) -> dict[str, np.ndarray] | None:
    """The probe's first record. A default probe that fails (a model whose forward is not
    `model(tokens)`) is warned about once and turned off (None); a probe asked for raises its
    error as one line (ConfigError)."""
    try:
        return probe.run()
    except Exception as exc:
        line = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
        if default:
            warn(
                f"the default probe could not run the model ({line}); recording weights only. Pass forward=fn "
                "(fn(tokens) -> logits) to say how to call it, or probe=None to silence this"
            )
            return None
        raise ConfigError(
            f"the probe could not run the model: {line}; pass forward=fn (fn(tokens) -> logits)"
        ) from None


def match_stored(probe: Probe | None, stored: np.ndarray | None, path: Any) -> Probe | None:
    """The probe to continue a resumed file with: its own stored batch (`stored`, None for a file
    recorded without a probe: then none, warned about when one was asked for)."""
    if stored is None:
        if probe is not None:
            warn(f"{path} was recorded without a probe: resuming it without one")
        return None
    if probe is None:
        raise ConfigError(f"cannot resume {path} without a probe: it was recorded with one (leave probe= as it was)")
    probe.tokens = np.asarray(stored, np.int64)
    return probe


def decoded(decode, tokens: np.ndarray) -> list[str] | None:
    """The first sequence of the probe batch `tokens` [B, P] as strings [P], each token decoded
    alone (`decode([id])`), or None without `decode`. ConfigError naming the token if decode fails
    or returns something other than a string."""
    if decode is None:
        return None
    out = []
    for i in np.asarray(tokens)[0]:
        try:
            text = decode([int(i)])
        except Exception as exc:
            raise ConfigError(f"decode([{int(i)}]) failed on the probe's token {int(i)}: {exc}") from None
        if not isinstance(text, str):
            raise ConfigError(f"decode([{int(i)}]) returned {type(text).__name__}, not a string (decode: ids -> text)")
        out.append(text)
    return out

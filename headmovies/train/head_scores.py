"""What each head does on a probe batch: the field's per-head scores, pure functions on arrays.

The three attention scores are TransformerLens's head detectors (`transformer_lens/head_detector.py`,
`detect_head` with its defaults: error measure "mul", BOS and current token not excluded), so the
numbers compare with theirs: for a pattern A [q_pos, k_pos] (rows sum to 1) and a 0/1 detection
pattern D [q_pos, k_pos] (lower triangular),

    score = sum(A * D) / sum(A)                      (the fraction of attention on D's pairs)

averaged over the probe's sequences (as `detect_head` averages a list of prompts), with

    previous-token   D[i, i-1] = 1
    duplicate-token  D[i, j] = 1 when j < i and token[j] == token[i]
    induction        D[i, j] = 1 when 1 <= j <= i and token[j-1] == token[i] (the key after an
                     earlier copy of the query's token: duplicate shifted one key to the right)

On the standard induction probe (n random tokens repeated twice, 2n positions) a perfect
induction head scores n/(2n) = 0.5, since only the second half's queries have an earlier copy;
uniform causal attention scores about ln(2)/2n.

The in-context score is Olsson et al. (2022, "In-context learning and induction heads", §2):
the loss late in the context minus the loss early in it; here, on the repeated probe, the mean
next-token loss predicting the second copy (positions n+1..2n-1) minus that predicting the first
(positions 1..n-1). Negative when the model uses the context (an induction head copies).
"""

from __future__ import annotations

import numpy as np

SCORES = ("previous_token", "duplicate_token", "induction")  # /probe/scores/<name> in the run file
PROBE_SEED = 45  # the default probe's random seed (a fixed probe: the same at every snapshot)


def repeated_tokens(vocab: int, half: int, batch: int, seed: int = PROBE_SEED) -> np.ndarray:
    """The standard induction probe: `batch` sequences of `half` tokens drawn uniformly from
    0..vocab-1 (numpy's PCG64 with `seed`, independent of any global RNG), each repeated twice.
    int64 [batch, 2 * half]. ValueError for vocab < 2 or half < 2."""
    if vocab < 2 or half < 2 or batch < 1:
        raise ValueError(f"a probe needs vocab >= 2, half >= 2, batch >= 1 (got {vocab}, {half}, {batch})")
    first = np.random.default_rng(seed).integers(0, vocab, size=(batch, half), dtype=np.int64)
    return np.concatenate([first, first], axis=1)


def previous_token_pattern(tokens: np.ndarray) -> np.ndarray:
    """D [P, P] float: 1 at (i, i-1). `tokens` [P] (only its length matters)."""
    P = len(tokens)
    return np.eye(P, k=-1)


def duplicate_token_pattern(tokens: np.ndarray) -> np.ndarray:
    """D [P, P] float: 1 at (i, j) for j < i with tokens[j] == tokens[i]. `tokens` [P] ints."""
    t = np.asarray(tokens)
    return np.tril((t[:, None] == t[None, :]).astype(np.float64), k=-1)


def induction_pattern(tokens: np.ndarray) -> np.ndarray:
    """D [P, P] float: 1 at (i, j) when j >= 1, j <= i and tokens[j-1] == tokens[i] with j-1 < i
    (the key after an earlier copy of the query's token), as TransformerLens builds it."""
    dup = duplicate_token_pattern(tokens)
    out = np.zeros_like(dup)
    out[:, 1:] = dup[:, :-1]
    return np.tril(out)


DETECTORS = {
    "previous_token": previous_token_pattern,
    "duplicate_token": duplicate_token_pattern,
    "induction": induction_pattern,
}


def detection_patterns(tokens: np.ndarray) -> dict[str, np.ndarray]:
    """Each score's detection pattern on each probe sequence: {score name: D [B, P, P] float64}
    for tokens [B, P] ints (a fixed probe's, computed once and passed to `head_scores`)."""
    return {name: np.stack([detector(t) for t in np.asarray(tokens)]) for name, detector in DETECTORS.items()}


def head_scores(
    patterns: np.ndarray, tokens: np.ndarray, detection: dict[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """Every head's scores (module docstring) on a probe batch.

    patterns: [B, L, H, P, P] attention (query rows, key columns; NaN rows for heads a layer
    lacks); tokens: [B, P] ints; detection: `detection_patterns(tokens)` when already computed.
    Returns {score name: [L, H] float64}, each the mean over the B sequences of sum(A * D) / sum(A)."""
    A = np.asarray(patterns, dtype=np.float64)
    tokens = np.asarray(tokens)
    if A.ndim != 5 or A.shape[-1] != A.shape[-2] or A.shape[0] != tokens.shape[0] or A.shape[-1] != tokens.shape[1]:
        raise ValueError(f"patterns [B, L, H, P, P] must fit tokens [B, P]: got {A.shape} and {tokens.shape}")
    if detection is None:
        detection = detection_patterns(tokens)
    out = {}
    for name in DETECTORS:
        D = detection[name]  # [B, P, P]
        hit = np.einsum("blhqk,bqk->blh", A, D)
        out[name] = (hit / A.sum(axis=(-1, -2))).mean(axis=0)
    return out


def in_context_score(logits: np.ndarray, tokens: np.ndarray) -> float:
    """Olsson et al.'s in-context score on the repeated probe (module docstring): mean next-token
    cross-entropy (nats) on the second copy minus that on the first. logits [B, 2n, V] (position
    i predicts token i+1), tokens [B, 2n] ints (two copies of n tokens). ValueError otherwise."""
    logits = np.asarray(logits, dtype=np.float64)
    tokens = np.asarray(tokens)
    B, P = tokens.shape
    if logits.ndim != 3 or logits.shape[:2] != (B, P) or P % 2 or P < 4:
        raise ValueError(f"logits [B, 2n, V] must fit tokens [B, 2n]: got {logits.shape} and {tokens.shape}")
    n = P // 2
    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    nll = -np.take_along_axis(logp[:, :-1], tokens[:, 1:, None], axis=-1)[..., 0]  # [B, P-1]: predicts 1..P-1
    early = nll[:, : n - 1]  # predicting tokens 1..n-1
    late = nll[:, n:]  # predicting tokens n+1..2n-1
    return float(late.mean() - early.mean())


def strongest(scores: dict[str, np.ndarray]) -> dict[str, tuple[int, int, float]]:
    """For each score [L, H], the head with the largest (NaN ignored): {name: (layer, head, value)}."""
    out = {}
    for name, s in scores.items():
        s = np.asarray(s, dtype=np.float64)
        if not np.isfinite(s).any():
            continue
        flat = int(np.nanargmax(s))
        layer, head = divmod(flat, s.shape[1])
        out[name] = (layer, head, float(s[layer, head]))
    return out

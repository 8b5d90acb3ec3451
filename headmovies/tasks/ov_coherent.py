"""The OV-coherent read-off task (source 004; docs/math.md, "OV-coherent analyses").

Source: L. Greenspan, "An OV-Coherent Toy Model of Attention Head Superposition", AI Alignment
Forum, 29 Aug 2023 (source 004).

Tokens (12): 0 = read-off, 1-4 = signal, 5-11 = noise. A sequence of length L holds two signal
tokens A, B (independent, each uniform on 1-4 by default, else drawn with the probabilities
`signal_probs` makes of the config's `signal_weights`) at two distinct random positions among the
first L-1, uniform noise elsewhere, and the read-off last. Label: the unordered pair {A, B}, one of 10
classes ordered (1,1), (1,2), (1,3), (1,4), (2,2), ..., (4,4).

Without positions, the read-off's output depends only on how many times each token occurs
among the keys, so the whole distribution collapses to (class, noise multiset) cases with
known probabilities (`task_cases`): 10 x C(L-3+6, 6) cases, 17,160 for L = 10.
"""

from __future__ import annotations

import math
from itertools import combinations_with_replacement

import numpy as np

from headmovies.errors import UserError

EXPERIMENTS = ("ov-coherent",)
READOFF = 0
SIGNAL = (1, 2, 3, 4)
NOISE = tuple(range(5, 12))
D_VOCAB = 12
CLASSES = [(a, b) for a in SIGNAL for b in SIGNAL if a <= b]  # class index -> (A, B), A <= B
CLASS_NAMES = [f"{{{a},{b}}}" for a, b in CLASSES]
N_CLASSES = len(CLASSES)
MAX_EXACT_CASES = 200_000  # beyond this many (class, noise multiset) cases, use a sample
SAMPLE_CASES = 65_536
UNIFORM_SIGNAL = "1,1,1,1"  # signal_weights of the source's task: tokens 1-4 equally often
WEIGHT_NAMES = ["W_E", "W_Q", "W_K", "W_V", "W_O", "W_U"]


def class_table() -> np.ndarray:
    """int64 [5, 5]: class index of {a, b} for signal tokens a, b in 1-4 (-1 elsewhere)."""
    table = np.full((5, 5), -1, dtype=np.int64)
    for c, (a, b) in enumerate(CLASSES):
        table[a, b] = table[b, a] = c
    return table


class Cases:
    """The task distribution as key-token counts at the read-off.

    counts [N, 12] int (token occurrences in the sequence, read-off included), labels [N] int
    (class index), probs [N] float64 summing to 1, exact (bool: full enumeration, else a seeded
    sample of `SAMPLE_CASES` sequences, used when there are more than `MAX_EXACT_CASES` cases).
    """

    def __init__(self, counts: np.ndarray, labels: np.ndarray, probs: np.ndarray, exact: bool):
        self.counts, self.labels, self.probs, self.exact = counts, labels, probs, exact

    def __len__(self) -> int:
        return len(self.labels)


def signal_probs(weights: str = UNIFORM_SIGNAL) -> np.ndarray:
    """float64 [4]: the probability of each signal token 1-4 (A and B are drawn independently
    with it) from relative weights written '4,3,2,1' (one positive number per token, any
    scale). UserError for another count, a non-number, a weight <= 0 or not finite."""
    parts = [p.strip() for p in str(weights).split(",")]
    try:
        w = np.array([float(p) for p in parts], np.float64)
    except ValueError:
        raise UserError(f"signal_weights must be {len(SIGNAL)} numbers like '4,3,2,1', got {weights!r}") from None
    if len(w) != len(SIGNAL) or not np.isfinite(w).all() or (w <= 0).any():
        raise UserError(
            f"signal_weights must be {len(SIGNAL)} finite positive numbers, one per signal token 1-4 "
            f"(e.g. '4,3,2,1'), got {weights!r}"
        )
    return w / w.sum()


def class_probs(weights: str = UNIFORM_SIGNAL) -> np.ndarray:
    """float64 [10]: P(class) for independent A, B with `signal_probs(weights)`: p_a^2 for {a,a},
    2 p_a p_b for {a,b} (uniform: 1/16 and 2/16)."""
    p = signal_probs(weights)
    return np.array([p[a - 1] * p[b - 1] * (1 if a == b else 2) for a, b in CLASSES])


def n_exact_cases(seq_len: int) -> int:
    """Number of (class, noise multiset) cases of sequences of length `seq_len`."""
    return N_CLASSES * math.comb(seq_len - 3 + len(NOISE) - 1, len(NOISE) - 1)


def task_cases(seq_len: int, seed: int = 0, signal_weights: str = UNIFORM_SIGNAL) -> Cases:
    """All (class, noise multiset) cases of sequences of length `seq_len` with their exact
    probabilities: P(class) * multinomial(noise counts) / 7^(L-3), P(class) from `class_probs`
    (uniform signal tokens: P({a,a}) = 1/16, P({a,b}) = 2/16); a seeded sample when there are
    more than MAX_EXACT_CASES. Raises UserError if seq_len < 3 or for bad `signal_weights`."""
    if seq_len < 3:
        raise UserError(f"seq_len (L) must be >= 3 to hold two signal tokens and the read-off, got {seq_len}")
    p_class = class_probs(signal_weights)
    if n_exact_cases(seq_len) > MAX_EXACT_CASES:
        return _sampled_cases(seq_len, seed, signal_weights)
    n_noise, k = seq_len - 3, len(NOISE)
    multisets = list(combinations_with_replacement(range(k), n_noise))
    noise = np.zeros((len(multisets), k), np.int64)
    for i, ms in enumerate(multisets):
        np.add.at(noise[i], list(ms), 1)
    log_fact = np.array([math.lgamma(j + 1) for j in range(n_noise + 1)])
    p_noise = np.exp(log_fact[n_noise] - log_fact[noise].sum(1) - n_noise * math.log(k))
    counts, labels, probs = [], [], []
    for c, (a, b) in enumerate(CLASSES):
        block = np.zeros((len(noise), D_VOCAB), np.int64)
        block[:, READOFF] = 1
        block[:, a] += 1
        block[:, b] += 1
        block[:, NOISE[0] :] = noise
        counts.append(block)
        labels.append(np.full(len(noise), c))
        probs.append(p_noise * p_class[c])
    return Cases(np.concatenate(counts), np.concatenate(labels), np.concatenate(probs), True)


def _sampled_cases(seq_len: int, seed: int, signal_weights: str = UNIFORM_SIGNAL) -> Cases:
    rng = np.random.default_rng(seed)
    n = SAMPLE_CASES
    p = signal_probs(signal_weights)
    if (p == p[0]).all():  # uniform: the draws made before signal_weights existed
        pair = rng.integers(SIGNAL[0], SIGNAL[-1] + 1, (n, 2))
    else:
        pair = rng.choice(np.array(SIGNAL), size=(n, 2), p=p)
    counts = np.zeros((n, D_VOCAB), np.int64)
    counts[:, READOFF] = 1
    np.add.at(counts, (np.arange(n)[:, None], pair), 1)
    noise = rng.integers(NOISE[0], NOISE[-1] + 1, (n, seq_len - 3))
    np.add.at(counts, (np.arange(n)[:, None], noise), 1)
    return Cases(counts, class_table()[pair[:, 0], pair[:, 1]], np.full(n, 1.0 / n), False)

"""The head scores (train/head_scores.py) on patterns with known answers, and equal to
TransformerLens's own head detectors (head_detector.py) on random patterns and tokens."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headmovies.train.head_scores import (
    SCORES,
    head_scores,
    in_context_score,
    repeated_tokens,
    strongest,
)

N = 16  # half the probe: 2N positions


def _distinct_probe() -> np.ndarray:
    return np.concatenate([np.arange(N), np.arange(N)])[None]  # no token twice in a copy


def _head(rows: dict[int, int], P: int = 2 * N) -> np.ndarray:
    """A pattern [P, P] attending from query i to key rows[i] (else to itself)."""
    A = np.eye(P)
    for i, j in rows.items():
        A[i] = 0
        A[i, j] = 1
    return A


def test_perfect_heads_score_what_the_definitions_say():
    tokens = _distinct_probe()
    P = 2 * N
    prev = _head({i: i - 1 for i in range(1, P)})
    dup = _head({i: i - N for i in range(N, P)})
    ind = _head({i: i - N + 1 for i in range(N, P)})
    causal = np.tril(np.ones((P, P)))
    uniform = causal / causal.sum(1, keepdims=True)
    A = np.stack([prev, dup, ind, uniform])[None, None]  # [1, 1, 4, P, P]
    s = head_scores(A, tokens)
    assert set(s) == set(SCORES)
    np.testing.assert_allclose(s["previous_token"][0], [(P - 1) / P, 0, 0, sum(1 / (i + 1) for i in range(1, P)) / P])
    np.testing.assert_allclose(s["duplicate_token"][0, :3], [0, 0.5, 0])
    np.testing.assert_allclose(s["induction"][0, :3], [0, 0, 0.5])  # a perfect induction head: n / 2n
    np.testing.assert_allclose(s["induction"][0, 3], sum(1 / (i + 1) for i in range(N, P)) / P)  # chance
    assert s["induction"][0, 3] < 0.05


def test_scores_equal_transformer_lens_head_detectors():
    hd = pytest.importorskip("transformer_lens.head_detector")
    rng = np.random.default_rng(0)
    B, L, H, P = 3, 2, 3, 12
    tokens = rng.integers(0, 4, size=(B, P))  # small vocabulary: many duplicates
    logits = rng.normal(size=(B, L, H, P, P)) * 2
    logits[..., np.triu_indices(P, 1)[0], np.triu_indices(P, 1)[1]] = -np.inf
    A = np.exp(logits - logits.max(-1, keepdims=True))
    A /= A.sum(-1, keepdims=True)
    ours = head_scores(A, tokens)
    for name, tl_name in zip(SCORES, ("previous_token_head", "duplicate_token_head", "induction_head"), strict=True):
        make = getattr(hd, f"get_{tl_name}_detection_pattern")
        for layer in range(L):
            for head in range(H):
                theirs = np.mean(
                    [
                        hd.compute_head_attention_similarity_score(
                            torch.tensor(A[b, layer, head]),
                            make(torch.tensor(tokens[b])[None]).double(),
                            exclude_bos=False,
                            exclude_current_token=False,
                            error_measure="mul",
                        )
                        for b in range(B)
                    ]
                )
                assert ours[name][layer, head] == pytest.approx(theirs, abs=1e-9), (name, layer, head)


def test_in_context_score_is_late_loss_minus_early_loss():
    tokens = _distinct_probe()
    V, P = N, 2 * N
    logits = np.zeros((1, P, V))  # uniform: ln V everywhere
    assert in_context_score(logits, tokens) == pytest.approx(0.0)
    for i in range(N, P - 1):  # the second copy predicted with certainty
        logits[0, i, tokens[0, i + 1]] = 50.0
    assert in_context_score(logits, tokens) == pytest.approx(-math.log(V), abs=1e-9)
    with pytest.raises(ValueError, match="must fit tokens"):
        in_context_score(logits[:, :-1], tokens)


def test_the_default_probe_is_fixed_and_repeated():
    a, b = repeated_tokens(7, 5, 3), repeated_tokens(7, 5, 3)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (3, 10) and a.dtype == np.int64 and a.max() < 7
    np.testing.assert_array_equal(a[:, :5], a[:, 5:])
    with pytest.raises(ValueError, match="a probe needs vocab >= 2"):
        repeated_tokens(1, 5, 3)


def test_strongest_head_per_score():
    s = {"induction": np.array([[0.1, np.nan], [0.7, 0.2]]), "previous_token": np.full((2, 2), np.nan)}
    assert strongest(s) == {"induction": (1, 0, 0.7)}

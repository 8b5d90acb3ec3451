"""The induction trainer's model in numpy (`headmovies/train/induction.py`), run on the weights
stored in a run file: the forward pass (with K- or Q-composition removable), greedy
completion, mean attention patterns and attention by offset.

Weights are a dict by TransformerLens name (`W_E [V, d]`, `blocks.{l}.attn.W_Q/W_K/W_V
[H, d, dh]`, `W_O [H, dh, d]`, optional `blocks.{l}.attn.alpha [H]` for smeared keys,
`W_U [d, V]`); `W_pos` is the run's sinusoidal table (a root attribute), which enters Q and
K only (see `Model`). Needs only numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from headmovies.errors import UserError
from headmovies.tasks.induction import positions_of


@dataclass
class Model:
    """One snapshot of an induction model: `weights` by TransformerLens name, the run's
    sinusoidal table `W_pos` [T, width] and where it enters: "qk_vector" (q = x W_Q + W_pos,
    width n_heads * d_head) or "qk_input" (q = (x + W_pos) W_Q, width d_model); read it from
    the run with `tasks.induction.positions_of(run.config)`."""

    weights: dict
    W_pos: np.ndarray
    positions: str


def n_layers(weights: dict[str, np.ndarray]) -> int:
    """Number of attention layers: how many `blocks.{l}.attn.W_Q` the weights hold."""
    n = 0
    while f"blocks.{n}.attn.W_Q" in weights:
        n += 1
    return n


def layer(weights: dict[str, np.ndarray], li: int) -> dict[str, np.ndarray]:
    """{'W_Q', 'W_K', 'W_V', 'W_O'[, 'alpha']} of layer li (float64)."""
    p = f"blocks.{li}.attn."
    return {k[len(p) :]: np.asarray(v, np.float64) for k, v in weights.items() if k.startswith(p)}


def forward(
    model: Model,
    tokens: np.ndarray,
    *,
    k_composition: bool = True,
    q_composition: bool = True,
    return_patterns: bool = False,
):
    """tokens int [B, T] -> logits float64 [B, T, V] (and, with return_patterns, a list over
    layers of attention patterns [B, H, T, T], query by key).

    Same computation as the trainer: per layer, q = (x + W_pos) W_Q, k = (x + W_pos) W_K
    (positions "qk_vector": x W_Q + W_pos, x W_K + W_pos, one d_head slice per head);
    smeared: k'_j = s k_j + (1 - s) k_{j-1}, s = sigmoid(alpha), k_{-1} = k_0; v = x W_V;
    causal softmax(q k^T / sqrt(d_head)), x += pattern v W_O; logits = x W_U.
    k_composition=False: layers after the first take their keys from the embeddings alone
    (no earlier layer's output), q_composition=False likewise for queries.
    """
    weights, vector_pos = model.weights, model.positions == "qk_vector"
    tokens = np.asarray(tokens)
    W_E = np.asarray(weights["W_E"], np.float64)
    B, T = tokens.shape
    pos = np.asarray(model.W_pos, np.float64)[:T]
    x0 = W_E[tokens]  # (B, T, d)
    x = x0
    mask = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, 0.0)  # causal: no later keys
    patterns = []
    for li in range(n_layers(weights)):
        w = layer(weights, li)
        dh = w["W_Q"].shape[-1]
        xq = x if (q_composition or li == 0) else x0
        xk = x if (k_composition or li == 0) else x0
        if vector_pos:
            P = pos.reshape(T, -1, dh).transpose(1, 0, 2)[None]  # (1, H, T, dh)
            q, k = _heads(xq, w["W_Q"]) + P, _heads(xk, w["W_K"]) + P
        else:
            q = _heads(xq + pos, w["W_Q"])  # (B, H, T, dh)
            k = _heads(xk + pos, w["W_K"])  # (B, H, T, dh)
        if "alpha" in w:
            s = (1 / (1 + np.exp(-w["alpha"])))[None, :, None, None]
            k_prev = np.concatenate([k[:, :, :1], k[:, :, :-1]], axis=2)
            k = s * k + (1 - s) * k_prev
        v = _heads(x, w["W_V"])  # (B, H, T, dh)
        scores = (q / np.sqrt(dh)) @ k.transpose(0, 1, 3, 2) + mask  # (B, H, T, T)
        scores -= scores.max(-1, keepdims=True)
        pattern = np.exp(scores)
        pattern /= pattern.sum(-1, keepdims=True)
        patterns.append(pattern)
        H = pattern.shape[1]
        z = (pattern @ v).transpose(0, 2, 1, 3).reshape(B, T, H * dh)  # (B, T, H*dh)
        x = x + z @ w["W_O"].reshape(H * dh, -1)  # (B, T, d)
    logits = x @ np.asarray(weights["W_U"], np.float64)
    return (logits, patterns) if return_patterns else logits


def _heads(x: np.ndarray, W: np.ndarray) -> np.ndarray:
    """x [B, T, d] @ W [H, d, dh] per head -> [B, H, T, dh], as one matmul."""
    B, T, d = x.shape
    H, _, dh = W.shape
    return (x @ W.transpose(1, 0, 2).reshape(d, H * dh)).reshape(B, T, H, dh).transpose(0, 2, 1, 3)


def greedy_complete(model: Model, prompt: np.ndarray, length: int | None = None) -> np.ndarray:
    """Greedy decoding: append the argmax next token until the sequence has `length` tokens
    (default: the context, W_pos's rows). Returns only the completion, int64 [length - len(prompt)]."""
    length = length or model.W_pos.shape[0]
    seq = [int(t) for t in prompt]
    while len(seq) < length:
        logits = forward(model, np.array([seq]))
        seq.append(int(logits[0, -1].argmax()))
    return np.array(seq[len(prompt) :], dtype=np.int64)


def mean_attention(model: Model, tokens: np.ndarray, **ablation) -> np.ndarray:
    """Average attention pattern of every head over the sequences `tokens`:
    float64 [n_layers, H, T, T] (query by key)."""
    _, patterns = forward(model, tokens, return_patterns=True, **ablation)
    return np.stack([p.mean(0) for p in patterns])


def offset_profile(pattern: np.ndarray, start: int = 0) -> np.ndarray:
    """Attention by how far back the key is: [..., T] where entry d is the mean over queries
    i >= max(d, start) of pattern[..., i, i - d]. pattern: [..., T, T]."""
    T = pattern.shape[-1]
    out = np.full(pattern.shape[:-2] + (T,), np.nan)
    for d in range(T):
        i = np.arange(max(d, start), T)
        if len(i):
            out[..., d] = pattern[..., i, i - d].mean(-1)
    return out


def check_run(run) -> np.ndarray:
    """Raise UserError unless `run` (a runfile.reader.Run) is an induction run; return W_pos
    float64 [T, width]."""
    if not run.experiment.startswith("induction"):
        raise UserError(
            f"{run.path} is a run of {run.experiment!r}, not an induction experiment; "
            "train one with `headmovies train induction-1l` (or -smeared, -2l)"
        )
    if "W_pos" not in run.f.attrs:
        raise UserError(f"{run.path} lacks its positional table (root attribute W_pos); retrain it")
    return np.asarray(run.f.attrs["W_pos"], np.float64)


def model_at(run, t: int = -1, weights: dict | None = None) -> Model:
    """The Model of snapshot index t of an induction run (or of the given weights)."""
    W_pos = check_run(run)
    return Model(run.weights(t) if weights is None else weights, W_pos, positions_of(run.config))

"""Token-space QK and OV circuits of each head, as docs/math.md, "QK and OV circuits", defines
them (source 000's notation).

QK: M_h[a, b] = attention score of query token a on key token b, scaled as the layer scales
    it, so that softmax_b M_h[x_i, x_b] is the layer's attention:
        M_h = W_E W_Q[h] W_K[h]^T W_E^T / sqrt(d_head)               [n_heads, d_vocab, d_vocab]
OV: R_h[c, b] = logit added to output class c per unit of attention on token b:
        R_h = (W_E W_V[h] W_O[h] W_U)^T                              [n_heads, d_vocab_out, d_vocab]
Gauge (softmax invariances): compare QK after centring each row (over keys), and OV after
centring each column over output classes. All functions accept extra leading axes (e.g. time).
"""

from __future__ import annotations

import numpy as np


def qk_circuit(W_E: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray) -> np.ndarray:
    """M [..., n_heads, d_vocab, d_vocab] from W_E [..., d_vocab, d_model],
    W_Q, W_K [..., n_heads, d_model, d_head]. Computed in float64."""
    W_E = np.asarray(W_E, np.float64)[..., None, :, :]  # broadcast over heads: matmul, ~30x an einsum
    q = W_E @ np.asarray(W_Q, np.float64)  # (..., H, p, dh)
    k = W_E @ np.asarray(W_K, np.float64)
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(np.shape(W_Q)[-1])


def ov_circuit(W_E: np.ndarray, W_V: np.ndarray, W_O: np.ndarray, W_U: np.ndarray) -> np.ndarray:
    """R [..., n_heads, d_vocab_out, d_vocab] from W_E [..., d_vocab, d_model], W_V [..., H, d_model, d_head],
    W_O [..., H, d_head, d_model], W_U [..., d_model, d_vocab_out]. Computed in float64."""
    v = np.asarray(W_E, np.float64)[..., None, :, :] @ np.asarray(W_V, np.float64)  # (..., H, p, dh)
    ou = np.asarray(W_O, np.float64) @ np.asarray(W_U, np.float64)[..., None, :, :]  # (..., H, dh, c)
    return np.swapaxes(v @ ou, -1, -2)  # (..., H, c, p)


def centre_qk(M: np.ndarray) -> np.ndarray:
    """Remove each query row's mean (softmax ignores a constant per query)."""
    return M - M.mean(axis=-1, keepdims=True)


def centre_ov(R: np.ndarray) -> np.ndarray:
    """Remove each input column's mean over output classes (the output softmax ignores it)."""
    return R - R.mean(axis=-2, keepdims=True)


def circuits(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{'qk': M, 'ov': R} from a snapshot's weights dict (W_E, W_Q, W_K, W_V, W_O, W_U)."""
    return {
        "qk": qk_circuit(weights["W_E"], weights["W_Q"], weights["W_K"]),
        "ov": ov_circuit(weights["W_E"], weights["W_V"], weights["W_O"], weights["W_U"]),
    }


CIRCUIT_WEIGHTS = {"qk": ("W_E", "W_Q", "W_K"), "ov": ("W_E", "W_V", "W_O", "W_U")}


def circuit_factors(weights: dict[str, np.ndarray]) -> np.ndarray:
    """float64 [H, 4, n, d_head]: F0 = W_E W_Q[h] / sqrt(d_head), F1 = W_E W_K[h] centred over
    tokens, F2 = (W_O[h] W_U)^T centred over output classes, F3 = W_E W_V[h], so that the
    centred circuits are M_h = F0 F1^T [n, n] (query a, key b) and R_h = F2 F3^T [n_out, n]
    (output class c, attended token b): the factored form the viewer ships (docs/viewer.md).
    Centring a factor centres the product: M's row means come from the key factor, R's column
    means from the output factor."""
    E = np.asarray(weights["W_E"], np.float64)
    d_head = weights["W_Q"].shape[-1]
    q = E @ np.asarray(weights["W_Q"], np.float64) / np.sqrt(d_head)  # [H, n, dh]
    k = E @ np.asarray(weights["W_K"], np.float64)
    v = E @ np.asarray(weights["W_V"], np.float64)
    ou = np.asarray(weights["W_O"], np.float64) @ np.asarray(weights["W_U"], np.float64)  # [H, dh, c]
    k = k - k.mean(axis=-2, keepdims=True)
    ou = ou - ou.mean(axis=-1, keepdims=True)
    return np.stack([q, k, np.swapaxes(ou, -1, -2), v], axis=1)

"""Scores of an induction model's circuits from its stored weights (source 003; docs/math.md,
"Induction analyses"): OV copying scores from the eigenvalues of each head's OV circuit (and of
each layer's sum of heads and the direct path W_E W_U), and for two layers the K-, Q- and
V-composition scores of the second layer's heads with the first's, beside a random baseline.

Heads are labelled TransformerLens-style, 0-based: "L0H2" is layer 0, head 2.
"""

from __future__ import annotations

import numpy as np

from headmovies.render.induction.numpy_model import layer, n_layers

EIG_TOL = 1e-6  # eigenvalues below this fraction of the largest are numerical zeros


def factored_eigenvalues(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Non-trivial eigenvalues of A @ B (A [n, r], B [r, n]), complex [min(n, r)].

    For r < n the n x n product has rank <= r; its nonzero eigenvalues are those of the r x r
    product B @ A (TransformerLens FactoredMatrix.eigenvalues), which avoids n - r numerical
    zeros with arbitrary phase.
    """
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    M = B @ A if A.shape[1] < A.shape[0] else A @ B
    return np.linalg.eigvals(M)


def copying_scores(eigenvalues: np.ndarray) -> dict[str, float]:
    """Two signed measures of how much a circuit copies (+1) or anti-copies (-1):

    - "copying" = Re(Sigma lambda) / Sigma |lambda|, Elhage et al. 2021 ("A Mathematical
      Framework for Transformer Circuits", copying eigenvalue score). Weights by magnitude.
    - "source_mean_sign" = mean Re(lambda / |lambda|) (source 003's wording "sum k/|k|", averaged),
      over the eigenvalues above EIG_TOL x the largest. Counts every eigenvalue equally.
    """
    lam = np.asarray(eigenvalues, np.complex128)
    mag = np.abs(lam)
    if mag.max(initial=0) == 0:
        return {"copying": 0.0, "source_mean_sign": 0.0}
    keep = mag > EIG_TOL * mag.max()
    return {
        "copying": float(lam.sum().real / mag.sum()),
        "source_mean_sign": float(np.mean((lam[keep] / mag[keep]).real)),
    }


def ov_factors(weights, li: int, h: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Factors (A [V, r], B [r, V]) of the OV circuit R = A @ B of head h of layer li (r = d_head),
    or of the sum over the layer's heads (h=None, r = H * d_head): R[c, b] is the logit added
    to output token c per unit of attention on token b, R = (W_E W_V W_O W_U)^T (docs/math.md,
    "QK and OV circuits")."""
    w = layer(weights, li)
    W_E, W_U = np.asarray(weights["W_E"], np.float64), np.asarray(weights["W_U"], np.float64)
    if h is None:
        H, d, dh = w["W_V"].shape
        W_V, W_O = w["W_V"].transpose(1, 0, 2).reshape(d, H * dh), w["W_O"].reshape(H * dh, d)
    else:
        W_V, W_O = w["W_V"][h], w["W_O"][h]
    return (W_O @ W_U).T, (W_E @ W_V).T


def copying_table(weights) -> list[dict]:
    """One row per head, per layer's sum of heads, and the direct path W_E W_U:
    {'circuit', 'layer', 'head', 'copying', 'source_mean_sign', 'eigenvalues' [[re, im], ...]}.
    The heads' circuits are their full OV circuits from the embedding (virtual paths through
    earlier layers are not included)."""
    rows = []

    def add(name, li, h, A, B):
        lam = factored_eigenvalues(A, B)
        lam = lam[np.argsort(-np.abs(lam))]
        rows.append(
            {
                "circuit": name,
                "layer": li,
                "head": h,
                **copying_scores(lam),
                "eigenvalues": [[float(z.real), float(z.imag)] for z in lam],
            }
        )

    for li in range(n_layers(weights)):
        H = weights[f"blocks.{li}.attn.W_Q"].shape[0]
        for h in range(H):
            add(f"L{li}H{h}", li, h, *ov_factors(weights, li, h))
        add(f"L{li} sum of heads", li, None, *ov_factors(weights, li))
    add("direct path W_E W_U", None, None, weights["W_E"], weights["W_U"])
    return rows


# ----------------------------------------------------------------------------- composition


def _frob(M: np.ndarray) -> np.ndarray:
    return np.sqrt((M**2).sum((-2, -1)))


def composition_scores(weights, l1: int = 0, l2: int = 1) -> dict[str, np.ndarray]:
    """Composition scores [H1, H2] of every head of layer l1 into every head of layer l2,
    Elhage et al. 2021 (§"Virtual attention heads"): ||X Y|| / (||X|| ||Y||), Frobenius norms,
    in row-vector form with W_OV = W_V W_O and W_QK = W_Q W_K^T (both [d, d]):

    - "k": ||W_QK2 W_OV1^T||   (layer-l1 output read by layer-l2 keys)
    - "q": ||W_OV1 W_QK2||     (read by queries)
    - "v": ||W_OV1 W_OV2||     (read by values)
    - "k_baseline", "q_baseline", "v_baseline": the mean score of random Gaussian matrices of
      the same shapes and ranks (200 draws, fixed seed), the level that means "no composition".
    - "k_token": source 003's eigenvalue sign of the token-space K-composition term
      W_E W_Q2 (W_E W_OV1 W_K2)^T: Sigma lambda / Sigma |lambda| > 0 means query token a
      prefers keys whose layer-l1 head output carries a (the source omits the position terms,
      and so does this).
    """
    w1, w2 = layer(weights, l1), layer(weights, l2)
    W_E = np.asarray(weights["W_E"], np.float64)
    OV1 = w1["W_V"] @ w1["W_O"]  # (H1, d, d)
    QK2 = w2["W_Q"] @ w2["W_K"].transpose(0, 2, 1)  # (H2, d, d)
    OV2 = w2["W_V"] @ w2["W_O"]
    n1, n2 = _frob(OV1), _frob(QK2)
    k = _frob(QK2[None] @ OV1.transpose(0, 2, 1)[:, None]) / (n1[:, None] * n2[None])
    q = _frob(OV1[:, None] @ QK2[None]) / (n1[:, None] * n2[None])
    v = _frob(OV1[:, None] @ OV2[None]) / (n1[:, None] * _frob(OV2)[None])
    H1, H2 = OV1.shape[0], QK2.shape[0]
    k_token = np.zeros((H1, H2))
    for a in range(H1):
        for b in range(H2):
            A = W_E @ w2["W_Q"][b]  # (V, dh)
            Bm = (W_E @ OV1[a] @ w2["W_K"][b]).T  # (dh, V)
            k_token[a, b] = copying_scores(factored_eigenvalues(A, Bm))["copying"]
    base = composition_baseline(w1["W_V"].shape[1], w1["W_V"].shape[2], w2["W_Q"].shape[2])
    return {"k": k, "q": q, "v": v, "k_token": k_token, **{f"{n}_baseline": base[n] for n in base}}


def composition_baseline(d_model: int, d_head1: int, d_head2: int, draws: int = 200, seed: int = 0) -> dict[str, float]:
    """Mean K-, Q- and V-composition score of random Gaussian W_Q, W_K, W_V, W_O ([d, dh])."""
    rng = np.random.default_rng(seed)
    out = {"k": 0.0, "q": 0.0, "v": 0.0}
    for _ in range(draws):
        V1, O1 = rng.standard_normal((d_model, d_head1)), rng.standard_normal((d_head1, d_model))
        Q2, K2 = rng.standard_normal((d_model, d_head2)), rng.standard_normal((d_model, d_head2))
        V2, O2 = rng.standard_normal((d_model, d_head2)), rng.standard_normal((d_head2, d_model))
        OV1, QK2, OV2 = V1 @ O1, Q2 @ K2.T, V2 @ O2
        out["k"] += _frob(QK2 @ OV1.T) / (_frob(QK2) * _frob(OV1))
        out["q"] += _frob(OV1 @ QK2) / (_frob(QK2) * _frob(OV1))
        out["v"] += _frob(OV1 @ OV2) / (_frob(OV2) * _frob(OV1))
    return {k: float(v / draws) for k, v in out.items()}

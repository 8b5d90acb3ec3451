"""Induction-head analyses (seed 003; docs/math.md, "Induction analyses") from the weights stored in a run file.

A numpy re-implementation of the trainer's forward pass (`headmovies/train/induction.py`)
and the seed's analyses: OV copying scores, average attention patterns, greedy completions,
accuracy by block length, and for two layers K-composition scores and the model with
K-composition (or Q-composition) removed. Weights are a dict by TransformerLens name
(`W_E [V, d]`, `blocks.{l}.attn.W_Q/W_K/W_V [H, d, dh]`, `W_O [H, dh, d]`, optional
`blocks.{l}.attn.alpha [H]` for smeared keys, `W_U [d, V]`); `W_pos` is the run's
sinusoidal table (a root attribute), which enters Q and K only (see `Model`). Needs only numpy.

Heads are labelled TransformerLens-style, 0-based: "L0H2" is layer 0, head 2 (the seed counts
heads and layers from 1).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from headmovies.errors import UserError
from headmovies.tasks.induction import (
    BLOCK_LENGTHS,
    SEED_PROMPTS,
    correct_completion,
    decode,
    encode_prompt,
    positions_of,
    sample_sequences,
)

EIG_TOL = 1e-6  # eigenvalues below this fraction of the largest are numerical zeros

# Greedy completions printed in seed 003, verbatim. The seed's 2-layer section prints the
# prompt "ABCXYZABCDEF" twice: once with correct completion ABCDEFABCDEF (so the prompt was
# ABCDEFABCDEF, as read here) and once as out of distribution.
SEED_COMPLETIONS = {
    "induction-1l": {
        "ABCDEF": "ECECECECECECECECEC",
        "ABCDEFABCDEF": "CFCFCFCFCFCF",
        "XYZRSTXYZRST": "TSTSZSTSTSZST",
        "ABCDEFXYZRST": "FEFEFEFEFEFE",
        "QWERTYXYZRST": "YTYTYTYTYTYT",
    },
    "induction-smeared": {
        "ABCDEF": "EFEFEFEFEFEFEFEFEF",
        "ABCDEFABCDEF": "ABCDEFABCDEF",
        "XYZRSTXYZRST": "XYZRSTXYZRST",
        "ABCDEFXYZRST": "FXYZRSTFXYZR",
        "QWERTYXYZRST": "YXYXYXYXYXYX",
    },
    "induction-2l": {"ABCDEFABCDEF": "ABCDEFABBCEF", "AAABBBAAABBB": "ABABABABABAB", "ABCXYZABCDEF": "ABCXYZABCYYZ"},
}
# OV copying scores printed in seed 003 (its "sum k/|k|"; by its values, Sigma lambda / Sigma |lambda|).
SEED_SCORES: dict[str, dict[str, Any]] = {
    "induction-1l": {
        "heads": [0.6860927, 0.85695416, 0.98481447, 0.5779195],
        "sum_of_heads": 0.9997909,
        "direct": -0.9995849,
    },
    "induction-smeared": {"heads": [-0.71228284, 1.0, 1.0, -0.856813], "direct": -0.9998577},
    "induction-2l": {
        "heads": [-0.9999998, -0.94031566, -0.9329939, -0.9999997, 0.9998253, 0.9999484, 0.99989885, 0.99702746],
        "direct": -0.9995,
    },
}


# ----------------------------------------------------------------------------- forward pass


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


def predictable_accuracy(logits: np.ndarray, tokens: np.ndarray, block_len: int) -> float:
    """Fraction of targets at positions [block_len, T) predicted by the logits one step before."""
    return float((logits[:, block_len - 1 : -1].argmax(-1) == tokens[:, block_len:]).mean())


def block_length_accuracy(
    model: Model, cfg: dict, lengths=BLOCK_LENGTHS, n: int = 1024, seed: int = 0, **ablation
) -> dict[int, float]:
    """{block length: accuracy on predictable positions} on n fresh sequences of each block
    length (distinct letters when the run's config says so). A head that attends to a fixed
    offset of 5 solves only length 6; an induction head solves them all."""
    out = {}
    for L in lengths:
        rng = np.random.default_rng([seed, L])
        tokens = sample_sequences(rng, n, cfg["n_vocab"], cfg["seq_len"], L, cfg.get("distinct", True))
        out[int(L)] = predictable_accuracy(forward(model, tokens, **ablation), tokens, L)
    return out


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


# ----------------------------------------------------------------------------- copying scores


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
    - "seed_mean_sign" = mean Re(lambda / |lambda|) (seed 003's wording "sum k/|k|", averaged),
      over the eigenvalues above EIG_TOL x the largest. Counts every eigenvalue equally.
    """
    lam = np.asarray(eigenvalues, np.complex128)
    mag = np.abs(lam)
    if mag.max(initial=0) == 0:
        return {"copying": 0.0, "seed_mean_sign": 0.0}
    keep = mag > EIG_TOL * mag.max()
    return {
        "copying": float(lam.sum().real / mag.sum()),
        "seed_mean_sign": float(np.mean((lam[keep] / mag[keep]).real)),
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
    {'circuit', 'layer', 'head', 'copying', 'seed_mean_sign', 'eigenvalues' [[re, im], ...]}.
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
    - "k_token": seed 003's eigenvalue sign of the token-space K-composition term
      W_E W_Q2 (W_E W_OV1 W_K2)^T: Sigma lambda / Sigma |lambda| > 0 means query token a
      prefers keys whose layer-l1 head output carries a (the seed omits the position terms,
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


def immediate_repeats(completion: str, prompt: str) -> int:
    """How often a completed letter equals the letter just before it (the seed's "never
    repeats the same token twice in a row")."""
    seq = prompt[-1:] + completion
    return sum(a == b for a, b in itertools.pairwise(seq))


# ----------------------------------------------------------------------------- whole runs


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


def completions_table(model: Model, cfg: dict, experiment: str, prompts=SEED_PROMPTS) -> list[dict]:
    """Greedy completions to the context length of each prompt, beside the correct completion
    (None where none exists) and seed 003's completion for this variant (None if not printed)."""
    T, L = model.W_pos.shape[0], cfg.get("block_len", 6)
    rows = []
    for prompt in prompts:
        ours = decode(greedy_complete(model, encode_prompt(prompt, cfg["n_vocab"], T), T))
        correct = correct_completion(prompt, L, T)
        rows.append(
            {
                "prompt": prompt,
                "completion": ours,
                "correct": correct,
                "is_correct": None if correct is None else ours == correct,
                "seed": SEED_COMPLETIONS.get(experiment, {}).get(prompt),
                "immediate_repeats": immediate_repeats(ours, prompt),
            }
        )
    return rows


def _str_keys(d: dict) -> dict:
    return {str(k): v for k, v in d.items()}  # JSON object keys


def analyse(run, n_sequences: int = 1024, seed: int = 0) -> dict:
    """Every final-snapshot analysis of an induction run, JSON-ready (block lengths as string
    keys), plus the mean attention arrays under the key "_attention" ({"model": [n_layers, H, T, T],
    "no_k_composition": ... for two layers} float64), which are not JSON."""
    model = model_at(run)
    cfg, weights = run.config, model.weights
    nl = n_layers(weights)
    T, L = cfg["seq_len"], cfg["block_len"]
    tokens = sample_sequences(np.random.default_rng(seed), n_sequences, cfg["n_vocab"], T, L, cfg.get("distinct", True))
    logits = forward(model, tokens)
    att = {"model": mean_attention(model, tokens)}
    out = {
        "experiment": run.experiment,
        "run": str(run.path),
        "seed": run.seed,
        "epoch": int(run.epochs[-1]),
        "complete": run.complete,
        "n_layers": nl,
        "config": cfg,
        "accuracy": predictable_accuracy(logits, tokens, L),
        "copying": copying_table(weights),
        "completions": completions_table(model, cfg, run.experiment),
        "block_length_accuracy": _str_keys(block_length_accuracy(model, cfg, n=n_sequences, seed=seed)),
    }
    prof = offset_profile(att["model"], start=L)  # (n_layers, H, T)
    out["heads"] = [
        {
            "head": f"L{li}H{h}",
            "top_offset": int(np.nanargmax(prof[li, h])),
            "top_offset_attention": float(np.nanmax(prof[li, h])),
            "offset_attention": [float(v) for v in prof[li, h, : L + 2]],
        }
        for li in range(nl)
        for h in range(prof.shape[1])
    ]
    if "blocks.0.attn.alpha" in weights:
        out["smear_sigmoid_alpha"] = [float(1 / (1 + np.exp(-a))) for a in weights["blocks.0.attn.alpha"]]
    if nl >= 2:
        comp = composition_scores(weights, 0, 1)
        out["composition"] = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in comp.items()}
        ablations = {
            "no_k_composition": {"k_composition": False},
            "no_q_composition": {"q_composition": False},
            "no_qk_composition": {"k_composition": False, "q_composition": False},
        }
        out["ablations"] = {}
        for name, kw in ablations.items():
            acc = predictable_accuracy(forward(model, tokens, **kw), tokens, L)
            out["ablations"][name] = {
                "accuracy": acc,
                "block_length_accuracy": _str_keys(block_length_accuracy(model, cfg, n=n_sequences, seed=seed, **kw)),
            }
        att["no_k_composition"] = mean_attention(model, tokens, k_composition=False)
    out["_attention"] = att
    return out


def over_training(run, n_sequences: int = 256, seed: int = 0, progress: bool = True) -> dict:
    """Per snapshot: copying scores of every row of `copying_table` and each head's mean
    attention on a fixed set of n_sequences fresh sequences.

    Returns {"epoch": int64 [S], "circuits": [names], "copying": [S, C], "seed_mean_sign": [S, C],
    "attention": float32 [S, n_layers, H, T, T]}.
    """
    from tqdm import tqdm

    W_pos = check_run(run)
    cfg = run.config
    positions = positions_of(cfg)
    tokens = sample_sequences(
        np.random.default_rng(seed),
        n_sequences,
        cfg["n_vocab"],
        cfg["seq_len"],
        cfg["block_len"],
        cfg.get("distinct", True),
    )
    epochs, cop, sms, att, names = [], [], [], [], None
    for epoch, w in tqdm(
        run.iter_weights(), total=len(run), desc="snapshots", unit="snap", disable=not progress, leave=False
    ):
        rows = copying_table(w)
        names = [r["circuit"] for r in rows]
        epochs.append(epoch)
        cop.append([r["copying"] for r in rows])
        sms.append([r["seed_mean_sign"] for r in rows])
        att.append(mean_attention(Model(w, W_pos, positions), tokens).astype(np.float32))
    return {
        "epoch": np.array(epochs, np.int64),
        "circuits": names,
        "copying": np.array(cop),
        "seed_mean_sign": np.array(sms),
        "attention": np.stack(att),
    }

"""Numbers of any run, for its figures and summary (docs/recording.md, "Rendering"): under a
cyclic group Z_p, how the heads' centred OV power spreads over the input frequencies, and which
frequencies hold it (the "key frequencies" of a grokked modular-addition model, Nanda et al.
2023), snapshot by snapshot; and when a metric first reaches a level.
"""

from __future__ import annotations

import numpy as np

from headmovies.render.core.projections import fourier_power
from headmovies.render.generic.heads import Heads, iter_circuits
from headmovies.runfile.reader import Run

KEY_SHARE = 0.8  # key frequencies: the fewest that hold this share of the final OV power
MAX_KEYS = 6


def frequency_shares(ov: np.ndarray) -> np.ndarray:
    """float [p // 2 + 1]: the share of the heads' centred OV power |R^(u, v)|^2 (summed over
    heads and output frequencies u) at input frequency k = |v| (v and -v together), k = 0..p//2."""
    p = ov.shape[-1]
    power = fourier_power(ov).sum(axis=(0, 1))  # [p] by input frequency v
    k = np.minimum(np.arange(p), p - np.arange(p))
    shares = np.bincount(k, weights=power, minlength=p // 2 + 1)
    return shares / max(float(shares.sum()), 1e-300)


def key_frequencies(shares: np.ndarray, share: float = KEY_SHARE, most: int = MAX_KEYS) -> list[int]:
    """The fewest frequencies (largest share first, at most `most`) holding `share` of the power."""
    order = [int(k) for k in np.argsort(-shares, kind="stable") if k > 0]
    keys: list[int] = []
    for k in order:
        keys.append(k)
        if shares[keys].sum() >= share or len(keys) == most:
            break
    return keys


def ov_frequency_history(run: Run, heads: Heads) -> tuple[np.ndarray, np.ndarray]:
    """(epochs [T], shares [T, p // 2 + 1]): `frequency_shares` at every snapshot."""
    epochs, rows = [], []
    for epoch, circ in iter_circuits(run, heads):
        epochs.append(epoch)
        rows.append(frequency_shares(circ["ov"]))
    return np.array(epochs), np.array(rows)


def first_epoch_at(metrics: dict[str, np.ndarray], name: str, level: float) -> int | None:
    """The first logged epoch at which metric `name` is >= `level` (None: never, or not logged)."""
    if name not in metrics:
        return None
    hit = np.flatnonzero(np.asarray(metrics[name]) >= level)
    return int(metrics["epoch"][hit[0]]) if len(hit) else None


def summary(run: Run, heads: Heads) -> dict:
    """What `headmovies figures` writes to summary.json: the run, its heads and last metrics;
    under a group also the key frequencies, their OV power share at the end and over time, and
    the first epochs at which test accuracy reached 50 % and 90 % (when logged)."""
    metrics = run.metrics()
    out: dict = {
        "run": str(run.path),
        "snapshots": len(run),
        "epochs": [int(run.epochs[0]), int(run.epochs[-1])],
        "heads": heads.labels,
        "group_order": heads.group_order,
        "final_metrics": {k: float(v[-1]) for k, v in metrics.items() if k != "epoch" and len(v)},
    }
    for name in [k for k in metrics if k.endswith("acc")]:
        out[f"first_epoch_{name}_50"] = first_epoch_at(metrics, name, 0.5)
        out[f"first_epoch_{name}_90"] = first_epoch_at(metrics, name, 0.9)
    if heads.group_order:
        epochs, shares = ov_frequency_history(run, heads)
        keys = key_frequencies(shares[-1])
        out["key_frequencies"] = keys
        out["key_frequency_shares"] = {int(k): round(float(shares[-1, k]), 4) for k in keys}
        out["ov_share_in_key_frequencies"] = {
            int(e): round(float(shares[t, keys].sum()), 4)
            for t, e in enumerate(epochs)
            if t % 4 == 0 or t == len(epochs) - 1
        }
    return out

"""Still figures of any run (`headmovies figures RUN --out DIR`; docs/recording.md): its metrics
over epochs, every head's centred QK and OV circuits at the last snapshot, for a run recorded
with a probe every head's probe scores over epochs (what each head does, and when it changed),
and, when the tokens carry Z_p, the OV power per input frequency over time; with summary.json
(`summary`).

The numbers behind them: under a cyclic group Z_p, how the heads' centred OV power spreads over
the input frequencies, and which frequencies hold it (the "key frequencies" of a grokked
modular-addition model, Nanda et al. 2023), snapshot by snapshot; and when a metric first
reaches a level.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from headmovies.render.core.outputs import FIGURE_FORMATS, prepare_out_dir, save_figure, write_text
from headmovies.render.core.projections import fourier_power
from headmovies.render.generic.heads import Heads, find_heads, head_circuits, iter_circuits
from headmovies.render.generic.score_space import join_labels, label_groups, layer_colours
from headmovies.runfile.probe_records import STRONG
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
    scores = run.head_scores()
    if scores:
        out["head_scores"] = score_summary(run.epochs, scores)
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


def score_summary(epochs: np.ndarray, scores: dict[str, np.ndarray]) -> dict:
    """Per probe score (previous_token, duplicate_token, induction; `Run.head_scores`, [T, L, H]):
    {"final": {"L0H1": score}, "strongest": head at the end, "first_epoch_strong": the first
    snapshot's epoch at which any head reached STRONG[name] (None: never)}."""
    out: dict = {}
    for name in [n for n in STRONG if n in scores]:
        s = scores[name]
        alive = np.isfinite(s[0])
        labels = [f"L{layer}H{head}" for layer, head in zip(*np.nonzero(alive), strict=True)]
        last = s[-1][alive]
        hit = np.flatnonzero((np.nan_to_num(s[:, alive], nan=-1.0) >= STRONG[name]).any(axis=1))
        out[name] = {
            "final": {h: round(float(v), 4) for h, v in zip(labels, last, strict=True)},
            "strongest": labels[int(np.nanargmax(last))] if np.isfinite(last).any() else None,
            "first_epoch_strong": int(epochs[hit[0]]) if len(hit) else None,
        }
    return out


def scores_figure(epochs: np.ndarray, scores: dict[str, np.ndarray], title: str) -> Figure:
    """One panel per probe score: each head's score over epochs (a shade of its layer's colour,
    as in the movie), the strong line (STRONG, dashed) and the strongest heads at the end named."""
    names = [n for n in STRONG if n in scores]  # previous-token, duplicate-token, induction
    alive = np.isfinite(scores[names[0]][0])  # [L, H]
    n_heads = [int(row.sum()) for row in alive]
    colours, _ = layer_colours(n_heads)
    labels = [f"L{layer}H{head}" for layer, head in zip(*np.nonzero(alive), strict=True)]
    fig = Figure(figsize=(4.2 * len(names), 3.8))
    for ax, name in zip(np.atleast_1d(fig.subplots(1, len(names))), names, strict=True):
        s = scores[name][:, alive]  # [T, N]
        for h, label in enumerate(labels):
            ax.plot(epochs, s[:, h], color=colours[h], lw=1.2, label=label)
        ax.axhline(STRONG[name], color="0.6", lw=0.8, ls="--")
        ax.text(epochs[0], STRONG[name], " strong", va="bottom", fontsize=7, color="0.45")
        ends = np.nan_to_num(s[-1], nan=-1.0)
        order = np.argsort(-ends, kind="stable")
        points = np.c_[np.zeros(len(order)), ends[order] * 300]  # about 300 px per unit of score
        for g in label_groups(points)[:3]:  # the three strongest ends, heads within a label's height as one
            h = order[g[0]]
            if ends[h] < STRONG[name] / 2:
                break  # named where a head does something; the legend names the rest
            text = join_labels([labels[order[i]] for i in sorted(g, key=lambda i: order[i])])
            text = text if " · " not in text or len(g) <= 2 else f"{len(g)} heads"
            ann = ax.annotate(
                text,
                (epochs[-1], s[-1, h]),
                xytext=(3, 0),
                textcoords="offset points",
                fontsize=7,
                color=colours[h],
                va="center",
            )
            ann.set_in_layout(False)
        ax.set(xlabel="epoch", title=name.replace("_", "-") + " score", ylim=(-0.02, 1.02))
        ax.set_xlim(epochs[0], epochs[-1] + 0.2 * max(epochs[-1] - epochs[0], 1))  # room for the names
    if len(labels) <= 12:
        fig.axes[0].legend(fontsize=7, ncol=2)
    fig.suptitle(f"{title}: each head's scores on the probe (TransformerLens's head detectors)", fontsize=10)
    fig.tight_layout()
    return fig


def metrics_figure(metrics: dict[str, np.ndarray], title: str) -> Figure:
    """Accuracies (metrics named *acc*, 0 to 1) and the other metrics (losses and the rest, log
    scale when all positive) over epochs, a panel each, only the panels that have a metric (one
    panel saying "no metric logged" for a run without any); a metric with one finite value is a dot."""
    names = sorted(k for k in metrics if k != "epoch")
    sides = [(side, [k for k in names if ("acc" in k) == (side == "accuracies")]) for side in ("accuracies", "other")]
    sides = [(side, ks) for side, ks in sides if ks] or [("none", [])]
    fig = Figure(figsize=(5 * len(sides), 3.6))
    for ax, (side, keys) in zip(np.atleast_1d(fig.subplots(1, len(sides))), sides, strict=True):
        for k in keys:
            ok = np.isfinite(metrics[k])
            ax.plot(metrics["epoch"][ok], metrics[k][ok], label=k, marker="o" if ok.sum() == 1 else None)  # 1: a dot
        ax.set(xlabel="epoch")
        if side == "accuracies":
            ax.set(ylabel="accuracy", ylim=(-0.02, 1.02), title="accuracies")
        elif side == "other":
            ax.set(title="losses and other metrics")
            if all((metrics[k][np.isfinite(metrics[k])] > 0).all() for k in keys):
                ax.set_yscale("log")
        if ax.lines:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no metric logged", transform=ax.transAxes, ha="center", va="center", color="0.4")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def heatmaps_figure(heads: Heads, weights: dict[str, np.ndarray], epoch: int, title: str) -> Figure:
    """Per head (columns): its centred QK circuit (query token down, key token across) and OV
    circuit (output class down, attended token across), each on its own symmetric scale."""
    circ = head_circuits(heads, weights)
    H = heads.total
    fig = Figure(figsize=(min(2.2 * H + 0.6, 24), 4.8))
    axes = np.atleast_2d(fig.subplots(2, H, squeeze=False))
    for h, label in enumerate(heads.labels):
        for row, c in enumerate(("qk", "ov")):
            X = circ[c][h]
            lim = float(np.abs(X).max()) or 1.0
            ax = axes[row, h]
            ax.imshow(X, cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(label, fontsize=8)
            if h == 0:
                words = "QK\nquery ↓, key →" if c == "qk" else "OV\noutput ↓, attended →"
                ax.set_ylabel(words, fontsize=8)
    fig.suptitle(f"{title}: centred circuits at epoch {epoch:,} (red +, blue −, each on its own scale)", fontsize=10)
    fig.tight_layout(h_pad=1.5)
    return fig


def frequency_figure(epochs: np.ndarray, shares: np.ndarray, keys: list[int], title: str) -> Figure:
    """Share of the heads' OV power per input frequency over epochs (key frequencies named)."""
    fig = Figure(figsize=(8, 3.6))
    ax = fig.subplots()
    for k in range(1, shares.shape[1]):
        if k in keys:
            ax.plot(epochs, shares[:, k], lw=2, label=f"frequency {k}")
        else:
            ax.plot(epochs, shares[:, k], lw=0.6, color="0.75")
    ax.plot(epochs, shares[:, keys].sum(axis=1), "k--", lw=1.2, label="key frequencies together")
    ax.set(xlabel="epoch", ylabel="share of centred OV power", ylim=(0, 1), title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def render_figures(
    run_path: str | Path, out_dir: str | Path, group_order: int | None = None, formats: Sequence[str] = FIGURE_FORMATS
) -> list[Path]:
    """Write the figures (in `formats`: png, svg) and summary.json of `run_path` into `out_dir`;
    returns the paths. Everything is read and drawn before the first file is written, so a run that fails to
    read (RunFileError, e.g. a run without attention weights or a damaged snapshot) leaves
    `out_dir` as it was."""
    with Run(run_path) as run:
        heads = find_heads(run, group_order)
        name = run.path.name
        figures = {"metrics": metrics_figure(run.metrics(), f"{name}: metrics")}
        last = run.weights(-1, heads.names())
        figures["heads_final"] = heatmaps_figure(heads, last, int(run.epochs[-1]), name)
        scores = run.head_scores()
        if scores:
            figures["head_scores"] = scores_figure(run.epochs, scores, name)
        info = summary(run, heads)
        if heads.group_order:
            epochs, shares = ov_frequency_history(run, heads)
            title = f"{name}: OV power by input frequency"
            figures["ov_frequencies"] = frequency_figure(epochs, shares, info["key_frequencies"], title)
    out = prepare_out_dir(out_dir)
    paths: list[Path] = []
    for stem, fig in figures.items():
        paths += save_figure(fig, out, stem, formats)
    paths.append(write_text(out / "summary.json", json.dumps(info, indent=1) + "\n"))
    return paths

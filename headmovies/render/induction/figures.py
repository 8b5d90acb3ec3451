"""Figures of induction runs (source 003; docs/math.md, "Induction analyses").

Inputs are the numpy results of `induction.analysis` (`analyse`, `over_training`), never the
training code: mean attention per head, copying scores beside the source's, accuracy by block
length, training curves with copying scores per snapshot, and for two layers the composition
scores and the attention with K-composition removed. The movie is in `induction.movie`.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import PowerNorm

from headmovies.render.induction import analysis as ind
from headmovies.render.induction.analysis import Analysis

ATT_NORM: dict[str, Any] = dict(vmin=0.0, vmax=1.0, gamma=0.5)  # sqrt colour scale: weak diagonals stay visible
ATT_CMAP = "magma"


def _copy_by_head(result: Analysis) -> dict[str, dict]:
    return {r["circuit"]: r for r in result.copying}


def heatmap_grid(
    att: np.ndarray, titles: list[list[str]], suptitle: str, width: float = 10.0, dpi: int = 100, below_px: int = 0
):
    """Figure of n_layers x H attention heatmaps [n_layers, H, T, T] with one colour bar, and
    `below_px` free pixels under them (the movie's timeline strip).
    Returns (figure, images in row order, suptitle artist)."""
    nl, H, T, _ = att.shape
    ticks = [t for t in (0, 6, 12, 18, 23) if t < T]
    grid_h = 0.6 + 2.6 * nl  # inches, without the strip
    height = grid_h + below_px / dpi
    fig, axes = plt.subplots(
        nl,
        H,
        figsize=(width, height),
        squeeze=False,
        dpi=dpi,
        gridspec_kw=dict(
            left=0.05,
            right=0.9,
            top=1 - 0.55 / height,
            bottom=(0.12 / nl * grid_h + below_px / dpi) / height,
            wspace=0.25,
            hspace=0.35,
        ),
    )
    images = []
    for li in range(nl):
        for h in range(H):
            ax = axes[li, h]
            images.append(ax.imshow(att[li, h], cmap=ATT_CMAP, norm=PowerNorm(**ATT_NORM), interpolation="nearest"))
            ax.set_title(titles[li][h], fontsize=8)
            ax.set_xticks(ticks)
            ax.set_yticks(ticks)
            ax.tick_params(labelsize=6, length=2)
            if h == 0:
                ax.set_ylabel("query position", fontsize=7)
            if li == nl - 1:
                ax.set_xlabel("key position", fontsize=7)
    lift = below_px / dpi / height
    cax = fig.add_axes((0.92, lift + 0.15 * (1 - lift), 0.015, 0.7 * (1 - lift)))
    fig.colorbar(images[0], cax=cax).set_label("mean attention (sqrt scale)", fontsize=7)
    cax.tick_params(labelsize=6)
    title = fig.suptitle(suptitle, fontsize=10)
    return fig, images, title


def head_titles(result: Analysis, nl: int, H: int) -> list[list[str]]:
    cop = _copy_by_head(result)
    heads = {h.head: h for h in result.heads}
    out = []
    for li in range(nl):
        row = []
        for h in range(H):
            name = f"L{li}H{h}"
            row.append(f"{name}  copying {cop[name]['copying']:+.2f}\nmost attention {heads[name].top_offset} back")
        out.append(row)
    return out


def attention_figure(result: Analysis, key: str = "model"):
    """Mean attention of every head on fresh sequences (query by key position)."""
    att = result.attention[key]
    nl, H = att.shape[:2]
    what = "per head" if key == "model" else "with K-composition removed (L1 keys without L0 outputs)"
    fig, _, _ = heatmap_grid(
        att,
        head_titles(result, nl, H),
        f"{result.experiment} seed {result.seed}, epoch {result.epoch:,}: mean attention {what}",
    )
    return fig


def copying_figure(result: Analysis):
    """Both copying scores of every head, each layer's sum of heads and the direct path,
    with the values source 003 printed for this variant."""
    rows = result.copying
    names = [r["circuit"].replace("direct path W_E W_U", "direct path") for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.75 * len(rows) + 2), 3.6))
    ax.bar(x - 0.2, [r["copying"] for r in rows], 0.4, color="tab:blue", label="Σλ / Σ|λ| (Elhage et al. 2021)")
    wording = "mean Re(λ/|λ|) (source's wording)"
    ax.bar(x + 0.2, [r["source_mean_sign"] for r in rows], 0.4, color="tab:orange", label=wording)
    source = ind.SOURCE_SCORES.get(result.experiment)
    if source and result.config.get("n_heads") == 4:
        heads = [i for i, r in enumerate(rows) if r["head"] is not None]
        sx = heads[: len(source["heads"])]
        printed = "source 003's printed values"
        ax.scatter(sx, source["heads"][: len(sx)], marker="D", color="black", zorder=3, s=18, label=printed)
        ax.scatter([len(rows) - 1], [source["direct"]], marker="D", color="black", zorder=3, s=18)
        if "sum_of_heads" in source:
            ax.scatter(
                [names.index("L0 sum of heads")], [source["sum_of_heads"]], marker="D", color="black", zorder=3, s=18
            )
    ax.axhline(0, color="0.3", lw=0.6)
    ax.set_ylim(-1.08, 1.08)
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("copying score (+1 copies, −1 suppresses)", fontsize=8)
    ax.set_title(f"{result.experiment} seed {result.seed}: OV-circuit eigenvalue signs", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


def block_length_figure(result: Analysis):
    """Accuracy on predictable positions by block length (and, for two layers, ablated)."""
    series = [("model", result.block_length_accuracy)]
    for name, ab in (result.ablations or {}).items():
        series.append((name.replace("_", " "), ab.block_length_accuracy))
    lengths = sorted(int(k) for k in series[0][1])
    x = np.arange(len(lengths))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    colours = ["black", "tab:red", "tab:purple", "tab:gray"]
    for i, (label, acc) in enumerate(series):
        vals = [acc[str(L)] for L in lengths]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, vals, width, label=label, color=colours[i % 4])
    ax.set_xticks(x, [f"{L}{' (trained)' if result.config['block_len'] == L else ''}" for L in lengths])
    ax.set_xlabel("block length")
    ax.set_ylabel("accuracy on predictable positions")
    ax.set_ylim(0, 1.02)
    ax.axhline(1 / 26, color="0.5", lw=0.6, ls=":")
    ax.set_title(
        f"{result.experiment} seed {result.seed}: an induction head solves every length, a fixed offset only one",
        fontsize=8,
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def composition_figure(result: Analysis):
    """K-composition (Frobenius) and the source's token-space eigenvalue sign, layer 0 -> layer 1."""
    comp = result.composition
    assert comp is not None, "composition scores exist for two layers only"
    panels = [
        (
            "k",
            f"K-composition ‖W_QK(L1) W_OV(L0)ᵀ‖ / (‖·‖‖·‖)\n(random baseline {comp['k_baseline']:.2f})",
            "viridis",
            (0, None),
        ),
        ("q", f"Q-composition (random baseline {comp['q_baseline']:.2f})", "viridis", (0, None)),
        ("k_token", "token-space K-composition Σλ/Σ|λ|\nof W_E W_Q(L1) (W_E W_OV(L0) W_K(L1))ᵀ", "RdBu_r", (-1, 1)),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    vmax = max(np.max(comp["k"]), np.max(comp["q"]))
    for ax, (key, title, cmap, (lo, hi)) in zip(axes, panels):
        m = np.array(comp[key])
        im = ax.imshow(m, cmap=cmap, vmin=lo, vmax=hi if hi is not None else vmax)
        for (i, j), v in np.ndenumerate(m):
            ax.text(
                j,
                i,
                f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if (key != "k_token" and v < 0.6 * vmax) else "black",
            )
        ax.set_xticks(range(m.shape[1]), [f"L1H{h}" for h in range(m.shape[1])], fontsize=7)
        ax.set_yticks(range(m.shape[0]), [f"L0H{h}" for h in range(m.shape[0])], fontsize=7)
        ax.set_xlabel("layer-1 head (reads)", fontsize=7)
        ax.set_ylabel("layer-0 head (writes)", fontsize=7)
        ax.set_title(title, fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.suptitle(f"{result.experiment} seed {result.seed}: composition of layer-0 heads into layer-1 heads", fontsize=9)
    fig.tight_layout()
    return fig


def training_figure(result: Analysis, history: dict, metrics: dict):
    """Loss and accuracy, and both copying scores of every circuit, per snapshot."""
    fig, axes = plt.subplots(1, 3, figsize=(14.5, 3.6))
    ax = axes[0]
    ax.plot(metrics["epoch"], metrics["heldout_loss"], color="tab:red", label="loss (predictable positions)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss", color="tab:red")
    ax.set_yscale("log")
    ax2 = ax.twinx()
    ax2.plot(metrics["epoch"], metrics["heldout_acc"], color="black", label="accuracy")
    ax2.set_ylabel("accuracy (predictable positions)")
    ax2.set_ylim(0, 1.02)
    ax.set_title("held-out batch", fontsize=9)
    names = history["circuits"]
    cmap = plt.get_cmap("tab10")
    for ax, key, title in (
        (axes[1], "copying", "OV copying Σλ / Σ|λ| (Elhage et al.)"),
        (axes[2], "source_mean_sign", "OV copying, mean Re(λ/|λ|) (source's wording)"),
    ):
        for i, name in enumerate(names):
            style = (
                dict(color="black", lw=1.6)
                if name.startswith("direct")
                else dict(color="0.45", lw=1.3, ls="--" if name.startswith("L0") else ":")
                if "sum" in name
                else dict(color=cmap(i % 10), lw=1.0)
            )
            ax.plot(history["epoch"], history[key][:, i], label=name.replace(" W_E W_U", ""), **style)
        ax.axhline(0, color="0.3", lw=0.5)
        ax.set_ylim(-1.05, 1.05)
        ax.set_xlabel("epoch")
        ax.set_title(title, fontsize=9)
    handles, labels = axes[2].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center right", frameon=False)
    fig.suptitle(f"{result.experiment} seed {result.seed}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.88, 1))
    return fig

"""Figures of ov-coherent runs (source 004; docs/math.md, "OV-coherent analyses").

Inputs are the numpy results of `ov_coherent.analysis` (never the training code): one analysis
sheet per run, training curves across runs, and the final (head 1, head 2) QK plane of every
run. The movie is in `ov_coherent.movie`.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from headmovies.render.ov_coherent import analysis
from headmovies.render.ov_coherent.analysis import Analysis
from headmovies.tasks import ov_coherent as ov_task

TOKEN_COLOURS = {1: "tab:blue", 2: "tab:orange", 3: "tab:green", 4: "tab:red"}
CLASS_CMAP = ListedColormap(plt.get_cmap("tab10")(np.arange(ov_task.N_CLASSES)))  # its first N_CLASSES colours


def plane_coords(qk: np.ndarray) -> np.ndarray:
    """Read-off QK rows [..., n_heads, 12] -> scores minus each head's mean noise score
    [..., n_heads, 12] (softmax ignores a constant per row; noise sits near the origin)."""
    return qk - qk[..., list(ov_task.NOISE)].mean(-1, keepdims=True)


# ---------------------------------------------------------------- per-run analysis sheet


def _qk_bars(ax, result: Analysis) -> None:
    H = result.n_heads
    width = 0.8 / H
    x = np.arange(ov_task.D_VOCAB)
    for h, head in enumerate(result.heads):
        qk = np.array(head.qk_readoff)
        qk = qk - qk[list(ov_task.NOISE)].mean()
        colours = ["black"] + [TOKEN_COLOURS[t] for t in ov_task.SIGNAL] + ["0.6"] * len(ov_task.NOISE)
        ax.bar(
            x + (h - (H - 1) / 2) * width,
            qk,
            width,
            color=colours,
            edgecolor="white",
            hatch=None if h == 0 else "//",
            label=f"head {h + 1}: {head.ordering_text}",
        )
    ax.axhline(0, color="0.3", lw=0.6)
    ax.set_xticks(x, ["R"] + [str(t) for t in ov_task.SIGNAL] + [str(t) for t in ov_task.NOISE])
    ax.set_xlabel("key token (R = read-off, 1-4 signal, 5-11 noise)")
    ax.set_ylabel("QK score minus mean noise")
    ax.set_title("read-off QK row per head" + (" (plain: head 1, hatched: others)" if H > 1 else ""), fontsize=9)
    ax.legend(fontsize=7, loc="best")


def _class_acc(ax, result: Analysis) -> None:
    H = result.n_heads
    series = [("full model", result.class_acc)] + [
        (f"head {h.head} ablated", h.ablated_class_acc) for h in result.heads
    ]
    width = 0.8 / len(series)
    x = np.arange(ov_task.N_CLASSES)
    for i, (label, acc) in enumerate(series):
        ax.bar(
            x + (i - (len(series) - 1) / 2) * width,
            acc,
            width,
            label=label,
            color=["black", "tab:purple", "tab:cyan", "tab:olive", "tab:brown"][i % 5],
        )
    ax.set_xticks(x, ov_task.CLASS_NAMES, rotation=60, fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy (exact)" if result.exact else "accuracy (sampled)")
    abl = ", ".join(f"h{h.head} off {h.ablated_acc:.1%}" for h in result.heads)
    ax.set_title(f"per-class accuracy: {result.acc:.2%} overall; {abl}", fontsize=9)
    ax.legend(fontsize=7, ncol=1 + H // 2, loc="lower right")


def _contribution_plane(ax, result: Analysis) -> None:
    cc = np.array(result.class_contributions)
    if cc.shape[1] < 2:
        ax.bar(np.arange(ov_task.N_CLASSES), cc[:, 0], color=CLASS_CMAP.colors)
        ax.set_xticks(np.arange(ov_task.N_CLASSES), ov_task.CLASS_NAMES, rotation=60, fontsize=7)
        ax.set_title("head 1's contribution to the correct logit", fontsize=9)
        return
    ax.scatter(
        cc[:, 0],
        cc[:, 1],
        c=np.arange(ov_task.N_CLASSES),
        cmap=CLASS_CMAP,
        vmin=-0.5,
        vmax=ov_task.N_CLASSES - 0.5,
        s=40,
        zorder=3,
    )
    for c, name in enumerate(ov_task.CLASS_NAMES):
        ax.annotate(name, cc[c, :2], xytext=(3, 3), textcoords="offset points", fontsize=7)
    ax.axhline(0, color="0.5", lw=0.6)
    ax.axvline(0, color="0.5", lw=0.6)
    ax.set_xlabel("head 1 contribution to correct logit")
    ax.set_ylabel("head 2 contribution to correct logit")
    ax.set_title(
        "each class: (head 1, head 2) logit contribution\n(centred over classes, mean over its sequences)", fontsize=9
    )


def _attention_heatmaps(fig, spec, result: Analysis) -> None:
    att = np.array(result.attention_by_pair)  # (H, 4, 4)
    sub = spec.subgridspec(1, att.shape[0])
    axes = []
    for h in range(att.shape[0]):
        ax = fig.add_subplot(sub[0, h])
        axes.append(ax)
        im = ax.imshow(att[h], vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for a in range(4):
            for b in range(4):
                ax.text(
                    b,
                    a,
                    f"{att[h, a, b]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if att[h, a, b] < 0.6 else "black",
                )
        ax.set_xticks(range(4), ov_task.SIGNAL)
        ax.set_yticks(range(4), ov_task.SIGNAL)
        ax.set_xlabel("other token b of the pair", fontsize=8)
        ax.set_ylabel("attention on token a", fontsize=8)
        ax.set_title(f"head {h + 1}: attention on a | pair {{a,b}}", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.8)


def _ov_heatmaps(fig, spec, result: Analysis) -> None:
    H = result.n_heads
    sub = spec.subgridspec(1, H)
    ov = np.array([h.ov_signal for h in result.heads])  # (H, 10, 4)
    lim = np.abs(ov).max() or 1.0
    axes = []
    for h in range(H):
        ax = fig.add_subplot(sub[0, h])
        axes.append(ax)
        im = ax.imshow(ov[h], cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_xticks(range(4), ov_task.SIGNAL)
        ax.set_yticks(range(ov_task.N_CLASSES), ov_task.CLASS_NAMES if h == 0 else [], fontsize=7)
        ax.set_xlabel("attended signal token", fontsize=8)
        ax.set_title(f"head {h + 1} OV: class logits (centred)", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.8)


def _decision_plane(ax, weights: dict, cases: ov_task.Cases) -> None:
    """For 2 heads of d_head 1: every case's (z_1, z_2) on the argmax regions of the readout."""
    z = analysis.head_outputs(weights, cases.counts)[..., 0]  # (N, 2)
    U = analysis.readout_directions(weights)[:, 0, :]  # (2, C)
    bias = analysis.direct_logits(weights)
    lo, hi = z.min(0), z.max(0)
    pad = 0.15 * (hi - lo) + 1e-6
    gx = np.linspace(lo[0] - pad[0], hi[0] + pad[0], 300)
    gy = np.linspace(lo[1] - pad[1], hi[1] + pad[1], 300)
    X, Y = np.meshgrid(gx, gy)
    region = (bias + X[..., None] * U[0] + Y[..., None] * U[1]).argmax(-1)
    ax.imshow(
        region,
        origin="lower",
        extent=(gx[0], gx[-1], gy[0], gy[-1]),
        cmap=CLASS_CMAP,
        vmin=-0.5,
        vmax=ov_task.N_CLASSES - 0.5,
        alpha=0.35,
        aspect="auto",
        interpolation="nearest",
    )
    order = np.argsort(cases.probs)  # rare cases underneath
    ax.scatter(
        z[order, 0],
        z[order, 1],
        c=cases.labels[order],
        cmap=CLASS_CMAP,
        vmin=-0.5,
        vmax=ov_task.N_CLASSES - 0.5,
        s=4,
        edgecolors="none",
    )
    for c, name in enumerate(ov_task.CLASS_NAMES):
        sel = cases.labels == c
        ax.annotate(
            name, np.average(z[sel], axis=0, weights=cases.probs[sel]), fontsize=7, ha="center", fontweight="bold"
        )
    ax.set_xlabel("head 1 output z_1 = attention-weighted W_V")
    ax.set_ylabel("head 2 output z_2")
    ax.set_title("head outputs of every case on the readout's class regions", fontsize=9)


def analysis_figure(result: Analysis, weights: dict, cases: ov_task.Cases, title: str) -> Figure:
    """One sheet for one run's final snapshot: QK rows, per-class accuracy (full and ablated),
    class contributions plane, attention by pair, OV tables, and (2 heads of d_head 1) the
    decision plane. `result` is `analysis.analyse(weights, cases)`."""
    fig = plt.figure(figsize=(16, 9.5), layout="constrained")
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.05])
    _qk_bars(fig.add_subplot(grid[0, 0]), result)
    _class_acc(fig.add_subplot(grid[0, 1]), result)
    _contribution_plane(fig.add_subplot(grid[0, 2]), result)
    _attention_heatmaps(fig, grid[1, 0], result)
    _ov_heatmaps(fig, grid[1, 1], result)
    ax = fig.add_subplot(grid[1, 2])
    if result.n_heads == 2 and result.d_head == 1:
        _decision_plane(ax, weights, cases)
    else:
        ax.axis("off")
        ax.text(
            0.5,
            0.5,
            f"decision plane drawn only for 2 heads of d_head 1\n"
            f"(this run: {result.n_heads} head(s) of d_head {result.d_head})",
            ha="center",
            va="center",
            fontsize=9,
        )
    opp = {True: "opposite orderings", False: "orderings not opposite", None: "one head"}[result.opposite]
    fig.suptitle(
        f"{title}: accuracy {result.acc:.2%}, {opp}, hard-attention explanation agrees on "
        f"{result.hard_attention_agreement:.1%}",
        fontsize=11,
    )
    return fig


# ---------------------------------------------------------------- across runs


def training_figure(curves: list[tuple[str, dict[str, np.ndarray]]]) -> Figure:
    """Exact read-off accuracy and loss over epochs (here one optimizer step each), one line per run.
    curves: [(label, metrics dict from Run.metrics())]."""
    fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for label, m in curves:
        epoch = np.maximum(m["epoch"], 1)  # the log axis starts at epoch 1
        ax_acc.plot(epoch, m["acc"], label=label, lw=1)
        ax_loss.plot(epoch, m["loss"], label=label, lw=1)
    for ax in (ax_acc, ax_loss):
        ax.set_xscale("log")
        ax.set_xlabel("epoch (one optimizer step on a fresh batch)")
    ax_acc.set_ylabel("read-off accuracy")
    ax_loss.set_ylabel("cross-entropy")
    ax_loss.set_yscale("log")
    ax_acc.axhline(1, color="0.5", lw=0.6, ls=":")
    ax_acc.legend(fontsize=7)
    return fig


def _plane_axes(ax, lim: float) -> None:
    ax.set_aspect("equal")
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.plot([-1e9, 1e9], [0, 0], color="0.6", lw=0.5)
    ax.plot([0, 0], [-1e9, 1e9], color="0.6", lw=0.5)


def orderings_figure(items: list[tuple[str, np.ndarray, bool | None]]) -> Figure:
    """Final read-off QK scores of every run in the (head 1, head 2) plane, one panel per run
    (the movie's last frame). items: [(label, qk [n_heads >= 2, 12], opposite)]."""
    n = len(items)
    cols = min(n, 4)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.9 * rows), layout="constrained", squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, (label, qk, opposite) in zip(axes.flat, items):
        xy = plane_coords(qk)[:2].T  # (12, 2)
        lim = 1.15 * np.abs(xy).max()
        _plane_axes(ax, lim)
        ax.scatter(xy[list(ov_task.NOISE), 0], xy[list(ov_task.NOISE), 1], s=10, c="0.6")
        ax.scatter(*xy[ov_task.READOFF], s=30, facecolors="none", edgecolors="black")
        for t in ov_task.SIGNAL:
            ax.scatter(*xy[t], s=50, c=TOKEN_COLOURS[t], zorder=3)
            ax.annotate(str(t), xy[t], xytext=(4, 4), textcoords="offset points", fontsize=8)
        orders = " | ".join(analysis.format_ordering(q).replace(" > noise", "").replace(" ", "") for q in qk[:2])
        tag = "opposite" if opposite else "not opposite"
        ax.set_title(f"{label}\n{orders} ({tag})", fontsize=8)
        ax.set_xlabel("head 1 QK − noise", fontsize=8)
        ax.set_ylabel("head 2 QK − noise", fontsize=8)
    return fig

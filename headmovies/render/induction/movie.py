"""The attention movie of an induction run (seed 003): every head's mean attention pattern on
fresh sequences, one frame per snapshot, titled with its copying score at that snapshot."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import matplotlib.pyplot as plt
import numpy as np

from headmovies.render.core.encode import EncodeResult, encode
from headmovies.render.induction.figures import _heatmap_grid


def attention_frames(history: dict, experiment: str, seed: int, metrics: dict,
                     width: float = 10.0, dpi: int = 100) -> Iterator[np.ndarray]:
    """Movie frames [H_px, W_px, 4] uint8 (even sizes): one grid of mean-attention heatmaps per
    snapshot, each panel titled with its head and its copying score at that snapshot."""
    att = history["attention"]                                          # (S, nl, H, T, T)
    S, nl, H = att.shape[:3]
    names = history["circuits"]
    col = {n: i for i, n in enumerate(names)}
    acc = dict(zip(metrics["epoch"].tolist(), metrics["heldout_acc"].tolist()))
    titles = [[f"L{l}H{h}" for h in range(H)] for l in range(nl)]
    fig, images, suptitle = _heatmap_grid(att[0], titles, "", width, dpi)
    axes = [im.axes for im in images]
    try:
        for s in range(S):
            for l in range(nl):
                for h in range(H):
                    i = l * H + h
                    images[i].set_data(att[s, l, h])
                    axes[i].set_title(f"L{l}H{h}  copying {history['copying'][s, col[f'L{l}H{h}']]:+.2f}",
                                      fontsize=8)
            epoch = int(history["epoch"][s])
            suptitle.set_text(f"{experiment} (seed {seed}): mean attention per head, step {epoch:>5d}, "
                              f"accuracy {acc.get(epoch, float('nan')):.1%}")
            fig.canvas.draw()
            frame = np.asarray(fig.canvas.buffer_rgba())
            yield frame[: frame.shape[0] // 2 * 2, : frame.shape[1] // 2 * 2]
    finally:
        plt.close(fig)


def make_movie(history: dict, result: dict, metrics: dict, out_dir: Path, label: str, formats,
               fps: float = 24.0, hold_s: float = 2.0, progress: bool = True) -> EncodeResult:
    """Encode the attention movie into out_dir/attention.{mp4,webm,gif,png,html}; `history` is
    `analysis.over_training(run)`, `result` is `analysis.analyse(run)`."""
    from tqdm import tqdm
    n = len(history["epoch"]) + int(round(hold_s * fps))
    with tqdm(total=n, desc=f"{label} movie", unit="frame", disable=not progress, leave=False) as bar:
        return encode(attention_frames(history, result["experiment"], result["seed"], metrics), out_dir,
                      "attention", fps=fps, hold_s=hold_s, formats=formats, on_frame=bar.update)

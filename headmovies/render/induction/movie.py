"""The attention movie of an induction run (source 003): every head's mean attention pattern on
fresh sequences, one frame per snapshot, titled with its copying score at that snapshot, over
a timeline strip (docs/movie.md, "Timeline"): epochs, the held-out accuracy, the schedule
switch and the epochs from which the accuracy stays above 50 % and 90 % (held
`event_hold_s` seconds each)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from headmovies.render.core.encode import EncodeResult, write_movie
from headmovies.render.core.timeline import (
    EVENT_HOLD_S,
    STRIP_PX,
    Timeline,
    accuracy_timeline,
    hold_frames,
)
from headmovies.render.core.timeline_strip import TimelineStrip
from headmovies.render.induction.analysis import Analysis
from headmovies.render.induction.figures import heatmap_grid

ACCURACY_MARKS = (0.5, 0.9)  # timeline events: held-out accuracy reaches these and stays
ACC_COLOUR = "C0"


def induction_timeline(epochs: np.ndarray, metrics: dict, config: dict) -> Timeline:
    """Epochs of the snapshots [S], the run's metrics and config -> the strip: held-out
    accuracy on predictable positions (%), the schedule switch, and for each of
    ACCURACY_MARKS the epoch from which the accuracy stays at or above it."""
    return accuracy_timeline(
        epochs,
        metrics,
        config,
        key="heldout_acc",
        words="held-out accuracy",
        marks=ACCURACY_MARKS,
        colour=ACC_COLOUR,
        left_label="held-out\naccuracy %",
    )


def figcaption(result: Analysis, config: dict, timeline: Timeline, n_sequences: int) -> str:
    """The movie's text alternative: what trained, what each panel shows, when accuracy rose."""
    nl, H = result.attention["model"].shape[:2] if "model" in result.attention else (config.get("n_layers", 1), 0)
    parts = [
        (
            f"An attention-only transformer with {nl} layer{'s' if nl > 1 else ''} of {H} heads trained "
            f"{int(result.epoch):,} epochs on sequences of {config.get('seq_len', '?')} letters made of a repeated "
            f"block of {config.get('block_len', '?')} ({result.experiment}, seed {result.seed})."
        )
    ]
    parts.append(
        f"Each panel is one head's mean attention pattern over {n_sequences} fresh sequences (query position "
        "down, key position across), titled with its OV copying score (+1 copies, -1 anti-copies)."
    )
    marks = [e for e in timeline.events if not e.phase]
    if marks:
        parts.append(
            "Held-out accuracy on the predictable positions reaches "
            + " and ".join(f"{e.label.split('≥ ')[1]} from epoch {e.epoch:,}" for e in marks)
            + "."
        )
    parts.append(f"Final accuracy {result.accuracy:.1%}.")
    return " ".join(parts)


def attention_frames(
    history: dict,
    experiment: str,
    seed: int | None,
    metrics: dict,
    timeline: Timeline | None = None,
    width: float = 10.0,
    dpi: int = 100,
) -> Iterator[np.ndarray]:
    """Movie frames [H_px, W_px, 4] uint8, one per snapshot: a grid of mean-attention heatmaps,
    each panel titled with its head and its copying score at that snapshot, over the timeline
    strip (if given)."""
    att = history["attention"]  # (S, nl, H, T, T)
    S, nl, H = att.shape[:3]
    names = history["circuits"]
    col = {n: i for i, n in enumerate(names)}
    acc = dict(zip(metrics["epoch"].tolist(), metrics["heldout_acc"].tolist()))
    titles = [[f"L{li}H{h}" for h in range(H)] for li in range(nl)]
    fig, images, suptitle = heatmap_grid(att[0], titles, "", width, dpi, below_px=STRIP_PX if timeline else 0)
    axes = [im.axes for im in images]
    strip = None
    if timeline is not None:
        W = fig.bbox.width
        strip = TimelineStrip(
            fig, (0.05 * W + 40, 4, 0.85 * W - 40, STRIP_PX - 8), timeline, history["epoch"], animated=False
        )
    try:
        for s in range(S):
            for li in range(nl):
                for h in range(H):
                    i = li * H + h
                    images[i].set_data(att[s, li, h])
                    axes[i].set_title(f"L{li}H{h}  copying {history['copying'][s, col[f'L{li}H{h}']]:+.2f}", fontsize=8)
            epoch = int(history["epoch"][s])
            suptitle.set_text(
                f"{experiment} (seed {seed}): mean attention per head, epoch {epoch:>5d}, "
                f"held-out accuracy {acc.get(epoch, float('nan')):.1%}"
            )
            if strip is not None:
                strip.update(epoch)
            fig.canvas.draw()
            yield np.asarray(fig.canvas.buffer_rgba())
    finally:
        plt.close(fig)


def make_movie(
    history: dict,
    result: Analysis,
    metrics: dict,
    out_dir: Path,
    label: str,
    formats,
    fps: float = 24.0,
    hold_s: float = 2.0,
    progress: bool = True,
    config: dict | None = None,
    event_hold_s: float = EVENT_HOLD_S,
    n_sequences: int = 256,
    basename: str = "attention_movie",
) -> EncodeResult:
    """Encode the attention movie into out_dir/basename.{mp4,webm,gif,png,html} (apart
    from the figure attention.png); `history` is `analysis.over_training(run)` (on `n_sequences`
    sequences), `result` is `analysis.analyse(run)`,
    `config` the run's config (schedule switch, task words in the caption)."""
    config = config or {}
    timeline = induction_timeline(history["epoch"], metrics, config)
    return write_movie(
        attention_frames(history, result.experiment, result.seed, metrics, timeline),
        out_dir,
        basename,
        repeats=hold_frames(history["epoch"], timeline.events, fps, event_hold_s),
        fps=fps,
        hold_s=hold_s,
        formats=formats,
        caption=figcaption(result, config, timeline, n_sequences),
        progress=progress,
        desc=f"{label} movie",
    )

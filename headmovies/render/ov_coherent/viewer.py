"""The OV-coherent viewer (source 004; docs/viewer.md, "OV-coherent viewer"): one self-contained
HTML page that scrubs and plays through an ov-coherent run, built from its run file alone
(`render.core.scatter_viewer`, the page's own script viewer_page/family.js).

Every token is a dot (signal tokens 1-4 coloured as in the movie, noise 5-11 small and grey,
the read-off a ring), with its trail, in the shared read-off planes:

- "Head i and head j" (runs with two or more heads; the first pairs, at most MAX_PAIRS): the
  token's read-off QK score in head i across and in head j up, each minus that head's mean noise
  score (`figures.plane_coords`): the movie's plane. Opposite preference orders put the signal
  tokens on a falling diagonal.
- "Head h: where it looks and what it writes" (the first MAX_HEADS heads): the same QK score
  across, and up the logit attending to the token adds to the classes that contain it (mean
  over those classes of the centred OV table R_h[c, b], `analysis.ov_tables`); noise and the
  read-off belong to no class and sit at 0.

Per snapshot the legend gives each head's preference order of the signal tokens
(`analysis.format_ordering`), whether the first two are opposite, and the QK scores; a token's
pane gives its scores in every head and each head's OV table. The timeline shows the logged
accuracy, Kendall's τ between the orders of heads 1 and 2 (−1: opposite, `analysis.kendall_tau`)
and the movie's events (`movie.ov_coherent_timeline`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import to_hex

from headmovies.render.core import scatter_viewer
from headmovies.render.core.frame_states import trail_length
from headmovies.render.core.scatter_viewer import (
    Dot,
    Plane,
    Series,
    ViewerResult,
    at_snapshots,
    require_snapshots,
    run_facts,
    scatter_payload,
)
from headmovies.render.ov_coherent import analysis
from headmovies.render.ov_coherent.figures import TOKEN_COLOURS, plane_coords
from headmovies.render.ov_coherent.movie import ACC_COLOUR, OPPOSITE_COLOUR, opposite_over_time, ov_coherent_timeline
from headmovies.runfile.reader import Run
from headmovies.tasks import ov_coherent as ov_task

PACKAGE = "headmovies.render.ov_coherent.viewer_page"
MAX_PAIRS = 1  # head-pair planes shown (heads 1 and 2; a third head adds none, to fit the screen)
MAX_HEADS = 2  # per-head planes shown


def own_class_logits(R: np.ndarray) -> np.ndarray:
    """[..., 12]: per key token b, the mean over the classes containing b of the centred OV
    table R [..., 10, 12] (0 for the read-off and noise, in no class)."""
    out = np.zeros(R.shape[:-2] + (ov_task.D_VOCAB,))
    for b in ov_task.SIGNAL:
        rows = [c for c, pair in enumerate(ov_task.CLASSES) if b in pair]
        out[..., b] = R[..., rows, b].mean(-1)
    return out


def trajectories(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(epochs [S], read-off QK rows [S, H, 12], centred OV tables [S, H, 10, 12]), one pass."""
    epochs, qk, ov = [], [], []
    for epoch, w in run.iter_weights(list(ov_task.WEIGHT_NAMES)):
        epochs.append(epoch)
        qk.append(analysis.readoff_qk(w))
        ov.append(analysis.ov_tables(w))
    return np.array(epochs, np.int64), np.array(qk), np.array(ov)


def planes_of(H: int) -> tuple[list[Plane], list[tuple[str, int, int]]]:
    """The planes of a run with H heads and how each is made: ("pair", i, j) or ("head", h, h)."""
    planes, kinds = [], []
    pairs = [(i, j) for i in range(H) for j in range(i + 1, H)][:MAX_PAIRS]
    for i, j in pairs:
        planes.append(
            Plane(
                f"Heads {i + 1} and {j + 1}: preferred tokens",
                f"Across: how strongly head {i + 1}'s read-off attends to each token; up: the same for head "
                f"{j + 1} (QK score minus the mean over noise tokens). Opposite preference orders put 1-4 on a "
                "falling diagonal.",
                f"head {i + 1}",
                f"head {j + 1}",
            )
        )
        kinds.append(("pair", i, j))
    for h in range(min(H, MAX_HEADS)):
        planes.append(
            Plane(
                f"Head {h + 1}: where it looks, what it writes",
                f"Across: head {h + 1}'s read-off QK score of each token"
                + (", as on the left" if pairs else " (minus the mean over noise tokens)")
                + ". Up: the logit attending to the token adds to the pairs that contain it (centred OV table); "
                "noise sits at 0 up.",
                "attention score",
                "own-pair logit",
            )
        )
        kinds.append(("head", h, h))
    return planes, kinds


def viewer_payload(run: Run, trail_epochs: float | None = None) -> dict:
    """The page's payload (`scatter_payload`) of an open ov-coherent run; its trails span
    trail_epochs (default `frame_states.trail_length`: a tenth of the run, at most 250). UserError
    (one line) for a run of another experiment or one without snapshots."""
    analysis.require_run(run)
    require_snapshots(run)
    epochs, qk, ov = trajectories(run)
    n, H = len(epochs), qk.shape[1]
    xy = plane_coords(qk)  # (S, H, 12)
    own = own_class_logits(ov)  # (S, H, 12)
    planes, kinds = planes_of(H)
    coords = np.zeros((n, len(planes), ov_task.D_VOCAB, 2))
    for p, (kind, i, j) in enumerate(kinds):
        coords[:, p, :, 0] = xy[:, i]
        coords[:, p, :, 1] = xy[:, j] if kind == "pair" else own[:, i]
    orderings = [[analysis.format_ordering(qk[s, h]) for h in range(H)] for s in range(n)]
    opposite = opposite_over_time(qk).tolist() if H >= 2 else [None] * n
    metrics = run.metrics()
    acc = at_snapshots(epochs, metrics["epoch"], metrics["acc"]) if "acc" in metrics else None
    captions = []
    for s in range(n):
        words = [f"accuracy {acc[s]:.1%}"] if acc is not None and np.isfinite(acc[s]) else []
        if opposite[s] is not None:
            words.append(
                "heads 1 and 2 prefer the signal tokens in opposite orders" if opposite[s] else "orders not opposite"
            )
        captions.append(" · ".join(words))
    dots = [Dot("R", "#000000", "ring")]  # the read-off
    dots += [Dot(str(t), to_hex(TOKEN_COLOURS[t])) for t in ov_task.SIGNAL]
    dots += [Dot(f"noise {t}", "#9a9a9a", "small") for t in ov_task.NOISE]
    series = [Series("accuracy", ACC_COLOUR, acc)] if acc is not None else []
    if H >= 2:  # -1: opposite orders
        tau = np.array([analysis.kendall_tau(q[0], q[1]) for q in qk])
        series.append(Series("Kendall τ of heads 1 and 2's orders", OPPOSITE_COLOUR, tau, -1.0, 1.0))
    cfg = run.config
    timeline = ov_coherent_timeline(epochs, qk, metrics, cfg)
    detail = {
        "n_heads": H,
        "d_head": int(cfg.get("d_head", 0) or 0),
        "signal": list(ov_task.SIGNAL),
        "noise": list(ov_task.NOISE),
        "classes": [list(c) for c in ov_task.CLASSES],
        "orderings": orderings,
        "opposite": opposite,
    }
    return scatter_payload(
        family="ov_coherent",
        run_facts=run_facts(run, cfg.get("epochs", epochs[-1])),
        lead=(
            (
                f"How {H} attention heads learn to share one job: naming"
                if H > 1
                else "How one attention head learns to name"
            )
            + f" the two signal tokens hidden among noise, snapshot by snapshot ({n} snapshots)."
        ),
        runline=(
            f"{run.experiment} · {run.path.name} · seed {run.seed} · {H} head{'s' if H > 1 else ''} × d_head "
            f"{detail['d_head']} · sequences of {cfg.get('seq_len', '?')} tokens · source 004"
        ),
        epochs=epochs,
        captions=captions,
        coords=coords,
        planes=planes,
        dots=dots,
        series=series,
        events=timeline.events,
        detail=detail,
        arrays={"qk": xy.astype(np.float32), "ov": ov.astype(np.float32)},
        trail_epochs=trail_length(epochs, trail_epochs),
    )


def make_viewer(
    run_path: str | Path, out_dir: str | Path, name: str = "viewer", trail_epochs: float | None = None
) -> ViewerResult:
    """Write out_dir/name.html, the viewer of an ov-coherent run (whole or not at all; trails as
    in `viewer_payload`). UserError for a run a user can get wrong (missing, another experiment,
    no snapshot)."""
    return scatter_viewer.make_viewer(run_path, out_dir, lambda run: viewer_payload(run, trail_epochs), PACKAGE, name)

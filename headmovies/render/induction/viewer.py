"""The induction viewer (source 003; docs/viewer.md, "Induction viewer"): one self-contained
HTML page that scrubs and plays through an induction run, built from its run file alone
(`render.core.scatter_viewer`, the page's own script viewer_page/family.js).

Every head is a dot in two planes, with its trail:

- "Where each head looks": x = its mean attention on the previous token (offset 1), y = its
  mean attention at the induction offset, block length − 1 back: the token after the previous
  copy of the current one (`numpy_model.offset_profile` over the queries from the second block
  on, as `analysis.analyse` measures them), both on the same fresh sequences at every snapshot.
- "What each head writes": x = its OV copying score (`circuit_scores.copying_table`: +1 copies
  the attended token to the output, −1 suppresses it), y = the induction attention again.

Per head the page shows its copying score, both attention scores and its mean attention
pattern at the snapshot (`analysis.over_training`, 8 bits); the timeline shows the held-out
accuracy, the largest induction attention of any head, and the movie's events
(`movie.induction_timeline`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import to_hex

from headmovies.errors import UserError
from headmovies.render.core import scatter_viewer
from headmovies.render.core.frame_states import trail_length
from headmovies.render.core.panels import head_colours
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
from headmovies.render.induction.analysis import over_training
from headmovies.render.induction.movie import ACC_COLOUR, induction_timeline
from headmovies.render.induction.numpy_model import check_run, offset_profile
from headmovies.runfile.reader import Run

PACKAGE = "headmovies.render.induction.viewer_page"
N_SEQUENCES = 256  # fresh sequences per snapshot for the attention patterns (as the movie)
INDUCTION_COLOUR = "C3"  # the timeline's curve of the largest induction attention


def head_scores(attention: np.ndarray, block_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(previous-token, induction) attention [..., n_layers, H] from mean patterns
    [..., n_layers, H, T, T]: the mean attention one back and block_len − 1 back, over the
    queries from position block_len on (`offset_profile` with start = block_len)."""
    prof = offset_profile(np.asarray(attention, np.float64), start=block_len)
    return prof[..., 1], prof[..., block_len - 1]


def viewer_payload(
    run: Run, n_sequences: int = N_SEQUENCES, progress: bool = False, trail_epochs: float | None = None
) -> dict:
    """The page's payload (`scatter_payload`) of an open induction run; its trails span
    trail_epochs (default `frame_states.trail_length`: a tenth of the run, at most 250). UserError
    (one line) for a run of another experiment or one without snapshots."""
    check_run(run)
    require_snapshots(run)
    cfg = run.config
    L, T = int(cfg["block_len"]), int(cfg["seq_len"])
    hist = over_training(run, n_sequences=n_sequences, progress=progress)
    epochs, att = hist["epoch"], hist["attention"]  # (S, nl, H, T, T)
    S, nl, H = att.shape[:3]
    names = [f"L{li}H{h}" for li in range(nl) for h in range(H)]
    col = {n: i for i, n in enumerate(hist["circuits"])}
    prev, ind = (a.reshape(S, nl * H) for a in head_scores(att, L))
    copying = np.asarray(hist["copying"], np.float64)  # (S, C)
    head_copying = copying[:, [col[n] for n in names]]
    coords = np.stack([np.stack([prev, ind], -1), np.stack([head_copying, ind], -1)], 1)  # (S, 2 planes, K heads, 2)
    metrics = run.metrics()
    acc = at_snapshots(epochs, metrics["epoch"], metrics["heldout_acc"]) if "heldout_acc" in metrics else None
    timeline = induction_timeline(epochs, metrics, cfg)
    captions = [f"held-out accuracy {acc[s]:.1%}" if acc is not None and np.isfinite(acc[s]) else "" for s in range(S)]
    planes = [
        Plane(
            "Where each head looks",
            f"Across: mean attention on the previous token. Up: mean attention on the token after the previous "
            f"copy of the current one ({L - 1} back; an induction head's place). {n_sequences} fresh sequences.",
            "previous token",
            "induction",
            (0.0, 1.0),
            (0.0, 1.0),
        ),
        Plane(
            "What each head writes",
            "Across: OV copying score (+1: the head copies the token it attends to into the prediction, "
            "−1: it suppresses it). Up: attention at the induction offset, as on the left.",
            "copying score",
            "induction",
            (-1.0, 1.0),
            (0.0, 1.0),
        ),
    ]
    dots = [Dot(n, c) for n, c in zip(names, map(to_hex, head_colours([H] * nl)))]
    series = [Series("held-out accuracy", ACC_COLOUR, acc)] if acc is not None else []
    series.append(Series("the largest induction attention of any head", INDUCTION_COLOUR, ind.max(1)))
    detail = {
        "heads": names,
        "n_layers": nl,
        "n_heads": H,
        "seq_len": T,
        "block_len": L,
        "n_sequences": n_sequences,
        "circuits": list(hist["circuits"]),
    }
    arrays = {
        "copying": copying.astype(np.float32),
        "prev": prev.astype(np.float32),
        "induction": ind.astype(np.float32),
        "attention": np.round(np.clip(att, 0, 1) * 255).astype(np.uint8).reshape(S, nl * H, T, T),
    }
    return scatter_payload(
        family="induction",
        run_facts=run_facts(run, cfg.get("epochs", epochs[-1])),
        lead=(
            f"How the {nl * H} attention heads of a small transformer learn to continue a repeated block of "
            f"letters, snapshot by snapshot ({S} snapshots)."
        ),
        runline=(
            f"{run.experiment} · {run.path.name} · seed {run.seed} · {nl} layer{'s' if nl > 1 else ''} × {H} heads · "
            f"sequences of {T} letters, a block of {L} repeated · source 003"
        ),
        epochs=epochs,
        captions=captions,
        coords=coords,
        planes=planes,
        dots=dots,
        series=series,
        events=timeline.events,
        detail=detail,
        arrays=arrays,
        trail_epochs=trail_length(epochs, trail_epochs),
    )


def make_viewer(
    run_path: str | Path,
    out_dir: str | Path,
    n_sequences: int = N_SEQUENCES,
    name: str = "viewer",
    progress: bool = False,
    trail_epochs: float | None = None,
) -> ViewerResult:
    """Write out_dir/name.html, the viewer of an induction run (whole or not at all; trails as
    in `viewer_payload`). UserError for a run a user can get wrong (missing, another
    experiment, no snapshot)."""
    if not 1 <= n_sequences <= 100_000:
        raise UserError(f"--sequences must be in 1..100000, got {n_sequences}")
    return scatter_viewer.make_viewer(
        run_path, out_dir, lambda run: viewer_payload(run, n_sequences, progress, trail_epochs), PACKAGE, name
    )

"""The viewer of any run (`headmovies view RUN --out DIR`, `headmovies.show(RUN, "viewer")`;
docs/recording.md, "The viewer"): one self-contained HTML page (no server, no network), a family of
the scatter viewer (render/core/scatter_viewer.py; its own script viewer_page/family.js).

Every head of every layer is a dot with its trail in the movie's planes: for a run with probe
scores and no group, panels or basis (`score_space.score_view`, the movie's rule), score space,
one plane per layer holding that layer's heads at (previous-token score, induction score), axes
fixed 0 to 1 (the other layers' heads have no point there: NaN coordinates, which the page
neither draws nor picks); else (or `view="axes"`) `planes.py`'s irrep planes, a user's basis or
principal axes, axes symmetric about 0, eased as the movie's. In the movie's head colours,
captioned with the run's metrics at each snapshot. The timeline draws the logged metrics
(accuracies 0 to 1, positive losses and positive metrics spanning more than a factor 100 on a
log scale, others between their extremes) and marks when an accuracy first reaches 90 %. A
head's pane shows its centred QK [n, n] and OV [n_out, n] circuits as heatmaps at the stored
snapshot at or before the current one: up to `MAP_SNAPSHOTS` spread over the run, each
map int8 (scaled by its own largest |entry|, stored beside it as float32, the heatmap's scale).

The payload's family arrays: qk int8 [M, H, n, n], ov int8 [M, H, n_out, n], scales float32
[M, H, 2] (QK, OV); detail: heads [H], map_epochs [M], tokens n, outputs n_out, group_order,
layers, probe, view ("scores" or "axes").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_hex

from headmovies.errors import plural
from headmovies.render.core.frame_states import trail_length
from headmovies.render.core.panels import head_colours
from headmovies.render.core.scatter_viewer import (
    Dot,
    Plane,
    Series,
    at_snapshots,
    make_viewer,
    run_facts,
    scatter_payload,
)
from headmovies.render.core.timeline import Event
from headmovies.render.core.viewer_page.build import page
from headmovies.render.generic.figures import first_epoch_at
from headmovies.render.generic.heads import Heads, find_heads, iter_circuits
from headmovies.render.generic.movie import header, metrics_caption
from headmovies.render.generic.planes import planes_of
from headmovies.render.generic.score_space import AXIS_WORDS, X_SCORE, Y_SCORE, score_view
from headmovies.runfile.reader import Run

PACKAGE = "headmovies.render.generic.viewer_page"
MAP_SNAPSHOTS = 40  # snapshots whose heatmaps the page holds, spread over the run
MAX_CURVES = 6  # logged metrics drawn on the timeline (sorted by name)
REACHED = 0.9  # the timeline marks when an accuracy first reaches this
LOG_SPAN = 100  # a positive metric spanning more than this factor is drawn as log10 (losses always)
SCORES = ("previous_token", "duplicate_token", "induction")  # the probe's head scores, timeline order
PATTERN_SNAPSHOTS = 20  # snapshots whose attention patterns on the probe the page holds
PATTERN_POSITIONS = 64  # the first positions of the probe's first sequence drawn


def map_indices(T: int, most: int = MAP_SNAPSHOTS) -> np.ndarray:
    """int [M]: up to `most` snapshot indices spread evenly over 0..T-1, first and last included."""
    return np.unique(np.linspace(0, T - 1, min(T, most)).round().astype(int))


def quantise(X: np.ndarray) -> tuple[np.ndarray, float]:
    """(int8 round(127 X / s), s) with s the largest |entry| of X (1.0 for a zero map)."""
    s = float(np.abs(X).max()) or 1.0
    return np.round(X / s * 127).astype(np.int8), s


def heatmap_arrays(run: Run, heads: Heads) -> tuple[list[int], dict[str, np.ndarray]]:
    """(map epochs [M], {qk int8 [M, H, n, n], ov int8 [M, H, n_out, n], scales float32 [M, H, 2]})
    of every head's centred circuits at `map_indices` snapshots."""
    epochs, qk, ov, scales = [], [], [], []
    for epoch, circ in iter_circuits(run, heads, map_indices(len(run))):
        epochs.append(int(epoch))
        q = [quantise(X) for X in circ["qk"]]
        o = [quantise(X) for X in circ["ov"]]
        qk.append(np.stack([m for m, _ in q]))
        ov.append(np.stack([m for m, _ in o]))
        scales.append([[sq, so] for (_, sq), (_, so) in zip(q, o)])
    return epochs, {"qk": np.stack(qk), "ov": np.stack(ov), "scales": np.array(scales, np.float32)}


def probe_arrays(run: Run, heads: Heads) -> tuple[dict, dict[str, np.ndarray]]:
    """The probe's part of the payload, ({} , {}) for a run without a probe: detail {scores:
    [names], pattern_epochs [M], positions P, tokens [P] (the first probe sequence's token ids),
    token_labels [P] (decoded strings, or the ids)} and arrays {scores float32 [T, S, H] (NaN:
    none), patterns uint8 [M, H, P, P] (attention x 255, query rows, key columns; M = 0 when
    the file holds no patterns)} for heads in `heads.labels` order, the first
    `PATTERN_POSITIONS` positions of the first sequence at up to `PATTERN_SNAPSHOTS` snapshots."""
    stored = run.head_scores()
    tokens = run.probe_tokens()
    if not stored or tokens is None:
        return {}, {}
    names = [n for n in SCORES if n in stored]
    pick = [(layer, h) for layer, n in enumerate(heads.n_heads) for h in range(n)]
    T = min(len(stored[n]) for n in names)
    scores = np.full((T, len(names), heads.total), np.nan, np.float32)
    for j, n in enumerate(names):
        for k, (layer, h) in enumerate(pick):
            if layer < stored[n].shape[1] and h < stored[n].shape[2]:
                scores[:, j, k] = stored[n][:T, layer, h]
    P = min(PATTERN_POSITIONS, tokens.shape[1])
    pattern_epochs, patterns = [], []
    for t in map_indices(T, PATTERN_SNAPSHOTS) if T else []:
        stored_patterns = run.patterns(int(t))
        if stored_patterns is None:  # a file without patterns
            break
        A = stored_patterns[0]  # [L, H, P, P] of the first sequence
        pattern_epochs.append(int(run.epochs[t]))
        patterns.append(np.stack([A[layer, h, :P, :P] for layer, h in pick]))
    pats = np.zeros((0, heads.total, P, P), np.uint8)
    if patterns:
        pats = np.round(np.clip(np.stack(patterns), 0, 1) * 255).astype(np.uint8)
    ids = [int(i) for i in tokens[0, :P]]
    decoded = run.probe_labels()
    detail = {
        "scores": names,
        "pattern_epochs": pattern_epochs,
        "positions": P,
        "tokens": ids,
        "token_labels": decoded[:P] if decoded is not None else [str(i) for i in ids],
    }
    return detail, {"scores": scores, "patterns": pats}


def metric_curves(epochs: np.ndarray, metrics: dict[str, np.ndarray]) -> tuple[list[Series], list[Event]]:
    """The timeline's curves: up to `MAX_CURVES` logged metrics at the snapshots (accuracies
    from 0 to 1; positive losses, and positive metrics spanning more than a factor `LOG_SPAN`, on a
    log scale (`Series.log`); each between its extremes, every loss on one range, the y-axis' scale;
    a metric never logged at a snapshot is left out; one logged at some snapshots only is drawn
    through the values it has); and an event where an accuracy first reaches 90 %."""
    palette = [to_hex(c) for c in colormaps["Dark2"].colors]  # type: ignore[attr-defined]
    series: list[Series] = []
    events: list[Event] = []
    for name in sorted(k for k in metrics if k != "epoch"):
        values = at_snapshots(epochs, metrics["epoch"], metrics[name])
        seen = values[np.isfinite(values)]
        if not seen.size or len(series) == MAX_CURVES:
            continue
        colour = palette[len(series) % len(palette)]
        log = False
        if "acc" in name and seen.min() >= 0 and seen.max() <= 1:
            lo, hi = 0.0, 1.0
            reached = first_epoch_at(metrics, name, REACHED)
            if reached is not None and epochs[0] <= reached <= epochs[-1]:
                words = f"{name} first reaches {REACHED:.0%}"
                events.append(Event(reached, f"{name} {REACHED:.0%}", colour=colour, phase=False, words=words))
        else:
            if seen.min() > 0 and ("loss" in name or seen.max() > LOG_SPAN * seen.min()):
                values, seen, log = np.log10(values), np.log10(seen), True
            lo, hi = float(seen.min()), float(seen.max())
            hi = hi if hi > lo else lo + 1.0
        series.append(Series(name, colour, values, lo, hi, log))
    losses = [i for i, s in enumerate(series) if s.log and "loss" in s.label]
    if losses:  # every loss on one axis, the y-axis': train and validation losses compare
        lo, hi = min(series[i].lo for i in losses), max(series[i].hi for i in losses)
        for i in losses:
            series[i] = replace(series[i], lo=lo, hi=hi, scale=i == losses[0])
    return series, events


def final_epoch(run: Run) -> int:
    """The run's last epoch: its config's `epochs` when that is a whole number past the last
    snapshot (a run still training), else the last snapshot's."""
    last = int(run.epochs[-1])
    planned = run.config.get("epochs")
    return int(planned) if isinstance(planned, int) and not isinstance(planned, bool) and planned > last else last


SCORE_AXES = (
    "Each head of this layer at its scores on the probe (random tokens repeated twice): across, its "
    "attention to the previous token; up, to the token after the earlier occurrence of the current one "
    "(induction). 0.5 (dashed): a perfect induction head."
)


def score_planes(run: Run, heads: Heads) -> tuple[np.ndarray, np.ndarray, list[Plane], str]:
    """Score space for the page: (epochs [T], coords float64 [T, L, H, 2], one `Plane` per layer
    with axes fixed 0 to 1, the runline's second line). Plane l holds layer l's heads at
    (previous-token score, induction score); every other head's point there is NaN. T: the
    snapshots with scores."""
    stored = run.head_scores()
    x, y = stored[X_SCORE], stored[Y_SCORE]  # [T, L', H']
    T, L = len(x), len(heads.n_heads)
    coords = np.full((T, L, heads.total, 2), np.nan)
    k = 0
    for layer, n in enumerate(heads.n_heads):
        for h in range(n):
            if layer < x.shape[1] and h < x.shape[2]:
                coords[:, layer, k] = np.stack([x[:, layer, h], y[:, layer, h]], -1)
            k += 1
    planes = [
        Plane(
            f"layer {layer} ({plural(n, 'head')})", SCORE_AXES, AXIS_WORDS[X_SCORE], AXIS_WORDS[Y_SCORE], (0, 1), (0, 1)
        )
        for layer, n in enumerate(heads.n_heads)
    ]
    how = f"{heads.total} heads drawn in score space: each at its probe scores (TransformerLens's head detectors)"
    return run.epochs[:T].copy(), coords, planes, how


def viewer_payload(
    run: Run,
    group_order: int | None = None,
    panels: list[str] | None = None,
    basis: dict | None = None,
    view: str | None = None,
) -> dict:
    """The page's payload (`scatter_payload`, module docstring) of an open run: in score space
    or in planes as `score_space.score_view(run, view, ...)` decides (view None, "scores" or
    "axes"). RunFileError for a run without attention weights; UserError for bad panels, basis
    or view (`planes_of`, `score_view`)."""
    heads = find_heads(run, group_order)
    scores = score_view(run, view, group_order, panels, basis)
    if scores:
        epochs, coords, plane_list, how = score_planes(run, heads)
        what = run.attrs().get("adapter") or f"{run.experiment} run"
        runline = f"{run.path.name}: {what} · {how}"
    else:
        planes = planes_of(run, heads, panels, basis)
        epochs = planes.epochs
        coords = np.stack([planes.coords.real, planes.coords.imag], -1)  # [T, P, H, 2]
        x_label, y_label = planes.axis_labels
        plane_list = [Plane(title, note, x_label, y_label) for title, note in zip(planes.titles, planes.notes)]
        runline = header(run, heads, planes).replace("\n", " · ")
    T, H = len(epochs), heads.total
    metrics = run.metrics()
    caption = metrics_caption(metrics)
    series, events = metric_curves(epochs, metrics) if "epoch" in metrics else ([], [])
    map_epochs, arrays = heatmap_arrays(run, heads)
    probe, probe_data = probe_arrays(run, heads)
    if probe and len(probe_data["scores"]) != T:
        probe, probe_data = {}, {}  # scores not at every snapshot drawn: left out
    lead = (
        f"What the {H} attention heads of this model do as it trains: each head at its previous-token and "
        f"induction scores on the probe, one plane per layer, snapshot by snapshot ({plural(T, 'snapshot')})."
        if scores
        else f"How the {H} attention heads of this model move as it trains, snapshot by snapshot "
        f"({plural(T, 'snapshot')})."
    )
    return scatter_payload(
        family="generic",
        run_facts=run_facts(run, final_epoch(run)),
        lead=lead,
        runline=runline,
        epochs=epochs,
        captions=[caption(int(e)) for e in epochs],
        coords=coords,
        planes=plane_list,
        dots=[Dot(label, to_hex(c)) for label, c in zip(heads.labels, head_colours(heads.n_heads))],
        series=series,
        events=events,
        detail={
            "heads": heads.labels,
            "map_epochs": map_epochs,
            "tokens": heads.tokens,
            "outputs": heads.outputs,
            "group_order": heads.group_order,
            "layers": len(heads.n_heads),
            "probe": probe,
            "view": "scores" if scores else "axes",
        },
        arrays={**arrays, **probe_data},
        trail_epochs=trail_length(epochs),
    )


def viewer_text(run_path: str | Path, **planes) -> str:
    """The whole viewer page of `run_path` as text (for `headmovies.show`); `planes`: the
    keyword arguments of `viewer_payload`."""
    with Run(run_path) as run:
        return page(viewer_payload(run, **planes), PACKAGE)


def render_viewer(
    run_path: str | Path,
    out_dir: str | Path,
    group_order: int | None = None,
    panels: list[str] | None = None,
    basis: dict[str, np.ndarray] | None = None,
    view: str | None = None,
    name: str = "viewer",
) -> Path:
    """Write out_dir/NAME.html for `run_path` (whole or not at all); returns its path. `view`:
    None, "scores" or "axes" (`viewer_payload`)."""
    return make_viewer(
        run_path, out_dir, lambda run: viewer_payload(run, group_order, panels, basis, view), PACKAGE, name
    ).path

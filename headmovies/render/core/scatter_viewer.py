"""The scatter viewer's payload (docs/viewer.md, "The viewer engine: how a family plugs in"): one
self-contained HTML page that scrubs and plays through a run's snapshots, with dots and their
trails in a few planes, a timeline of the run's curves and events, and a family's own legend and
detail pane.

A family (render/induction/viewer.py, render/ov_coherent/viewer.py, render/generic/viewer.py)
computes what its planes show at every snapshot and calls `scatter_payload`; `write_page` inlines
the payload with the viewer engine's page (render/core/viewer_page/) and the family's family.js
from its own viewer_page package (`build.page`).

The payload, JSON inside the page:

- meta: run facts (file, experiment, final epoch, complete), the words of the page (`lead`,
  a plain sentence first, then `runline`), the planes (`Plane`), the dots (`Dot`), the
  timeline's curves (label, colour, range) and events (`core.timeline.Event`), the trail length
  in epochs, the rescaling rule of symmetric axes (`frame_states`), the heatmap colours, and
  `detail`: whatever the family's script needs (JSON).
- epochs [T] and captions [T] (a line of words per snapshot).
- arrays (`viewer_page.build.pack`): coords float32 [T, P, K, 2] (x, y of dot k in plane p),
  curves float32 [T, C] (NaN: no value), and the family's own arrays.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_hex

from headmovies.errors import UserError
from headmovies.render.core.frame_states import EASE, FLOOR, LOOKAHEAD, MARGIN, TRAIL_EPOCHS
from headmovies.render.core.outputs import prepare_out_dir, write_text
from headmovies.render.core.timeline import Event
from headmovies.render.core.viewer_page.build import pack, page
from headmovies.runfile.reader import Run

PAYLOAD_VERSION = 1
HEATMAP = "RdBu_r"  # signed heatmaps: red positive, blue negative
SEQUENTIAL = "Greys"  # heatmaps of values from 0 (white) up (attention)
AXES = {"lookahead": LOOKAHEAD, "ease": EASE, "margin": MARGIN, "floor": FLOOR}  # the movie's eased axes


@dataclass(frozen=True)
class Plane:
    """One panel. x, y: fixed axis ranges (lo, hi), or None for axes symmetric about 0 that
    follow the dots (the movie's rule, `frame_states`)."""

    title: str
    axes: str  # what x and y are, in a sentence or two
    x_label: str
    y_label: str
    x: tuple[float, float] | None = None
    y: tuple[float, float] | None = None


@dataclass(frozen=True)
class Dot:
    """One dot in every plane. kind: "dot" (filled), "small" (small grey) or "ring" (hollow)."""

    label: str
    colour: str
    kind: str = "dot"


@dataclass(frozen=True)
class Series:
    """A timeline curve, sampled at the snapshots (values [T], NaN where there is none), drawn
    between lo and hi. log: values, lo and hi are log10 of the metric (the page names the
    range in the metric's own units, "log scale, 0.5 to 4"). scale: the timeline's y-axis is
    this curve's (ticks in the metric's units; default the first curve's). The page joins a
    curve over the snapshots where it has no value and dots each value it has there."""

    label: str
    colour: str
    values: np.ndarray
    lo: float = 0.0
    hi: float = 1.0
    log: bool = False
    scale: bool = False


def colour_stops(name: str, stops: int = 11) -> list[list[int]]:
    """[stops][3] RGB (0..255) of a matplotlib colour map at equally spaced points; the page
    interpolates linearly between them."""
    rgb = colormaps[name].resampled(stops)(np.arange(stops))[:, :3]
    return np.round(rgb * 255).astype(int).tolist()


def event_words(events: Sequence[Event]) -> list[dict]:
    """The timeline's events for the page: {epoch, short (on the strip), label (sentence), colour}."""
    out = []
    for e in sorted(events, key=lambda e: e.epoch):
        text = e.words or re.sub(r"^epoch [\d,]+: ", "", e.text) or e.label  # the page adds the epoch
        out.append({"epoch": int(e.epoch), "short": e.label, "label": text, "colour": to_hex(e.colour)})
    return out


def at_snapshots(epochs: np.ndarray, metric_epochs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A logged metric at each snapshot epoch: its value at that epoch, NaN where it was not
    logged (float64 [T])."""
    where = {int(e): float(v) for e, v in zip(metric_epochs, values)}
    return np.array([where.get(int(e), math.nan) for e in epochs])


def scatter_payload(
    *,
    family: str,
    run_facts: dict,
    lead: str,
    runline: str,
    epochs: np.ndarray,
    captions: Sequence[str],
    coords: np.ndarray,
    planes: Sequence[Plane],
    dots: Sequence[Dot],
    series: Sequence[Series],
    events: Sequence[Event],
    detail: dict,
    arrays: dict[str, np.ndarray] | None = None,
    trail_epochs: float = TRAIL_EPOCHS,
) -> dict:
    """The page's payload (module docstring). run_facts: {file, experiment, final_epoch,
    complete}; coords [T, P, K, 2] with P = len(planes), K = len(dots). ValueError on shapes
    that disagree."""
    T = len(epochs)
    if coords.shape != (T, len(planes), len(dots), 2):
        raise ValueError(f"coords {coords.shape} do not fit {T} snapshots, {len(planes)} planes, {len(dots)} dots")
    if len(captions) != T or any(len(s.values) != T for s in series):
        raise ValueError("captions and curves need one value per snapshot")
    curves = np.stack([np.asarray(s.values, np.float32) for s in series], -1) if series else np.zeros((T, 0))
    meta = {
        "version": PAYLOAD_VERSION,
        "family": family,
        **run_facts,
        "lead": lead,
        "runline": runline,
        "planes": [asdict(p) for p in planes],
        "dots": [asdict(d) for d in dots],
        "curves": [
            {"label": s.label, "colour": to_hex(s.colour), "lo": s.lo, "hi": s.hi, "log": s.log, "scale": s.scale}
            for s in series
        ],
        "events": event_words(events),
        "trail_epochs": trail_epochs,
        "axes": AXES,
        "colours": {"heatmap": colour_stops(HEATMAP), "sequential": colour_stops(SEQUENTIAL)},
        "detail": detail,
    }
    packed = {"coords": coords.astype(np.float32), "curves": curves.astype(np.float32), **(arrays or {})}
    return {
        "meta": meta,
        "epochs": [int(e) for e in epochs],
        "captions": list(captions),
        "arrays": pack(packed),
    }


@dataclass
class ViewerResult:
    """A written viewer: its path, size in bytes, seconds to build, and snapshots shown."""

    path: Path
    bytes: int
    seconds: float
    snapshots: int


def require_snapshots(run: Run) -> None:
    """UserError (one line) for a run file that holds no snapshot yet."""
    if len(run) == 0:
        raise UserError(f"{run.path} has no snapshot yet")


def run_facts(run, final_epoch: int) -> dict:
    """The payload's run facts of a run file (`runfile.reader.Run`): file name, experiment,
    the run's last epoch `final_epoch` (its timeline's end) and whether it is complete."""
    return {
        "file": run.path.name,
        "experiment": run.experiment,
        "final_epoch": int(final_epoch),
        "complete": bool(run.complete),
    }


def write_page(payload: dict, package: str, out_dir: str | Path, name: str = "viewer") -> Path:
    """Write out_dir/name.html (whole or not at all): the page of `package` (a family's
    viewer_page) with the payload. ValueError if the payload is not JSON (NaN, infinity)."""
    json.dumps(payload["meta"], allow_nan=False)  # fails before the folder is touched
    text = page(payload, package)
    out_dir = Path(out_dir)
    prepare_out_dir(out_dir)
    return write_text(out_dir / f"{name}.html", text)


def make_viewer(
    run_path: str | Path, out_dir: str | Path, payload_of: Callable[[Run], dict], package: str, name: str = "viewer"
) -> ViewerResult:
    """Write out_dir/name.html (whole or not at all): the page of `package` (a family's
    viewer_page) with the payload `payload_of(run)` of the run at `run_path`, timed. The errors
    of `Run` and `payload_of` (UserError for what a user can get wrong) come before anything is
    written."""
    t0 = time.perf_counter()
    with Run(run_path) as run:
        payload = payload_of(run)
    path = write_page(payload, package, out_dir, name)
    return ViewerResult(path, path.stat().st_size, time.perf_counter() - t0, len(payload["epochs"]))

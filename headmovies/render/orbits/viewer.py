"""The interactive viewer (docs/viewer.md): one self-contained HTML page (plain JavaScript and
canvas) that scrubs through a run of the orbit experiment, built from the run file alone.

What the page receives (the payload, JSON inside the page; binary arrays zlib-compressed and
base64-encoded, unpacked by the browser's DecompressionStream):

- coords   float32 [T, P, H, 2]: (Re, Im) of X^(u, v) of each head in each of the P panels
           chosen as for the movie (`panel_choice.resolve_panels`), from the same pass over the
           snapshots as the movie's (`stream`), so dots sit exactly where the movie puts them.
- rows     int8 [T, H, 4, m, 2 d_head] with scale codes int16 [T, H, 4, m], m = n // 2 + 1:
           per head the discrete Fourier transform over tokens of the four factors of its
           centred circuits (`render.core.circuits.circuit_factors`, `fourier_rows`), rows u = 0..n/2 (the others
           are their complex conjugates), each row (real parts, then imaginary parts) in 8 bits
           with its own power-of-2^(1/8) scale (`quantise_rows`). The page computes from them
           X^(u, v) = (1/n) sum_e A^[u, e] B^[v, e] for any plane chosen in the page, with a
           rigorous bound on its error from the rounding (drawn as a ring round each dot), and
           the heatmaps of both circuits. Rows, not whole factors, get scales because trained heads
           put their power in few frequencies: a plane then keeps its own precision (median
           error ~1 % of the panel's largest coordinate on the default run, against ~6 % with
           one scale per factor). Stored as differences between consecutive snapshots.
- the orbit check of every snapshot (`history.OrbitHistory`): verified orbits, each head's
  worst-shift match error, dead heads; when each orbit locks in (`OrbitHistory.locked_in`);
  and each snapshot's frequency groups with their orbit spectrum (`group_words`; the page's
  "Frequency groups" panel).
- per snapshot the movie's caption (accuracies, equivariance error, `captions.metrics_caption`),
  and the run's training events in the words of the movie's timeline (`events`).
- the constants the page's arithmetic shares with Python (meta: `fourier_rows`, `axes`,
  `trail_epochs`, `tol`, `dead_tol`, `colours`), so the page copies none.

The page is the viewer engine's (render/core/viewer_page/) with this family's parts in
viewer_page/ (`PACKAGE`); `page` inlines them with the payload into one file.

`ViewerData` builds this incrementally, one pass over the snapshots it has not seen
(`stream.collect`), so the live view (`watch.py`) reads and sends only new snapshots.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.colors import to_hex

from headmovies.render.core import scatter_viewer as core_viewer
from headmovies.render.core.frame_states import TRAIL_EPOCHS
from headmovies.render.core.outputs import prepare_out_dir, write_text
from headmovies.render.core.projections import Panel, polygon_order
from headmovies.render.core.scatter_viewer import AXES, HEATMAP, PAYLOAD_VERSION, colour_stops
from headmovies.render.core.viewer_page import build
from headmovies.render.core.viewer_page.build import pack, unpack
from headmovies.render.orbits.captions import metrics_caption
from headmovies.render.orbits.check import DEAD_TOL, TOL
from headmovies.render.orbits.check_run import group_of
from headmovies.render.orbits.colours import DEAD_COLOUR, DEAD_EDGE, OTHER_COLOUR, orbit_colour, shape_name
from headmovies.render.orbits.events import training_events
from headmovies.render.orbits.head_styles import final_tracks
from headmovies.render.orbits.history import OrbitHistory
from headmovies.render.orbits.panel_choice import check_panels, resolve_panels
from headmovies.render.orbits.spectrum import FrequencyGroup
from headmovies.render.orbits.stream import FinalSnapshot, RunInfo, collect, final_snapshot
from headmovies.runfile.reader import Run

__all__ = ["ViewerData", "make_viewer", "pack", "unpack"]  # pack, unpack: the viewer engine build's
MAX_MB = 5.0  # the default run's page stays under this (docs/viewer.md, "Payload and precision")
PACKAGE = "headmovies.render.orbits.viewer_page"  # the orbit family's parts of the page


SCALE_STEPS = 8  # row scales are powers of 2^(1/8)
ZERO_CODE = -32768  # the scale code of an all-zero row


def fourier_rows(F: np.ndarray) -> np.ndarray:
    """complex [..., m, d], m = n // 2 + 1: A^[u, e] = sum_a F[..., a, e] exp(+2 pi i u a / n) for
    u = 0..n/2 (the sign of `projections.irrep_coordinate`); rows u > n/2 are conj(A^[n - u])."""
    n = F.shape[-2]
    return (np.fft.ifft(F, axis=-2) * n)[..., : n // 2 + 1, :]


def quantise_rows(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 [..., m, 2d] (real parts, then imaginary parts), int16 codes [..., m]) with
    A ~ (q[..., :d] + i q[..., d:]) * 2 ** (code / SCALE_STEPS): each row's scale is the
    smallest power of 2^(1/8) that fits its largest part in 127 (ZERO_CODE for a zero row)."""
    R = np.concatenate([A.real, A.imag], axis=-1)
    top = np.abs(R).max(axis=-1)
    code = np.ceil(np.log2(np.maximum(top, 1e-300) / 127) * SCALE_STEPS)
    code = np.where(top > 0, np.clip(code, -32000, 32000), ZERO_CODE).astype(np.int16)
    scale = row_scales(code)
    q = np.round(R / np.where(scale > 0, scale, 1.0)[..., None])
    return np.clip(q, -127, 127).astype(np.int8), code


def row_scales(code: np.ndarray) -> np.ndarray:
    code = np.asarray(code)
    return np.where(code == ZERO_CODE, 0.0, 2.0 ** (code.astype(np.float64) / SCALE_STEPS))


def dequantise_rows(q: np.ndarray, code: np.ndarray) -> np.ndarray:
    """complex [..., m, d] from `quantise_rows`' output."""
    d = q.shape[-1] // 2
    scale = row_scales(code)[..., None]
    return (q[..., :d].astype(np.float64) + 1j * q[..., d:]) * scale


def rows_to_factors(A: np.ndarray, n: int) -> np.ndarray:
    """Real [..., n, d] factors from their rows u = 0..n/2 (the inverse of `fourier_rows`)."""
    full = np.concatenate([A, np.conj(A[..., 1 : (n + 1) // 2, :][..., ::-1, :])], axis=-2)
    return np.real(np.fft.fft(full, axis=-2)) / n


def time_delta(q: np.ndarray) -> np.ndarray:
    """Differences along axis 0 (the first kept as is) in q's integer type, wrapping; the page
    undoes them by a running sum in an Int8Array / Int16Array."""
    d = np.diff(q.astype(np.int32), axis=0, prepend=np.zeros_like(q[:1], np.int32))
    return d.astype(q.dtype)


def plane_words(panel: Panel, n: int, m: int) -> dict:
    """Title and axis text of one panel, in words (docs/math.md, "Irrep coordinates")."""
    r = panel.r(n, m)
    k = polygon_order(r, n)
    circuit = "QK" if panel.circuit == "qk" else "OV"
    turn = 360.0 * r / n
    deg = f"{turn:g}" if turn == int(turn) else f"{turn:.1f}"
    shape = "stays put" if k == 1 else f"draws a regular {k}-gon" if k > 2 else "draws a pair"
    return {
        "circuit": panel.circuit,
        "u": panel.u,
        "v": panel.v,
        "r": r,
        "order": k,
        "shape": shape_name(k),
        "title": f"{circuit} circuit, (u, v) = ({panel.u}, {panel.v})",
        "axes": (
            f"x, y: real and imaginary part of each head's ({panel.u}, {panel.v}) Fourier coefficient "
            f"of its centred {circuit} circuit. A shift by s turns every dot by ω·s·{360 / n:g}° "
            f"(ω = {r}: {deg}° per unit shift); an orbit {shape} here."
        ),
    }


def group_words(g: FrequencyGroup) -> list:
    """A frequency group as the page's groups.js reads it: [omega, order, heads, spectrum,
    r_min, r_max, odd_qk_max, odd_ov_max], numbers to 4 significant digits (NaN as null)."""
    d = g.to_dict()

    def top(xs, pick):
        xs = [x for x in xs if x is not None]
        return pick(xs) if xs else None

    return [
        g.omega,
        g.order,
        g.heads,
        d["spectrum"],
        top(d["r"], min),
        top(d["r"], max),
        top(d["odd_qk"], max),
        top(d["odd_ov"], max),
    ]


def _key(heads) -> str:
    return ",".join(str(int(h)) for h in sorted(heads))


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


@dataclass
class Chunk:
    start: int
    stop: int
    data: dict


class ViewerData:
    """The payload of a run, grown snapshot by snapshot (`grow`) as a live run grows.

    Panels are resolved once, from the final snapshot present when it is created (`--panels`
    words as for the movie; the first `grow` reuses that snapshot instead of reading it again).
    Raises RunFileError / UserError (one line) for a run that lacks group data or weights of
    the orbit check, or for tolerances out of range.
    """

    def __init__(
        self,
        run: Run,
        panels: Sequence[str] | None = None,
        tol: float = TOL,
        dead_tol: float = DEAD_TOL,
        trail_epochs: float = TRAIL_EPOCHS,
    ):
        self.n, self.m = group_of(run)
        final = final_snapshot(run, tol, dead_tol)
        self.final: FinalSnapshot | None = final  # used by the first `grow`, then dropped
        self.panels, self.panel_note = resolve_panels(panels, final.report, final.M, final.R, self.n, self.m)
        check_panels(run, self.panels)
        self.tol, self.dead_tol, self.trail_epochs = tol, dead_tol, trail_epochs
        self.n_heads = int(run.shape("W_Q")[0])
        self.d_head = int(run.shape("W_Q")[-1])
        self.info = RunInfo.of(run)
        self.history: OrbitHistory | None = None
        self.chunks: list[Chunk] = []

    @property
    def count(self) -> int:
        return self.chunks[-1].stop if self.chunks else 0

    def truncate(self, count: int) -> int:
        """Forget snapshots from index `count` on (a resumed run dropped them); whole chunks
        go, so the count may end lower. Returns the new count."""
        while self.chunks and self.chunks[-1].stop > count:
            self.chunks.pop()
        if self.history is not None:
            self.history = self.history.cut(self.count)
        return self.count

    def grow(self, run: Run) -> Chunk | None:
        """Read the snapshots of `run` past `count` into a new chunk (None if there are none),
        in one pass (`stream.collect`: coordinates, orbit check, factored circuits); the run's
        facts for `meta` (config, metrics, complete) are read again either way."""
        self.info = RunInfo.of(run)
        start, stop = self.count, len(run)
        if stop <= start:
            return None
        facts = collect(
            run,
            self.panels,
            check=True,
            factors=True,
            tol=self.tol,
            dead_tol=self.dead_tol,
            indices=np.arange(start, stop),
            final=self.final,
        )
        self.final = None
        part, coords = facts.history, facts.coords  # coords [t, P, H]
        assert part is not None and coords is not None and facts.factors is not None  # asked for all three
        self.history = part if self.history is None else self.history.concat(part)
        rows, codes = quantise_rows(fourier_rows(facts.factors))
        cap = metrics_caption(self.info.metrics)
        metrics = self.info.metrics
        eq = {}
        if "eq_error_pooled" in metrics:  # old files' eq_error is read as eq_error_pooled
            eq = {int(e): v for e, v in zip(metrics["epoch"], metrics["eq_error_pooled"])}
        epochs = [int(e) for e in facts.epochs]
        data = {
            "start": start,
            "epochs": epochs,
            "captions": [cap(e) for e in epochs],
            "eq_error": [_num(eq[e]) if e in eq else None for e in epochs],
            "orbits": [[[_key(h), _num(err)] for _, h, err in o] for o in part.orbits],
            "groups": [[group_words(g) for g in gs] for gs in facts.groups or []],
            "arrays": pack(
                {
                    "coords": np.stack([coords.real, coords.imag], -1).astype(np.float32),
                    "rows": time_delta(rows),
                    "codes": time_delta(codes),
                    "head_error": part.head_error.astype(np.float32),
                    "dead": part.dead.astype(np.uint8),
                }
            ),
        }
        chunk = Chunk(start, stop, data)
        self.chunks.append(chunk)
        return chunk

    def meta(self) -> dict:
        """Everything but the per-snapshot data: run, panels, events, orbits and their colours
        (as of the last `grow`)."""
        h = self.history
        sets: dict[str, dict] = {}
        if h is not None:
            for t, snapshot_orbits in enumerate(h.orbits):
                for size, heads, _ in snapshot_orbits:
                    sets.setdefault(_key(heads), {"heads": [int(x) for x in heads], "size": int(size), "first": t})
            latest = {_key(heads) for _, heads, _ in h.orbits[-1]} if len(h) else set()
        else:
            latest = set()
        # as in the movie: the orbits of the last snapshot, largest first, then ones seen earlier
        order = sorted(
            sets,
            key=lambda k: (k not in latest, -sets[k]["size"] if k in latest else sets[k]["first"], sets[k]["heads"][0]),
        )
        orbits = []
        for i, key in enumerate(order):
            s = sets[key]
            lock = h.locked_in(s["heads"]) if h is not None and key in latest else None
            orbits.append(
                {
                    "key": key,
                    "heads": s["heads"],
                    "size": s["size"],
                    "colour": to_hex(orbit_colour(i)),
                    "locked_in": lock,
                    "final": key in latest,
                }
            )
        info = self.info
        # the run's events and each final orbit's verification, in the movie's words; the page's
        # timeline spans the planned run (an interactive page may show what comes later)
        events = training_events(info.config, None, h, final_tracks(h) if h is not None and len(h) else [])
        return {
            "version": PAYLOAD_VERSION,
            "file": info.file,
            "experiment": info.experiment,
            "n": self.n,
            "m": self.m,
            "n_heads": self.n_heads,
            "d_head": self.d_head,
            "final_epoch": int(info.config.get("epochs", info.epochs[-1])),
            "complete": info.complete,
            "tol": self.tol,
            "dead_tol": self.dead_tol,
            "trail_epochs": self.trail_epochs,
            "panels": [plane_words(p, self.n, self.m) for p in self.panels],
            "panel_note": self.panel_note,
            "headline": headline(info, self.n, self.n_heads, self.tol, self.panel_note),
            "events": [
                {
                    "epoch": e.epoch,
                    "label": e.words,
                    "short": e.label,
                    "result": not e.phase,
                    "colour": to_hex(e.colour),
                }
                for e in events
            ],
            "orbits": orbits,
            "colours": {
                "other": to_hex(OTHER_COLOUR),
                "dead": to_hex(DEAD_COLOUR),
                "dead_edge": to_hex(DEAD_EDGE),
                "heatmap": colour_stops(HEATMAP),  # the heads' circuits: red positive, blue negative
            },
            "fourier_rows": {"scale_steps": SCALE_STEPS, "zero_code": ZERO_CODE},
            "axes": AXES,
        }

    def payload(self, live: dict | None = None) -> dict:
        return {"meta": self.meta(), "chunks": [c.data for c in self.chunks], "live": live}


def page(payload: dict) -> str:
    """The orbit viewer's page with `payload` (`ViewerData.payload`) in it, one self-contained
    HTML text (`render.core.viewer_page.build.page`)."""
    return build.page(payload, PACKAGE)


def headline(info: RunInfo, n: int, n_heads: int, tol: float, panel_note: str) -> str:
    """The page's first line, in plain words: the run, what it learns, the check and the planes."""
    return (
        f"{info.file}: {n_heads} attention heads learning addition mod {n} · each snapshot checked for "
        f"orbits (heads that a shift of the tokens turns into each other, within {100 * tol:g} %) · "
        f"shown in {panel_note}"
    )


@dataclass
class ViewerResult(core_viewer.ViewerResult):
    """The scatter viewers' ViewerResult, and the panels the orbit viewer drew."""

    panels: list[Panel]


def make_viewer(
    run_path: str | Path,
    out_dir: str | Path,
    panels: Sequence[str] | None = None,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
    name: str = "viewer",
    trail_epochs: float = TRAIL_EPOCHS,
) -> ViewerResult:
    """Write `out_dir/name.html`, the viewer of `run_path` (whole or not at all). Errors a
    user can cause (run file, weights, panels, output folder) are UserError, raised before
    anything is written."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    with Run(run_path) as run:
        data = ViewerData(run, panels, tol, dead_tol, trail_epochs)
        prepare_out_dir(out_dir)
        data.grow(run)
        text = page(data.payload())
        path = write_text(out_dir / f"{name}.html", text)
        return ViewerResult(path, path.stat().st_size, time.perf_counter() - t0, data.count, data.panels)

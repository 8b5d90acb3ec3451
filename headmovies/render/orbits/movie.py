"""The orbit movie (seed 000; docs/movie.md): run file -> circuits -> irrep coordinates ->
trailing-dot panels (+ timeline strip) -> encoder.

Each frame is one snapshot; each dot one head at (Re X^(u,v), Im X^(u,v)) of its centred QK
circuit M_h or OV circuit R_h (`render.core.projections`; docs/math.md, "Irrep coordinates").
The orbit check runs on every snapshot (`history`); a head is drawn as part of an orbit only
from the snapshot at which that orbit is verified (`looks`), and the timeline marks the
moment (`timeline`), where the movie holds its frame for `event_hold_s` seconds.
Snapshots are read in chunks as they are drawn, so memory does not grow with the run.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from headmovies.errors import RunFileError, UserError
from headmovies.render.core.circuits import CIRCUIT_WEIGHTS, centre_ov, centre_qk, ov_circuit, qk_circuit
from headmovies.render.core.encode import FORMATS, EncodeResult, Quality, encode, parse_formats
from headmovies.render.core.outputs import prepare_out_dir
from headmovies.render.core.panels import TRAIL_EPOCHS, PanelFigure, frame_states
from headmovies.render.core.projections import Panel, irrep_coordinate
from headmovies.runfile.reader import Run
from headmovies.render.orbits.check import CIRCUIT_NAMES, DEAD_TOL, TOL, run_report, snapshot_circuits
from headmovies.render.core.timeline import EVENT_HOLD_S, Curve, Timeline, hold_frames, schedule_events
from headmovies.render.orbits.colours import ONE_COLOUR
from headmovies.render.orbits.history import OrbitHistory, orbit_history
from headmovies.render.orbits.head_styles import OrbitLooks
from headmovies.render.orbits.panel_choice import resolve_panels
from headmovies.render.orbits.events import EQ_COLOUR, figcaption, orbit_timeline, refine_event


def require_group(run: Run) -> tuple[int, int]:
    """(n, m) of the run's symmetry group; RunFileError if the run has none."""
    if run.n is None or run.m is None:
        raise RunFileError(f"{run.path} ({run.experiment}) has no group data (n, m): irrep panels need "
                           "a run of a C_n-symmetric experiment such as orbits")
    return run.n, run.m


def check_panels(run: Run, panels: Sequence[Panel]) -> tuple[int, int]:
    """(n, m) of `run` after checking that every panel can be drawn from it: the run has group
    data, the weights of each panel's circuit, and token-indexed circuits of size n x n.
    Raises RunFileError / UserError with one line."""
    if not panels:
        raise UserError("no panels given")
    n, m = require_group(run)
    shapes = {name: run.f["snapshots"][name].shape[1:] for name in run.weight_names}
    for panel in panels:
        names = CIRCUIT_WEIGHTS[panel.circuit]
        missing = [w for w in names if w not in shapes]
        if missing:
            raise RunFileError(f"{run.path} ({run.experiment}) has no weights {missing}, so panel {panel} "
                               f"({panel.circuit.upper()} circuit) cannot be drawn")
        if shapes["W_E"][0] != n or (panel.circuit == "ov" and shapes["W_U"][-1] != n):
            raise RunFileError(f"{run.path}: panel {panel} needs {n} tokens and {n} output classes "
                               f"(C_{n}); W_E is {shapes['W_E']}, W_U is {shapes.get('W_U')}")
    return n, m


def panel_coordinates(run: Run, panels: Sequence[Panel], indices: np.ndarray | None = None,
                      chunk: int = 32) -> Iterator[tuple[int, np.ndarray]]:
    """(epoch, complex [P, H]) per snapshot: X^(u, v) of each head's centred circuit (the
    gauge-invariant part: centring leaves every coordinate with u, v != 0 unchanged)."""
    need = sorted({w for p in panels for w in CIRCUIT_WEIGHTS[p.circuit]})
    kinds = {p.circuit for p in panels}
    for epoch, w in run.iter_weights(need, chunk=chunk, indices=indices):
        circ = {}
        if "qk" in kinds:
            circ["qk"] = centre_qk(qk_circuit(w["W_E"], w["W_Q"], w["W_K"]))       # [H, n, n]
        if "ov" in kinds:
            circ["ov"] = centre_ov(ov_circuit(w["W_E"], w["W_V"], w["W_O"], w["W_U"]))  # [H, n, n]
        yield epoch, np.stack([irrep_coordinate(circ[p.circuit], p.u, p.v) for p in panels])


def n_heads_of(run: Run) -> int:
    name = next(w for w in ("W_Q", "W_K", "W_V", "W_O") if w in run.weight_names)
    return int(run.f["snapshots"][name].shape[1])


def final_report(run: Run, tol: float = TOL, dead_tol: float = DEAD_TOL):
    """(report, M, R) of the final snapshot, or (None, None, None) when the run lacks the
    weights or group data of a full orbit check (explicit panels can still be drawn)."""
    if any(w not in run.weight_names for w in CIRCUIT_NAMES):
        return None, None, None
    report = run_report(run, None, tol, dead_tol)
    M, R = snapshot_circuits(run, len(run) - 1)
    return report, M, R


def caption(run: Run) -> Callable[[int], str]:
    """Per-epoch text from the logged metrics (train / held-out accuracy, both equivariance
    errors: pooled and worst input, docs/math.md)."""
    met = run.metrics()
    if "epoch" not in met:
        return lambda epoch: ""
    index = {int(e): i for i, e in enumerate(met["epoch"])}
    parts = [("train_acc", "train {:.1%}"), ("heldout_acc", "held-out {:.1%}"),
             ("eq_error_pooled", "eq. error pooled {:.1e}"), ("eq_error_worst_input", "worst input {:.1e}")]
    parts = [(k, f) for k, f in parts if k in met]

    def caption(epoch: int) -> str:
        i = index.get(int(epoch))
        return "" if i is None else "   ".join(f.format(met[k][i]) for k, f in parts)
    return caption


AXIS_LABELS = ("real part of the coefficient", "imaginary part")


def header_text(run: Run, n: int, m: int, n_heads: int, trail_epochs: float) -> str:
    """Two lines: the run, and how to read a dot."""
    task = f"addition mod {n}" if run.experiment == "orbits" else f"the {run.experiment} task"
    return (f"{run.path.name} ({run.experiment}, seed {run.seed}): {n_heads} heads of one attention layer learning "
            f"{task}; the group C_{n} shifts tokens by s and outputs by {m}s\n"
            f"Each dot is one head: X^(u,v), the Fourier coefficient of its QK circuit (query u, key v) or "
            f"OV circuit (output u, input v); trails: last {trail_epochs:g} epochs")


class OrbitMovie:
    """The orbit movie of an open run, prepared once: panels, per-snapshot looks, timeline,
    figure. `frames()` streams the frames (each snapshot once, plus its held copies);
    `frame_epochs()` gives the epoch each frame shows, without rendering.

    panels: `--panels` words (`panel_choice.resolve_panels`). The orbit check of the final
    snapshot serves the panel choice; with `colour_orbits`, the check of every snapshot
    serves the looks and the timeline's orbit events. `event_hold_s`: seconds held at each
    held event (phase change, orbit verified) at `fps`. `timeline`: draw the strip. `blit`:
    as `PanelFigure`'s.
    Raises RunFileError / UserError (one line) for a run that cannot be drawn.
    """

    def __init__(self, run: Run, panels: Sequence[str] | None = None, panel_px: int = 480,
                 trail_epochs: float = TRAIL_EPOCHS, colour_orbits: bool = True, fps: float = 24.0,
                 event_hold_s: float = EVENT_HOLD_S, timeline: bool = True, progress: bool = False,
                 blit: bool = True):
        self.run = run
        n, m = require_group(run)
        report, M, R = final_report(run)
        self.panels, self.panel_note = resolve_panels(panels, report, M, R, n, m)
        self.n, self.m = check_panels(run, self.panels)
        self.trail_epochs = trail_epochs
        self.history: OrbitHistory | None = None
        self.looks: OrbitLooks | None = None
        H = n_heads_of(run)
        if colour_orbits and report is not None:
            bar = None
            if progress:
                from tqdm import tqdm
                bar = lambda it: tqdm(it, total=len(run), desc="orbit check per snapshot", unit="snapshot",  # noqa: E731
                                      dynamic_ncols=True, leave=False)
            self.history = orbit_history(run, progress=bar)
            final = next(panel_coordinates(run, self.panels, indices=np.array([len(run) - 1])))[1]
            self.looks = OrbitLooks(self.history, self.panels, final, n, m)
            self.note = self.looks.note
        else:
            self.note = ("one colour (orbit colours off)" if not colour_orbits
                         else "one colour (the run lacks weights of the orbit check)")
        tracks = self.looks.tracks if self.looks else []
        if self.history is not None:
            self.timeline = orbit_timeline(run, self.history, tracks)
        else:
            met = run.metrics()
            curves = ([Curve(met["epoch"], met["eq_error_pooled"], "equivariance error (pooled)", EQ_COLOUR,
                             axis="right")] if "eq_error_pooled" in met and len(met["eq_error_pooled"]) else [])
            self.timeline = Timeline(int(run.epochs[0]), int(run.epochs[-1]),
                                     schedule_events(run.config, run.epochs) + refine_event(run), curves,
                                     right_label="eq. error", right_log=True)
        self.extra = hold_frames(run.epochs, self.timeline.events, fps, event_hold_s)          # [T]
        self.caption = figcaption(run, H, self.history, tracks, self.panels, n)
        self.n_heads, self.panel_px, self.with_timeline = H, panel_px, timeline
        self.figure = self.make_figure(blit)

    def make_figure(self, blit: bool = True) -> PanelFigure:
        """A new `PanelFigure` of this movie (`blit=False`: drawn the ordinary way)."""
        n, m, H = self.n, self.m, self.n_heads
        if self.looks:
            colours, legend, order, outlines = (self.looks.colours, self.looks.legend, self.looks.draw_order,
                                                self.looks.outlines)
        else:
            colours, legend, order, outlines = [ONE_COLOUR] * H, [], None, []
        return PanelFigure([p.title(n, m) for p in self.panels], colours, legend,
                           header=header_text(self.run, n, m, H, self.trail_epochs), panel_px=self.panel_px,
                           draw_order=order, trail_epochs=self.trail_epochs, blit=blit,
                           notes=[p.note(n, m) for p in self.panels], axis_labels=AXIS_LABELS,
                           outlines=outlines, timeline=self.timeline if self.with_timeline else None,
                           snapshot_epochs=self.run.epochs, legend_cols=1)

    def __len__(self) -> int:
        """Frames, held copies included (not the encoder's final hold)."""
        return int(len(self.run) + self.extra.sum())

    def frame_epochs(self) -> np.ndarray:
        """int [len(self)]: the epoch each frame shows."""
        return np.repeat(self.run.epochs, 1 + self.extra)

    def states(self) -> Iterator:
        """The `FrameState` of every snapshot (with its look), in order."""
        states = frame_states(panel_coordinates(self.run, self.panels), trail_epochs=self.trail_epochs,
                              caption=caption(self.run))
        for t, state in enumerate(states):
            if self.looks is not None:
                state.look = self.looks.look(t)
            yield state

    def frames(self) -> Iterator[np.ndarray]:
        """RGBA uint8 frames [height, width, 4]: each snapshot's frame 1 + extra[t] times."""
        for t, state in enumerate(self.states()):
            frame = self.figure.render(state, rgba=True)
            for _ in range(1 + int(self.extra[t])):
                yield frame

    def close(self) -> None:
        self.figure.close()


def make_movie(run_path: str | Path, out_dir: str | Path, panels: Sequence[str] | None = None,
               formats: Sequence[str] | str = FORMATS, fps: float = 24.0, hold_s: float = 2.0,
               basename: str = "orbits", panel_px: int = 480, quality: Quality = Quality(),
               trail_epochs: float = TRAIL_EPOCHS, progress: bool = True, colour_orbits: bool = True,
               event_hold_s: float = EVENT_HOLD_S, timeline: bool = True,
               log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> EncodeResult:
    """Render the orbit movie of `run_path` into `out_dir/basename.{mp4,webm,gif,png,html}`.

    panels: `--panels` words (`panel_choice.resolve_panels`): None or ['default'] (the seed's
    four when the run's orbits show in them, else automatic), ['auto'], ['seed'], or
    CIRCUIT:U,V planes. One frame per snapshot; the frame of each held event (phase change,
    orbit verified) shown `event_hold_s` seconds; the last frame held `hold_s` seconds. The
    HTML snippet's figcaption is generated from the run (`timeline.figcaption`). Every check
    that can fail on user input (formats, run file, weights, output folder) runs before any
    frame is drawn; errors are UserError (one line).
    """
    formats = parse_formats(formats)
    out_dir = Path(out_dir)
    with Run(run_path) as run:
        movie = OrbitMovie(run, panels, panel_px, trail_epochs, colour_orbits, fps, event_hold_s, timeline, progress)
        try:
            prepare_out_dir(out_dir)
            total = len(movie) + int(round(hold_s * fps))
            held = ", ".join(f"{e.label} at {e.epoch:,}" for e in movie.timeline.events if e.hold)
            log(f"{run.path}: {len(run)} snapshot{'s' * (len(run) != 1)} (epochs {run.epochs[0]:,}..{run.epochs[-1]:,}), "
                f"{movie.panel_note}: {' '.join(map(str, movie.panels))}; {movie.note}; "
                f"held {event_hold_s:g} s: {held or 'nothing'}")
            bar = _progress(total, progress)
            try:
                result = encode(movie.frames(), out_dir, basename, fps=fps, hold_s=hold_s, formats=formats,
                                quality=quality, on_frame=bar.update if bar else None,
                                on_stage=(lambda s: bar.set_postfix_str(s)) if bar else None, caption=movie.caption)
            finally:
                if bar:
                    bar.close()
        finally:
            movie.close()
    return result


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc="movie", unit="frame", dynamic_ncols=True)

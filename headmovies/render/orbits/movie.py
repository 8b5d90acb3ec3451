"""The orbit movie (source 000; docs/movie.md): run file -> one pass over its snapshots (circuits,
irrep coordinates, orbit check) -> trailing-dot panels (+ timeline strip) -> encoder.

Each frame is one snapshot; each dot one head at (Re X^(u,v), Im X^(u,v)) of its centred QK
circuit M_h or OV circuit R_h (`render.core.projections`; docs/math.md, "Irrep coordinates").
The pass (`stream`) reads each snapshot once and runs the orbit check on it (`history`); a
head is drawn as part of an orbit only from the snapshot at which that orbit is verified
(`head_styles`), and the timeline marks the moment (`events`), where the movie holds its frame
for `event_hold_s` seconds. The pass keeps each snapshot's coordinates (P x H complex
numbers), not its weights; frames are drawn from them as they are encoded.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from headmovies.render.core.encode import EncodeResult, Quality, write_movie
from headmovies.render.core.frame_layout import PANEL_PX
from headmovies.render.core.frame_states import TRAIL_EPOCHS, frame_states
from headmovies.render.core.frame_workers import default_workers, frames_in_workers
from headmovies.render.core.movie_options import FORMATS, parse_formats
from headmovies.render.core.outputs import prepare_out_dir
from headmovies.render.core.panels import PanelFigure
from headmovies.render.core.timeline import EVENT_HOLD_S, Curve, Timeline, hold_frames
from headmovies.render.orbits.captions import AXIS_LABELS, figcaption, header_text, metrics_caption
from headmovies.render.orbits.colours import ONE_COLOUR
from headmovies.render.orbits.events import training_events
from headmovies.render.orbits.head_styles import OrbitLooks, Track
from headmovies.render.orbits.history import OrbitHistory
from headmovies.render.orbits.panel_choice import check_panels, require_group, resolve_panels
from headmovies.render.orbits.spectrum import panel_lines
from headmovies.render.orbits.stream import RunInfo, collect, final_snapshot
from headmovies.runfile.reader import Run

EQ_COLOUR = "#6a6a6a"
GIF_TEXT_PX = 9.5  # the GIF is scaled down no further than this height of its smallest text


def movie_timeline(
    info: RunInfo,
    history: OrbitHistory | None,
    tracks: Sequence[Track],
    n_heads: int,
    transient: np.ndarray | None = None,
    transient_colour: str = "",
) -> Timeline:
    """The strip: the training events (`events.training_events`), the heads in each final orbit
    while verified (stacked step areas, axes up to a quarter above the most heads they stack
    to; only with the orbit check, `history`), on top of them the heads in verified orbits that
    do not last (`transient`, bool [T, H] as `OrbitLooks.transient`, in `transient_colour`; none
    when it is None or all False), and the equivariance error (log scale, its own axes under the
    orbits' when both are drawn, `timeline.split_axes`) when logged."""
    curves = (
        [
            Curve(
                history.epochs, tr.verified * len(tr.heads), f"{tr.name()}", tr.colour, step=True, fill=True, stack=True
            )
            for tr in tracks
        ]
        if history is not None
        else []
    )
    others = np.zeros(len(info.epochs) if history is None else len(history), int)
    if history is not None and transient is not None and transient.any():
        others = transient.sum(1)
        curves.append(
            Curve(
                history.epochs,
                others,
                "verified orbits that do not last",
                transient_colour,
                step=True,
                fill=True,
                stack=True,
            )
        )
    met = info.metrics
    if "eq_error_pooled" in met and len(met["eq_error_pooled"]):
        curves.append(
            Curve(met["epoch"], met["eq_error_pooled"], "equivariance error (pooled)", EQ_COLOUR, axis="right")
        )
    events = training_events(info.config, info.epochs, history, tracks)
    start, end = int(info.epochs[0]), int(info.epochs[-1])
    if history is None:
        return Timeline(start, end, events, curves, right_label="eq. error", right_log=True)
    stacked = sum((tr.verified * len(tr.heads) for tr in tracks), others)  # [T]
    top = max(int(stacked.max(initial=0)), sum(len(tr.heads) for tr in tracks), 1)
    return Timeline(
        start,
        end,
        events,
        curves,
        left_label="heads in\nverified orbits",
        left_lim=(0, min(n_heads, 1.25 * top)),
        right_label="equivariance\nerror (pooled)",
        right_log=True,
    )


class OrbitMovie:
    """The orbit movie of an open run, prepared once: panels, the pass over the snapshots,
    per-snapshot looks, timeline, figure. `frames()` draws the frames (each snapshot once, plus
    its held copies; the run file may be closed by then); `frame_epochs()` gives the epoch each
    frame shows, without rendering.

    panels: `--panels` words (`panel_choice.resolve_panels`). The orbit check of the final
    snapshot serves the panel choice; with `colour_orbits`, the check of every snapshot (in
    the same pass as the coordinates) serves the looks and the timeline's orbit events.
    `event_hold_s`: seconds held at each held event (phase change, orbit verified) at `fps`.
    `timeline`: draw the strip. `progress`: a bar over the pass. `blit`: as `PanelFigure`'s.
    `layout`: 'wide' (landscape, default) or 'tall' (`render.core.frame_layout`); `panel_px`:
    the panels' side (None: the layout's default, `frame_layout.PANEL_PX`).
    Raises RunFileError / UserError (one line) for a run that cannot be drawn.
    """

    def __init__(
        self,
        run: Run,
        panels: Sequence[str] | None = None,
        panel_px: int | None = None,
        trail_epochs: float = TRAIL_EPOCHS,
        colour_orbits: bool = True,
        fps: float = 24.0,
        event_hold_s: float = EVENT_HOLD_S,
        timeline: bool = True,
        progress: bool = False,
        blit: bool = True,
        layout: str = "wide",
    ):
        n, m = require_group(run)
        final = final_snapshot(run)
        self.panels, self.panel_note = resolve_panels(panels, final.report, final.M, final.R, n, m)
        self.n, self.m = check_panels(run, self.panels)
        self.info = info = RunInfo.of(run)
        check = colour_orbits and final.report is not None

        def bar(it):
            from tqdm import tqdm

            desc = "circuits, coordinates" + (", orbit check" if check else "")
            return tqdm(it, total=len(run), unit="snapshot", dynamic_ncols=True, leave=False, desc=desc, disable=None)

        facts = collect(run, self.panels, check=check, final=final, progress=bar if progress else None)
        assert facts.coords is not None  # resolve_panels gives one panel or more
        self.epochs, self.coords, self.history = facts.epochs, facts.coords, facts.history  # [T], [T, P, H]
        # per snapshot, per panel: the spectrum of the frequency group whose plane it shows
        self.panel_lines = [panel_lines(g, list(self.panels), n, m) for g in facts.groups] if facts.groups else None
        self.n_heads = H = self.coords.shape[-1]
        self.trail_epochs = trail_epochs
        self.looks: OrbitLooks | None = None
        if self.history is not None:
            self.looks = OrbitLooks(self.history, self.panels, self.coords[-1], n, m)
            self.note = self.looks.note
        else:
            self.note = (
                "one colour (orbit colours off)"
                if not colour_orbits
                else "one colour (the run lacks weights of the orbit check)"
            )
        tracks = self.looks.tracks if self.looks else []
        self.timeline = movie_timeline(
            info,
            self.history,
            tracks,
            H,
            self.looks.transient if self.looks else None,
            self.looks.transient_colour if self.looks else "",
        )
        self.extra = hold_frames(self.epochs, self.timeline.events, fps, event_hold_s)  # [T]
        spectrum = self.panel_lines[-1] if self.panel_lines else ()
        self.caption = figcaption(info, H, self.history, tracks, self.panels, n, spectrum)
        self.layout = layout
        self.panel_px = PANEL_PX[layout] if panel_px is None else panel_px
        self.with_timeline = timeline
        self.figure = self.make_figure(blit)

    def make_figure(self, blit: bool = True) -> PanelFigure:
        """A new `PanelFigure` of this movie (`blit=False`: drawn the ordinary way)."""
        n, m, H = self.n, self.m, self.n_heads
        colours: list
        legend: list
        order: list[int] | None
        outlines: list
        if self.looks:
            colours, legend, order, outlines = (
                self.looks.colours,
                self.looks.legend,
                self.looks.draw_order,
                self.looks.outlines,
            )
        else:
            colours, legend, order, outlines = [ONE_COLOUR] * H, [], None, []
        return PanelFigure(
            [p.title(n, m) for p in self.panels],
            colours,
            legend,
            header=header_text(self.info, n, m, H, self.trail_epochs),
            panel_px=self.panel_px,
            draw_order=order,
            trail_epochs=self.trail_epochs,
            blit=blit,
            notes=[p.note(n, m) for p in self.panels],
            axis_labels=AXIS_LABELS,
            outlines=outlines,
            timeline=self.timeline if self.with_timeline else None,
            snapshot_epochs=self.epochs,
            legend_cols=1 if self.layout == "tall" else None,
            layout=self.layout,
        )

    def __len__(self) -> int:
        """Frames, held copies included (not the encoder's final hold)."""
        return int(len(self.epochs) + self.extra.sum())

    def frame_epochs(self) -> np.ndarray:
        """int [len(self)]: the epoch each frame shows."""
        return np.repeat(self.epochs, 1 + self.extra)

    def states(self) -> Iterator:
        """The `FrameState` of every snapshot (with its look), in order."""
        states = frame_states(
            zip(self.epochs, self.coords), trail_epochs=self.trail_epochs, caption=metrics_caption(self.info.metrics)
        )
        for t, state in enumerate(states):
            if self.looks is not None:
                state.look = self.looks.look(t)
            if self.panel_lines is not None:
                state.panel_text = self.panel_lines[t]
            yield state

    def frames(self, workers: int = 1) -> Iterator[np.ndarray]:
        """RGBA uint8 frames [height, width, 4], one per snapshot (`write_movie` repeats frame t
        1 + extra[t] times). `workers` > 1: drawn in that many forked processes
        (`frame_workers`), the same pixels; each frame is then valid until the next is asked for."""
        w, h = self.figure.size
        return frames_in_workers(self._frames_every, len(self.epochs), (h, w, 4), workers)

    def _frames_every(self, k: int, step: int) -> Iterator[np.ndarray]:
        """Frames k, k + step, k + 2·step, ... (each figure's frame is drawn from its state alone)."""
        for t, state in enumerate(self.states()):
            if t % step == k:
                yield self.figure.render(state, rgba=True, copy=step == 1)

    def close(self) -> None:
        self.figure.close()


def make_movie(
    run_path: str | Path,
    out_dir: str | Path,
    panels: Sequence[str] | None = None,
    formats: Sequence[str] | str = FORMATS,
    fps: float = 24.0,
    hold_s: float = 2.0,
    basename: str = "orbits",
    panel_px: int | None = None,
    quality: Quality = Quality(),
    trail_epochs: float = TRAIL_EPOCHS,
    progress: bool = True,
    colour_orbits: bool = True,
    event_hold_s: float = EVENT_HOLD_S,
    timeline: bool = True,
    layout: str = "wide",
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
    workers: int | None = None,
) -> EncodeResult:
    """Render the orbit movie of `run_path` into `out_dir/basename.{mp4,webm,gif,png,html}`.

    panels: `--panels` words (`panel_choice.resolve_panels`): None or ['default'] (the source's
    four when the run's orbits show in them, else automatic), ['auto'], ['source'], or
    CIRCUIT:U,V planes. One frame per snapshot; the frame of each held event (phase change,
    orbit verified) shown `event_hold_s` seconds; the last frame held `hold_s` seconds. `layout`:
    'wide' (landscape, the default) or 'tall' (portrait). `workers`: processes drawing frames
    (None: `frame_workers.default_workers()`, one per core, at most 4). The
    HTML snippet's figcaption is generated from the run (`captions.figcaption`). Every check
    that can fail on user input (formats, run file, weights, output folder) runs before any
    frame is drawn; errors are UserError (one line).
    """
    formats = parse_formats(formats)
    out_dir = Path(out_dir)
    with Run(run_path) as run:
        movie = OrbitMovie(
            run, panels, panel_px, trail_epochs, colour_orbits, fps, event_hold_s, timeline, progress, layout=layout
        )
        path = run.path
    try:  # the pass has read the run: the file is closed while frames are drawn
        prepare_out_dir(out_dir)
        quality = replace(quality, gif_width=legible_gif_width(movie.figure, quality.gif_width))
        held = ", ".join(f"{e.label} at {e.epoch:,}" for e in movie.timeline.events if e.hold)
        epochs = movie.epochs
        log(
            f"{path}: {len(epochs)} snapshot{'s' * (len(epochs) != 1)} (epochs {epochs[0]:,}..{epochs[-1]:,}), "
            f"{movie.panel_note}: {' '.join(map(str, movie.panels))}; {movie.note}; "
            f"held {event_hold_s:g} s: {held or 'nothing'}"
        )
        result = write_movie(
            movie.frames(default_workers() if workers is None else workers),
            out_dir,
            basename,
            repeats=movie.extra,
            fps=fps,
            hold_s=hold_s,
            formats=formats,
            quality=quality,
            caption=movie.caption,
            progress=progress,
        )
    finally:
        movie.close()
    return result


def legible_gif_width(figure: PanelFigure, least: int | None, text_px: float = GIF_TEXT_PX) -> int | None:
    """The GIF's width: at least `least` (the encoder's default) and wide enough that the
    frame's smallest text (`PanelFigure.smallest_text_px`) stays `text_px` pixels high after
    scaling; None (the frame's own width) when that needs the whole frame."""
    w = figure.size[0]
    need = math.ceil(w * text_px / figure.smallest_text_px())
    need = max(need, least or 0)
    return None if need >= w else need + need % 2

"""Render speed of the orbit movie: our renderer against matplotlib's FuncAnimation.save +
FFMpegWriter, on the same frames of one run, in one process.

    .venv/bin/python bench/render_speed.py [RUN] [--frames N] [--panel-px 480]

RUN defaults to data/orbits.h5 (`make movie` trains it). The frame states (coordinates,
trails, eased limits, each head's look from the orbit check of every snapshot, all from one
pass over the snapshots, `render.orbits.stream`) are computed once and shared, so every variant
draws exactly the same frames (the movie's figure: source panels, timeline strip, legend); each
variant writes one H.264 MP4 with the same encoder settings (libx264, preset medium, CRF 20,
yuv420p) and is timed end to end (draw + encode):

  ours          render.core.panels.PanelFigure (artists made once, blitting over a cached
                background, pixels from the canvas buffer) -> render.core.encode (raw frames
                streamed into ffmpeg's stdin)
  ours, no blit the same but a full canvas.draw() per frame
  FuncAnimation the same figure and update function, saved by FuncAnimation.save with
                FFMpegWriter (savefig of every frame to the ffmpeg pipe)

Then, without encoding: per-frame draw time over the run (first vs last quarter: flat?) and
the peak of Python allocations (tracemalloc) while streaming a quarter of the run vs all of
it through the pass and the drawing (flat in run length?). Prints frames/s and the ratios.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from headmovies.render.core.encode import Quality, encode, find_ffmpeg
from headmovies.render.core.frame_states import frame_states
from headmovies.render.core.panels import PanelFigure
from headmovies.render.orbits.movie import OrbitMovie
from headmovies.render.orbits.panel_choice import SOURCE_PANELS
from headmovies.render.orbits.stream import panel_coordinates
from headmovies.runfile.reader import Run

FPS = 24


def figure(movie: OrbitMovie, blit: bool) -> PanelFigure:
    return movie.make_figure(blit)


def time_ours(states, fig: PanelFigure, out: Path) -> float:
    t0 = time.perf_counter()
    encode((fig.render(s, rgba=True) for s in states), out, "ours", fps=FPS, hold_s=0, formats=["mp4"])
    return time.perf_counter() - t0


def time_funcanimation(states, fig: PanelFigure, out: Path, q: Quality) -> float:
    import matplotlib
    from matplotlib.animation import FFMpegWriter, FuncAnimation

    matplotlib.rcParams["animation.ffmpeg_path"] = find_ffmpeg(["libx264"])
    writer = FFMpegWriter(
        fps=FPS, codec="libx264", extra_args=["-preset", q.mp4_preset, "-crf", str(q.mp4_crf), "-pix_fmt", "yuv420p"]
    )
    anim = FuncAnimation(
        fig.fig, fig.update, frames=states, init_func=list, blit=False, cache_frame_data=False, repeat=False
    )
    t0 = time.perf_counter()
    anim.save(str(out / "funcanimation.mp4"), writer=writer, dpi=fig.fig.dpi)
    return time.perf_counter() - t0


def draw_times(states, fig: PanelFigure) -> np.ndarray:
    times = []
    for s in states:
        t0 = time.perf_counter()
        fig.render(s, rgba=True)
        times.append(time.perf_counter() - t0)
    return np.array(times)


def stream_peak(run: Run, indices: np.ndarray, fig: PanelFigure) -> float:
    """Peak MB of Python allocations while reading, projecting and drawing `indices`."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    for s in frame_states(panel_coordinates(run, SOURCE_PANELS, indices=indices)):
        fig.render(s, rgba=True)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", default="data/orbits.h5", type=Path)
    ap.add_argument("--frames", type=int, default=0, help="first N snapshots only (default: all)")
    ap.add_argument("--panel-px", type=int, default=480)
    args = ap.parse_args()
    with Run(args.run) as run:
        T = len(run) if args.frames <= 0 else min(args.frames, len(run))
        t0 = time.perf_counter()
        movie = OrbitMovie(run, panels=["seed"], panel_px=args.panel_px)
        states = list(itertools.islice(movie.states(), T))
        prep = time.perf_counter() - t0
        w, h = movie.figure.size
        print(
            f"{run.path}: {T} frames of {w}x{h} px; one pass (read, circuits, projections, orbit check of "
            f"every snapshot) + looks + trails: {prep:.2f} s ({T / prep:.0f} frames/s)"
        )
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            t_ours = time_ours(states, figure(movie, True), out)
            t_noblit = time_ours(states, figure(movie, False), out)
            t_fa = time_funcanimation(states, figure(movie, False), out, Quality())

        def rate(t):
            return T / t

        print(f"  ours (blit, buffer, stdin)   {rate(t_ours):6.1f} frames/s")
        print(f"  ours without blitting        {rate(t_noblit):6.1f} frames/s")
        print(f"  FuncAnimation.save+FFMpeg    {rate(t_fa):6.1f} frames/s")
        print(
            f"  ratio ours / FuncAnimation   {t_fa / t_ours:6.2f}x   (no-blit / FuncAnimation {t_fa / t_noblit:.2f}x)"
        )

        fig = figure(movie, True)
        dt = draw_times(states, fig) * 1e3
        q = max(1, T // 4)
        print(
            f"  draw only: {1e3 / dt.mean():.0f} frames/s; ms per frame first quarter "
            f"{np.median(dt[:q]):.1f}, last quarter {np.median(dt[-q:]):.1f} (median)"
        )
        quarter = stream_peak(run, np.arange(q), fig)
        full = stream_peak(run, np.arange(T), fig)
        print(f"  peak Python allocations streaming {q} snapshots: {quarter:.1f} MB, all {T}: {full:.1f} MB")


if __name__ == "__main__":
    main()

"""Render speed of the orbit movie: our renderer against matplotlib's FuncAnimation.save +
FFMpegWriter, and against the encoder alone, on the same frames of one run.

    .venv/bin/python bench/render_speed.py [RUN] [--frames 201] [--workers 2] [--panel-px 480] [--memory]

RUN defaults to data/orbits.h5 (`make movie` trains it). The movie is prepared once (one pass
over the snapshots: read, circuits, coordinates, orbit check of every snapshot; looks,
timeline); every variant then draws exactly the same first N frames (the movie's figure:
source panels, timeline strip, legend) and writes one H.264 MP4 with the same encoder settings
(libx264, preset medium, CRF 20, yuv420p), timed end to end (draw + encode):

  encoder floor the frames drawn beforehand (RGBA, in memory), then only streamed into ffmpeg:
                the most any renderer can reach with this encoder on this machine
  ours          `OrbitMovie.frames` (render.core.panels.PanelFigure: artists made once,
                blitting over a cached background, glyphs rasterised once,
                render.core.text_cache) -> render.core.encode (raw frames into ffmpeg's stdin),
                in one process, then with --workers drawing processes (render.core.frame_workers)
  FuncAnimation the same figure and update function on matplotlib's own Agg canvas, saved by
                FuncAnimation.save with FFMpegWriter (savefig of every frame to the ffmpeg pipe)

Prints the CPU (model, AVX-512), the load average before and after, frames/s, the CPU seconds
of each variant (this process and its children: ffmpeg, workers), the ratios, and the draw
time per frame over the run (first vs last quarter: flat?). --memory adds the peak of Python
allocations while streaming a quarter of the run vs all of it (flat in run length?).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

from headmovies.render.core.encode import Quality, encode, find_ffmpeg
from headmovies.render.core.frame_states import frame_states
from headmovies.render.core.panels import PanelFigure
from headmovies.render.orbits.movie import OrbitMovie
from headmovies.render.orbits.panel_choice import SOURCE_PANELS
from headmovies.render.orbits.stream import panel_coordinates
from headmovies.runfile.reader import Run

FPS = 24


def cpu_line() -> str:
    model, avx512 = "unknown CPU", False
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                avx512 = "avx512f" in line.split()
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores, AVX-512 {'yes' if avx512 else 'no'}"


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


class Timed:
    """Wall and CPU seconds (this process + waited-for children) of a block."""

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), self._cpu()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.t0, self._cpu() - self.c0

    @staticmethod
    def _cpu() -> float:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def time_floor(frames: list[np.ndarray], out: Path) -> Timed:
    with Timed() as t:
        encode(iter(frames), out, "floor", fps=FPS, hold_s=0, formats=["mp4"])
    return t


def time_ours(movie: OrbitMovie, workers: int, out: Path) -> Timed:
    with Timed() as t:
        encode(movie.frames(workers), out, f"ours{workers}", fps=FPS, hold_s=0, formats=["mp4"])
    return t


def time_funcanimation(states, fig: PanelFigure, out: Path, q: Quality) -> Timed:
    import matplotlib
    from matplotlib.animation import FFMpegWriter, FuncAnimation

    FigureCanvasAgg(fig.fig)  # matplotlib's own canvas (the figure's draws text through a glyph cache)
    matplotlib.rcParams["animation.ffmpeg_path"] = find_ffmpeg(["libx264"])
    writer = FFMpegWriter(
        fps=FPS, codec="libx264", extra_args=["-preset", q.mp4_preset, "-crf", str(q.mp4_crf), "-pix_fmt", "yuv420p"]
    )
    anim = FuncAnimation(
        fig.fig, fig.update, frames=states, init_func=list, blit=False, cache_frame_data=False, repeat=False
    )
    with Timed() as t:
        anim.save(str(out / "funcanimation.mp4"), writer=writer, dpi=fig.fig.dpi)
    return t


def draw_times(states, fig: PanelFigure) -> np.ndarray:
    """Seconds to draw each frame (one process, the canvas buffer copied as the movie does)."""
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
    ap.add_argument("--frames", type=int, default=201, help="the first N snapshots (default 201; 0: all)")
    ap.add_argument("--workers", type=int, default=2, help="drawing processes of the second 'ours' (default 2)")
    ap.add_argument("--panel-px", type=int, default=480)
    ap.add_argument("--memory", action="store_true", help="also the peak of Python allocations while streaming")
    args = ap.parse_args()
    print(f"{cpu_line()}; load average {load()} (1/5/15 min)")
    with Run(args.run) as run:
        T = len(run) if args.frames <= 0 else min(args.frames, len(run))
        with Timed() as prep:
            movie = OrbitMovie(run, panels=["seed"], panel_px=args.panel_px)
        movie.epochs = movie.epochs[:T]  # the first T frames (`states` and `frames` follow `epochs`)
        w, h = movie.figure.size
        print(
            f"{run.path}: {T} frames of {w}x{h} px; the movie prepared (one pass over all {len(run)} "
            f"snapshots: read, circuits, coordinates, orbit check; looks, timeline) in {prep.wall:.2f} s"
        )
        states = list(movie.states())
        fig = movie.make_figure(True)
        frames = [fig.render(s, rgba=True) for s in states]  # for the floor (fresh memory: not timed)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            floor = time_floor(frames, out)
            del frames
            ours = time_ours(movie, 1, out)
            par = time_ours(movie, args.workers, out)
            fa = time_funcanimation(states, movie.make_figure(False), out, Quality())

        def row(name: str, t: Timed) -> str:
            rate = f"{T / t.wall:6.1f} frames/s  {t.wall:6.2f} s"
            return f"  {name:34s} {rate}  CPU {t.cpu:6.2f} s  {fa.wall / t.wall:5.2f}x"

        print(f"  {'variant':34s} {'rate':>15s}  {'wall':>8s}  {'CPU (all processes)':>12s}  vs FuncAnimation")
        print(row("encoder floor (frames drawn before)", floor))
        print(row("ours, 1 process", ours))
        print(row(f"ours, {args.workers} drawing processes", par))
        print(row("FuncAnimation.save + FFMpegWriter", fa))
        ms = draw_times(states, movie.make_figure(True)) * 1e3
        q = max(1, T // 4)
        print(
            f"  draw only (1 process): {1e3 / ms.mean():.0f} frames/s; ms per frame first quarter "
            f"{np.median(ms[:q]):.1f}, last quarter {np.median(ms[-q:]):.1f} (median)"
        )
        if args.memory:
            quarter = stream_peak(run, np.arange(q), fig)
            full = stream_peak(run, np.arange(T), fig)
            print(f"  peak Python allocations streaming {q} snapshots: {quarter:.1f} MB, all {T}: {full:.1f} MB")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()

"""The one movie encoder of the project: RGB frames in, web-ready files out (docs/movie.md, "Encoding").

`encode(frames, out_dir, basename, ...)` streams equal-size uint8 frames into ONE ffmpeg
process (no image files, no second render) that writes, in a single pass,

    <basename>.mp4   H.264, yuv420p, +faststart (the `moov` box before `mdat`), quality-based CRF
    <basename>.webm  VP9, yuv420p, constant quality (CRF, b:v 0)
    and, for the GIF, a lossless QuickTime RLE copy at GIF size plus its palette (palettegen),

then a second, cheap ffmpeg pass turns that copy + palette into a looping GIF
(paletteuse; one palette for the whole movie). The poster PNG is the last frame; the HTML
snippet (`render.core.snippet`) is a <figure> with the <video> (MP4 first, then WebM) and a
<figcaption>.
The last frame is repeated for `hold_s` seconds in every movie so a looping player pauses on it.

Every file is written under a hidden temporary name in `out_dir` and renamed into place only
after ALL requested outputs succeeded, so a failed or interrupted encode leaves nothing at a
final path. The work folder `.NAME.encoding-PID-*` is removed at the end; one left by a killed
render (its lock no longer held) is removed by the next encode into the same folder, and the
ffmpeg children die with the render (Linux: parent-death signal). A full disk is one line.
Memory is flat in movie length (one frame in flight; ffmpeg buffers a few).

ffmpeg: the first `ffmpeg` on PATH that has the needed encoders, else imageio-ffmpeg's bundled
binary (`imageio_ffmpeg.get_ffmpeg_exe()`). The command line is built with ffmpeg-python.

Every movie of this project (orbit and generic panels, induction attention patterns,
ov-coherent QK planes) goes through `write_movie`: any iterator of [H, W, 3] (or [H, W, 4], alpha
dropped) uint8 frames, each repeated as the movie's held events ask, with a progress bar. An odd
H or W loses its last row or column here (yuv420p needs even sizes), and nowhere else.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from headmovies import disk
from headmovies.errors import DiskFullError, EncodeError, UserError
from headmovies.render.core.ffmpeg_exe import ffmpeg_version, find_ffmpeg
from headmovies.render.core.movie_options import FORMATS, check_gif_fps, parse_formats
from headmovies.render.core.outputs import prepare_out_dir, remove_stale_work, work_folder
from headmovies.render.core.snippet import html_snippet, mp4_codec

_ENCODERS = {"mp4": "libx264", "webm": "libvpx-vp9"}
# the GIF's lossless copy between its passes: QuickTime RLE, a third of FFV1's CPU time (docs/
# benchmarks.md); every frame a key frame only for an ffmpeg before 4.3 (or of no known release),
# which decodes no frame from an unchanged one: a held frame is otherwise a few bytes, not a frame
GIF_COPY = "gif.mov"


@dataclass(frozen=True)
class Quality:
    """Encoder settings. CRF: lower is better and bigger (x264 0-51, VP9 0-63)."""

    mp4_crf: int = 20
    mp4_preset: str = "medium"
    webm_crf: int = 33
    # VP9: "realtime" at cpu-used 6 took 1/8 of "good" at 4's CPU time on the default movie, for
    # SSIM 0.998 (vs 0.9985) and a 20 % bigger file (docs/benchmarks.md, "Rendering")
    webm_deadline: str = "realtime"
    webm_cpu_used: int = 6  # speed/quality trade-off (0 slowest .. 8 fastest)
    gif_width: int | None = 540  # GIFs are big: scale down (None keeps the frame width)
    gif_dither: str = "sierra2_4a"


@dataclass
class EncodeResult:
    paths: dict[str, Path]  # format -> final path
    frames: int  # frames in each movie (input frames + held frames)
    size: tuple[int, int]  # (width, height) in pixels
    fps: float
    ffmpeg: str = field(repr=False, default="")


def _tail(path: Path, default: str) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1] if lines else default


def _run_ffmpeg(args: list[str], log: Path, what: str) -> None:
    with open(log, "ab") as err:
        rc = subprocess.run(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_die_with_parent()
        ).returncode
    if rc != 0:
        raise _ffmpeg_error(f"ffmpeg failed while {what}", rc, log)


def _ffmpeg_error(what: str, rc: int | None, log: Path) -> UserError:
    """One line for a failed ffmpeg: a full disk (its own writes, and its log, fail then), a
    signal that killed it, or the last line it logged."""
    if disk.free_bytes(log.parent) < disk.MARGIN or "No space left" in _tail(log, ""):
        return DiskFullError(disk.full_message(log.parent.parent, what, "nothing was written"))
    if rc is not None and rc < 0:
        return EncodeError(f"{what}: ffmpeg was killed by signal {-rc}")
    return EncodeError(f"{what}: {_tail(log, f'exit code {rc}')}")


def _die_with_parent() -> Callable[[], None] | None:
    """preexec_fn that makes the child (ffmpeg) receive SIGKILL when this process dies, so a killed
    render leaves no encoder running (Linux: prctl PR_SET_PDEATHSIG); None elsewhere."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def setup() -> None:  # runs in the child between fork and exec
        prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return setup


@functools.cache
def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def encode(
    frames: Iterable[np.ndarray],
    out_dir: str | os.PathLike,
    basename: str,
    *,
    fps: float = 24.0,
    hold_s: float = 2.0,
    formats: Iterable[str] = FORMATS,
    quality: Quality = Quality(),
    on_frame: Callable[[], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    caption: str = "",
) -> EncodeResult:
    """Encode `frames` into `out_dir/basename.{mp4,webm,gif,png,html}` (those in `formats`).

    frames:   iterable of uint8 arrays [H, W, 3] (RGB) or [H, W, 4] (RGBA, alpha ignored), all
              the same shape; an odd H or W loses its last row or column (yuv420p halves
              chroma). Consumed once, lazily.
    fps:      frames per second of the movies (GIF delays are rounded to 1/100 s by the format;
              UserError over GIF_MAX_FPS with gif in `formats`).
    hold_s:   the last frame is repeated round(hold_s * fps) times at the end of each movie.
    formats:  any of mp4, webm, gif, png (poster: the last frame), html (needs mp4 or webm).
    on_frame: called after each frame (including held ones) is handed to ffmpeg, e.g. a
              progress bar's update; on_stage(text) is called before slow finishing steps.
    caption:  the HTML snippet's <figcaption>, the movie's text alternative (plain text).
    Returns an EncodeResult (final paths, frame count, size). Raises EncodeError (a UserError)
    for an unwritable folder or an ffmpeg failure, UserError for an unknown format, ValueError
    for frames of the wrong dtype or shape (a caller's bug). Nothing is left at a
    final path unless every requested output was written.
    """
    formats = parse_formats(formats)
    if "html" in formats and not {"mp4", "webm"} & set(formats):
        raise UserError("the html snippet plays the mp4/webm movie: add mp4 or webm to the formats")
    if fps <= 0 or hold_s < 0:
        raise UserError(f"fps must be > 0 and hold >= 0 (got fps={fps}, hold={hold_s})")
    check_gif_fps(formats, fps)
    out_dir = Path(out_dir)
    prepare_out_dir(out_dir)
    for f in formats:  # found now, not after minutes of encoding
        if (out_dir / f"{basename}.{f}").is_dir():
            raise UserError(f"{out_dir / f'{basename}.{f}'} is a folder; remove it or choose another --out")
    movies = [f for f in ("mp4", "webm", "gif") if f in formats]
    exe = find_ffmpeg([_ENCODERS[f] for f in movies if f in _ENCODERS]) if movies else ""

    remove_stale_work(out_dir)
    try:
        work, held = work_folder(out_dir, basename)
    except OSError as exc:
        if disk.is_full(exc):
            raise DiskFullError(disk.full_message(out_dir, "", "nothing was written")) from None
        raise EncodeError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    tmp = {f: work / f"{basename}.{f}" for f in formats}
    log = work / "ffmpeg.log"
    proc = None
    try:
        it = iter(frames)
        try:
            first = next(it)
        except StopIteration:
            raise ValueError("encode() got no frames") from None
        first = _check(np.asarray(first), None)
        h, w, c = first.shape
        n_hold = int(round(hold_s * fps))
        if movies:
            proc = _start(exe, (w, h), c, fps, movies, tmp, work, quality, log)
        count = 0
        last = first

        def feed(frame: np.ndarray) -> None:
            nonlocal count
            if proc is not None and proc.stdin is not None:  # stdin is a pipe (_start)
                try:
                    proc.stdin.write(np.ascontiguousarray(frame).data)
                except (BrokenPipeError, OSError):
                    raise _ffmpeg_error("ffmpeg stopped while encoding", proc.wait(), log) from None
            count += 1
            if on_frame:
                on_frame()

        feed(first)
        for frame in it:
            last = _check(np.asarray(frame), first.shape)
            feed(last)
        last = np.array(last)  # own copy: the caller may reuse its buffer
        for _ in range(n_hold):
            feed(last)

        if proc is not None:
            if on_stage:
                on_stage("finishing " + "/".join(f for f in movies if f != "gif"))
            if proc.stdin is not None:
                proc.stdin.close()
            rc = proc.wait()
            proc = None
            if rc != 0:
                raise _ffmpeg_error("ffmpeg failed", rc, log)
        if "gif" in formats:
            if on_stage:
                on_stage("gif palette pass")
            _run_ffmpeg(_gif_args(exe, work, tmp["gif"], quality), log, "writing the GIF")
        if "png" in formats:
            _write_png(last, tmp["png"])
        if "html" in formats:
            tmp["html"].write_text(
                html_snippet(
                    basename,
                    (w, h),
                    movies,
                    "png" in formats,
                    caption,
                    mp4_codec(tmp["mp4"]) if "mp4" in movies else None,
                )
            )

        final = {f: out_dir / f"{basename}.{f}" for f in formats}
        for f in formats:  # all outputs exist: publish them
            os.replace(tmp[f], final[f])
        return EncodeResult(final, count, (w, h), fps, exe)
    except OSError as exc:
        if disk.is_full(exc):
            raise DiskFullError(disk.full_message(out_dir, "while encoding", "nothing was written")) from None
        raise EncodeError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    finally:
        if proc is not None:  # failed or interrupted mid-stream
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
        os.close(held)


def write_movie(
    frames: Iterable[np.ndarray],
    out_dir: str | os.PathLike,
    basename: str,
    *,
    repeats: np.ndarray | None = None,
    fps: float = 24.0,
    hold_s: float = 2.0,
    formats: Iterable[str] = FORMATS,
    quality: Quality = Quality(),
    caption: str = "",
    progress: bool = True,
    desc: str = "movie",
) -> EncodeResult:
    """The one way a movie is written: `frames` (one per snapshot, [H, W, 3|4] uint8), frame t
    shown 1 + repeats[t] times (the timeline's held events, `timeline.hold_frames`; None: once
    each), the last frame held `hold_s` seconds, encoded by `encode` into
    out_dir/basename.{mp4,webm,gif,png,html} (those in `formats`), with a tqdm progress bar
    named `desc` on stderr unless `progress` is false. Errors as `encode`'s."""
    total = None
    if repeats is not None:
        repeats = np.asarray(repeats, np.int64)
        total = len(repeats) + int(repeats.sum()) + int(round(hold_s * fps))

    def held() -> Iterator[np.ndarray]:
        for t, frame in enumerate(frames):
            for _ in range(1 + (int(repeats[t]) if repeats is not None else 0)):
                yield frame

    from tqdm import tqdm

    # disable=None: no bar when stderr is not a terminal (a log file, a pipe)
    with tqdm(total=total, desc=desc, unit="frame", dynamic_ncols=True, disable=None if progress else True) as bar:
        return encode(
            held(),
            out_dir,
            basename,
            fps=fps,
            hold_s=hold_s,
            formats=formats,
            quality=quality,
            on_frame=bar.update,
            on_stage=bar.set_postfix_str,
            caption=caption,
        )


def _check(frame: np.ndarray, shape: tuple[int, ...] | None) -> np.ndarray:
    """The frame cut to even sizes (the one place that makes them even); ValueError for a wrong
    dtype or shape."""
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] not in (3, 4):
        raise ValueError(f"frames must be uint8 [H, W, 3|4], got {frame.dtype} {frame.shape}")
    frame = frame[: frame.shape[0] // 2 * 2, : frame.shape[1] // 2 * 2]
    if shape is not None and frame.shape != shape:
        raise ValueError(f"frame of shape {frame.shape} after frames of shape {shape}: all frames must match")
    return frame


def _start(
    exe: str,
    size: tuple[int, int],
    channels: int,
    fps: float,
    movies: Sequence[str],
    tmp: dict[str, Path],
    work: Path,
    q: Quality,
    log: Path,
) -> subprocess.Popen:
    """One ffmpeg reading raw frames on stdin and writing every movie at once."""
    import ffmpeg  # ffmpeg-python: builds the command line (the filter graph and its -map's)

    w, h = size
    src = ffmpeg.input(
        "pipe:", format="rawvideo", pix_fmt="rgb24" if channels == 3 else "rgba", s=f"{w}x{h}", framerate=fps
    ).video
    videos = [f for f in movies if f != "gif"]
    top = src.split() if videos and "gif" in movies else None  # [0]: the videos, [1]: the GIF
    video_src = top[0] if top is not None else src
    streams = {"gif": top[1] if top is not None else src}
    if len(videos) > 1:  # MP4 and WebM share one conversion to yuv420p (the one each would make)
        yuv = video_src.filter("format", "yuv420p").split()
        streams.update({f: yuv[i] for i, f in enumerate(videos)})
    elif videos:
        streams[videos[0]] = video_src
    outs = []
    for f in movies:
        stream = streams[f]
        if f == "mp4":
            outs.append(
                stream.output(
                    str(tmp["mp4"]),
                    f="mp4",
                    vcodec="libx264",
                    preset=q.mp4_preset,
                    crf=q.mp4_crf,
                    pix_fmt="yuv420p",
                    movflags="+faststart",
                )
            )
        elif f == "webm":
            outs.append(
                stream.output(
                    str(tmp["webm"]),
                    f="webm",
                    vcodec="libvpx-vp9",
                    crf=q.webm_crf,
                    pix_fmt="yuv420p",
                    deadline=q.webm_deadline,
                    **{"b:v": 0, "cpu-used": q.webm_cpu_used, "row-mt": 1},
                )
            )
        else:  # gif: a small lossless copy and the palette of the whole movie, both in this pass
            small = (
                stream.filter("scale", q.gif_width, -2, flags="lanczos") if q.gif_width and q.gif_width < w else stream
            )
            # to planar RGB, alpha dropped (as by every movie): the scaler then writes three planes,
            # not four packed channels, in half the CPU time, the same pixels (docs/benchmarks.md)
            parts = small.filter("format", "gbrp").split()
            copy, stats = parts[0], parts[1]
            keys = {"g": 1} if (ffmpeg_version(exe) or (0, 0)) < (4, 3) else {}
            outs.append(copy.output(str(work / GIF_COPY), f="mov", vcodec="qtrle", **keys))
            outs.append(
                stats.filter("palettegen", stats_mode="full").output(
                    str(work / "palette.png"), f="image2", update=1, **{"frames:v": 1}
                )
            )
    args = (
        ffmpeg.merge_outputs(*outs)
        .global_args("-hide_banner", "-loglevel", "error", "-nostdin")
        .overwrite_output()
        .compile(cmd=exe)
    )
    with open(log, "wb") as err:
        return subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_die_with_parent()
        )


def _gif_args(exe: str, work: Path, out: Path, q: Quality) -> list[str]:
    import ffmpeg

    movie = ffmpeg.input(str(work / GIF_COPY)).video
    palette = ffmpeg.input(str(work / "palette.png")).video
    return (
        ffmpeg.filter([movie, palette], "paletteuse", dither=q.gif_dither, diff_mode="rectangle")
        .output(str(out), f="gif", loop=0)
        .global_args("-hide_banner", "-loglevel", "error", "-nostdin")
        .overwrite_output()
        .compile(cmd=exe)
    )


def _write_png(frame: np.ndarray, path: Path) -> None:
    from PIL import Image  # matplotlib's own dependency

    Image.fromarray(np.ascontiguousarray(frame[..., :3])).save(path, format="PNG", optimize=True)

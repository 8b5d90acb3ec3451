"""The options every movie command shares (--formats, --fps, --hold) and their checks, made
before any run is read (`render.core.encode` encodes; docs/movie.md, "Encoding")."""

from __future__ import annotations

import math
from collections.abc import Iterable

from headmovies.errors import UserError
from headmovies.render.core.outputs import check_out_dir

FORMATS = ("mp4", "webm", "gif", "png", "html")
# A GIF stores each frame's delay in 1/100 s, and browsers play delays under 2/100 s (faster
# than 50 fps) at about 10/100 s: a faster GIF would play several times slower than asked.
GIF_MAX_FPS = 50.0


def check_gif_fps(formats: Iterable[str], fps: float, name: str = "fps") -> None:
    """UserError (one line) when `formats` holds gif and `fps` exceeds GIF_MAX_FPS."""
    if "gif" in formats and fps > GIF_MAX_FPS:
        raise UserError(
            f"{name} {fps:g} is too fast for a GIF: its frame delays count in 1/100 s and browsers play "
            f"delays under 2/100 s much slower; use {name} {GIF_MAX_FPS:g} or less, or leave gif out of --formats"
        )


def parse_formats(text: str | Iterable[str]) -> tuple[str, ...]:
    """'mp4,webm' -> ('mp4', 'webm'). Raises UserError naming an unknown format."""
    items = [s.strip().lower() for s in (text.split(",") if isinstance(text, str) else text)]
    items = [s for s in items if s]
    unknown = [s for s in items if s not in FORMATS]
    if unknown or not items:
        raise UserError(f"unknown format {', '.join(unknown) or '(none)'}: choose from {','.join(FORMATS)}")
    return tuple(dict.fromkeys(items))


def add_movie_arguments(parser, fps: float | None = 24.0, hold_s: float = 2.0) -> None:
    """The options every movie command shares: --formats, --fps, --hold (fps None: the run's
    family chooses, 24 or 12 for recorded runs)."""
    parser.add_argument(
        "--formats",
        default=",".join(FORMATS),
        help=f"movie formats, comma-separated subset of {','.join(FORMATS)} (default: all; html, a snippet "
        "that plays the movie, needs mp4 or webm)",
    )
    parser.add_argument(
        "--fps",
        type=float,
        default=fps,
        help=f"frames per second (default {fps:g})" if fps else "frames per second (default 24; 12 for recorded runs)",
    )
    parser.add_argument(
        "--hold",
        type=float,
        default=hold_s,
        metavar="S",
        help=f"seconds the last frame is held before the loop restarts (default {hold_s:g})",
    )


def movie_arguments(args) -> tuple[tuple[str, ...], float, float]:
    """(formats, fps, hold) from parsed --formats, --fps, --hold; UserError (one line) unless the
    formats are known (html with mp4 or webm), 0 < fps <= 120 (<= GIF_MAX_FPS with gif) and
    0 <= hold <= 60 (finite numbers), and --out (when the command has one) can be a folder: all checked before any
    run is read or anything written."""
    formats = parse_formats(args.formats)
    if "html" in formats and not {"mp4", "webm"} & set(formats):
        raise UserError("the html snippet plays the mp4/webm movie: add mp4 or webm to the formats")
    if getattr(args, "out", None) is not None:
        check_out_dir(args.out)
    if not math.isfinite(args.fps) or not 0 < args.fps <= 120:
        raise UserError(f"--fps must be a number in (0, 120], got {args.fps}")
    check_gif_fps(formats, args.fps, "--fps")
    if not math.isfinite(args.hold) or not 0 <= args.hold <= 60:
        raise UserError(f"--hold must be a number of seconds in [0, 60], got {args.hold}")
    return formats, args.fps, args.hold

"""Which ffmpeg the encoder runs (`find_ffmpeg`), and its release (`ffmpeg_version`)."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Iterable

from headmovies.errors import EncodeError


@functools.cache
def ffmpeg_version(exe: str) -> tuple[int, int] | None:
    """(major, minor) of the ffmpeg at `exe`, None where its banner names no release (a git build)."""
    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.match(r"ffmpeg version n?(\d+)\.(\d+)", out)
    return (int(found[1]), int(found[2])) if found else None


@functools.cache
def _encoders_of(exe: str) -> frozenset[str]:
    try:
        out = subprocess.run([exe, "-hide_banner", "-encoders"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(line.split()[1] for line in out.splitlines() if len(line.split()) > 1 and line.startswith(" V"))


def find_ffmpeg(encoders: Iterable[str] = ("libx264", "libvpx-vp9")) -> str:
    """Path of an ffmpeg that has `encoders`: the one on PATH if it does, else imageio-ffmpeg's."""
    need = set(encoders)
    system = shutil.which("ffmpeg")
    if system and need <= _encoders_of(system):
        return system
    try:
        import imageio_ffmpeg

        bundled = imageio_ffmpeg.get_ffmpeg_exe()
    except Exception as exc:  # not installed, or no binary for this platform
        if system:
            return system
        raise EncodeError(f"no ffmpeg found ({exc}); install ffmpeg or `pip install imageio-ffmpeg`") from None
    missing = need - _encoders_of(bundled)
    if missing:
        raise EncodeError(f"ffmpeg at {bundled} lacks encoders {sorted(missing)}")
    return bundled

"""The encoder's one-pass graph writes the same movies as plain ffmpeg commands, one a format:
the MP4 and GIF byte for byte, the WebM (whose muxer writes different bytes each run) frame for
frame. The plain commands are the encoder's settings without its shortcuts: each video converts
the RGBA frames to yuv420p on its own, and the GIF is scaled as packed RGBA and kept losslessly
in FFV1 between its two passes. Each runs a filter graph (`-filter_complex`) as the encoder
does: ffmpeg 4.2 converts to yuv420p otherwise without one."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np

from headmovies.render.core.encode import Quality, encode, ffmpeg_version, find_ffmpeg

FPS = 10
QUIET = ["-hide_banner", "-loglevel", "error", "-nostdin", "-y"]


def frames(n=10, h=96, w=128):
    """Opaque RGBA frames with gradients, sharp edges and noise (the scaler and the palette see
    every kind of pixel), the 4th frame shown twice as a held event would be."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:h, 0:w]
    out = []
    for i in range(n):
        f = np.empty((h, w, 4), np.uint8)
        f[..., 0] = (x * 2 + i * 9) % 256
        f[..., 1] = (y * 2 + i * 5) % 256
        f[..., 2] = 255 - (x + y) % 256
        f[..., 3] = 255
        f[10 + i * 4 : 40 + i * 4, 20:60, :3] = rng.integers(0, 256, 3)
        f[60:80, 70:110, :3] = rng.integers(0, 256, (20, 40, 3))
        out.append(f)
    return out[:4] + [out[3]] + out[4:]


def plain(args: list[str], stdin: bytes | None = None) -> bytes:
    return subprocess.run(args, input=stdin, capture_output=True, check=True).stdout


def reference(exe: str, raw: bytes, w: int, h: int, q: Quality, out: Path) -> dict[str, Path]:
    """The movies from plain ffmpeg commands, one a format (the GIF in two passes)."""
    src = ["-f", "rawvideo", "-pix_fmt", "rgba", "-s", f"{w}x{h}", "-framerate", str(FPS), "-i", "pipe:"]
    graph = ["-filter_complex", "[0:v]null[v]", "-map", "[v]"]
    mp4, webm, gif = out / "ref.mp4", out / "ref.webm", out / "ref.gif"
    x264 = ["-vcodec", "libx264", "-preset", q.mp4_preset, "-crf", str(q.mp4_crf), "-pix_fmt", "yuv420p"]
    plain([exe, *src, *graph, *x264, "-movflags", "+faststart", "-f", "mp4", str(mp4), *QUIET], raw)
    vp9 = ["-vcodec", "libvpx-vp9", "-crf", str(q.webm_crf), "-b:v", "0", "-pix_fmt", "yuv420p"]
    vp9 += ["-deadline", q.webm_deadline, "-cpu-used", str(q.webm_cpu_used), "-row-mt", "1"]
    plain([exe, *src, *graph, *vp9, "-f", "webm", str(webm), *QUIET], raw)
    gif_graph = f"[0:v]scale={q.gif_width}:-2:flags=lanczos,split=2[copy][stats];[stats]palettegen=stats_mode=full[pal]"
    copy, palette = out / "copy.mkv", out / "palette.png"
    plain(
        [exe, *src, "-filter_complex", gif_graph, "-map", "[copy]", "-vcodec", "ffv1", str(copy), *QUIET[:-1]]
        + ["-map", "[pal]", "-frames:v", "1", "-update", "1", str(palette), "-y"],
        raw,
    )
    use = f"[0:v][1:v]paletteuse=dither={q.gif_dither}:diff_mode=rectangle"
    plain(
        [exe, "-i", str(copy), "-i", str(palette), "-filter_complex", use, "-f", "gif", "-loop", "0", str(gif)] + QUIET
    )
    return {"mp4": mp4, "webm": webm, "gif": gif}


def decoded(exe: str, path: Path) -> list[str]:
    """The MD5 of each decoded frame (ffmpeg's framemd5, its comment lines dropped)."""
    text = plain([exe, "-i", str(path), "-f", "framemd5", "-", *QUIET]).decode()
    return [line.split(",")[-1].strip() for line in text.splitlines() if not line.startswith("#")]


def test_one_pass_movies_equal_plain_ffmpeg_ones(tmp_path):
    movie = frames()
    h, w = movie[0].shape[:2]
    q = replace(Quality(), gif_width=100)  # scaled down: the GIF's copy goes through the scaler
    hold = 3  # frames of the final hold
    res = encode(
        iter(movie), tmp_path / "fast", "m", fps=FPS, hold_s=hold / FPS, formats=["mp4", "webm", "gif"], quality=q
    )
    exe = res.ffmpeg or find_ffmpeg()
    raw = b"".join(f.tobytes() for f in movie + [movie[-1]] * hold)
    ref = reference(exe, raw, w, h, q, tmp_path)
    assert res.frames == len(movie) + hold == 14
    assert res.paths["mp4"].read_bytes() == ref["mp4"].read_bytes()
    assert res.paths["gif"].read_bytes() == ref["gif"].read_bytes()
    fast, slow = decoded(exe, res.paths["webm"]), decoded(exe, ref["webm"])
    assert len(fast) == 14 and fast == slow


def test_the_gifs_copy_keeps_held_frames_without_a_key_frame_each(tmp_path):
    """The GIF's lossless copy between its passes holds a held frame as a change from the frame
    before (a few bytes), not as a key frame of its own, where the ffmpeg decodes such frames
    (4.3 and later): a long hold took the disk of a whole frame per held frame (187 MB for the
    default movie). Every held frame still reaches the GIF."""
    movie = frames(n=6)
    h, w = movie[0].shape[:2]
    q = replace(Quality(), gif_width=None)
    hold = 150
    copy_bytes = []

    def stage(text: str) -> None:
        if text == "gif palette pass":  # the first pass has ended: the copy is whole
            copy_bytes.extend(p.stat().st_size for p in (tmp_path / "out").glob(".m.encoding-*/gif.mov"))

    res = encode(
        iter(movie), tmp_path / "out", "m", fps=FPS, hold_s=hold / FPS, formats=["gif"], quality=q, on_stage=stage
    )
    exe = res.ffmpeg or find_ffmpeg()
    assert res.frames == len(movie) + hold == 157
    gif = decoded(exe, res.paths["gif"])
    assert len(gif) == 157 and len(set(gif[len(movie) :])) == 1  # (4.2 redraws one pixel of the first)
    assert len(copy_bytes) == 1
    if (ffmpeg_version(exe) or (0, 0)) >= (4, 3):  # 4.2 decodes no frame from an unchanged one
        assert copy_bytes[0] < 20 * h * w * 3  # 157 key frames: about 157 frames of raw RGB

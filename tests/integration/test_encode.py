"""The encoder and `headmovies movie` of orbit runs: codecs, pixel format, faststart, frame counts,
looping GIF, poster, HTML, atomic outputs, and one-line errors on bad input."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import headmovies
from headmovies.cli import main as render_main
from headmovies.errors import UserError
from headmovies.render.core.encode import encode, find_ffmpeg

from equivariant import equivariant_run, equivariant_weights, write_run

ROOT = Path(headmovies.__file__).resolve().parents[1]  # the repository


def probe(path: Path) -> tuple[str, int]:
    """(ffmpeg's description of the first video stream, number of frames) without ffprobe."""
    exe = find_ffmpeg(())
    out = subprocess.run(
        [exe, "-hide_banner", "-i", str(path), "-map", "0:v:0", "-c", "copy", "-f", "null", "-"],
        capture_output=True,
        text=True,
    ).stderr
    stream = next(line for line in out.splitlines() if "Video:" in line)
    frames = int(re.findall(r"frame=\s*(\d+)", out)[-1])
    return stream, frames


def top_level_boxes(path: Path) -> list[str]:
    """Types of the top-level MP4 boxes in file order."""
    data, pos, kinds = path.read_bytes(), 0, []
    while pos + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if size == 1:
            size = struct.unpack(">Q", data[pos + 8 : pos + 16])[0]
        kinds.append(kind.decode("latin-1"))
        if size < 8:
            break
        pos += size
    return kinds


def moving_square(n=12, h=64, w=96):
    for i in range(n):
        f = np.full((h, w, 3), 255, np.uint8)
        f[20:40, 5 * i : 5 * i + 16] = (31, 119, 180)
        yield f


def test_encode_writes_every_format_in_one_pass(tmp_path):
    res = encode(moving_square(), tmp_path, "sq", fps=10, hold_s=0.5)
    assert res.frames == 12 + 5 and res.size == (96, 64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sq.gif", "sq.html", "sq.mp4", "sq.png", "sq.webm"]
    stream, frames = probe(tmp_path / "sq.mp4")
    assert "h264" in stream and "yuv420p" in stream and "96x64" in stream and frames == 17
    boxes = top_level_boxes(tmp_path / "sq.mp4")
    assert "moov" in boxes and boxes.index("moov") < boxes.index("mdat")  # +faststart
    stream, frames = probe(tmp_path / "sq.webm")
    assert "vp9" in stream and "yuv420p" in stream and frames == 17
    stream, frames = probe(tmp_path / "sq.gif")
    assert "gif" in stream and frames == 17
    gif = (tmp_path / "sq.gif").read_bytes()
    i = gif.index(b"NETSCAPE2.0")  # loop extension: count 0 = forever
    assert gif[i + 11 : i + 14] == b"\x03\x01\x00" and gif[i + 14 : i + 16] == b"\x00\x00"
    from PIL import Image

    poster = np.asarray(Image.open(tmp_path / "sq.png").convert("RGB"))
    assert np.array_equal(poster, list(moving_square())[-1])  # the last frame, lossless
    html = (tmp_path / "sq.html").read_text()
    assert re.search(
        r'<video controls muted loop playsinline preload="metadata" width="96" height="64" '
        r'poster="sq.png"[^>]*>',
        html,
    )
    assert html.index('src="sq.mp4"') < html.index('src="sq.webm"') and "</video>" in html  # Safari: MP4 first
    assert html.startswith("<figure") and "<figcaption" not in html  # no caption given


def test_encode_subset_and_rgba_frames(tmp_path):
    frames = (np.dstack([f, np.full(f.shape[:2], 255, np.uint8)]) for f in moving_square(4))
    res = encode(frames, tmp_path, "a", fps=5, hold_s=0, formats="mp4")
    assert list(res.paths) == ["mp4"] and [p.name for p in tmp_path.iterdir()] == ["a.mp4"]
    assert probe(tmp_path / "a.mp4")[1] == 4


def test_odd_frames_lose_their_last_row_and_column_in_encode_alone(tmp_path):
    frame = np.random.default_rng(0).integers(0, 256, (63, 97, 4), np.uint8)
    result = encode([frame], tmp_path, "x", formats="png")
    assert result.size == (96, 62)
    from PIL import Image

    assert np.array_equal(np.asarray(Image.open(tmp_path / "x.png")), frame[:62, :96, :3])


def test_write_movie_repeats_held_snapshots_and_holds_the_last_frame(tmp_path):
    from headmovies.render.core.encode import write_movie

    frames = [np.full((4, 6, 3), v, np.uint8) for v in (10, 20, 30)]
    result = write_movie(iter(frames), tmp_path, "m", repeats=np.array([0, 2, 0]), fps=4, hold_s=0.5, formats="png")
    assert result.frames == 3 + 2 + 2 and result.size == (6, 4)
    from PIL import Image

    assert np.asarray(Image.open(tmp_path / "m.png"))[0, 0].tolist() == [30, 30, 30]


def test_encode_rejects_bad_frames_and_formats(tmp_path):
    with pytest.raises(ValueError, match="all frames must match"):
        encode([np.zeros((64, 96, 3), np.uint8), np.zeros((64, 98, 3), np.uint8)], tmp_path, "x")
    with pytest.raises(ValueError, match="uint8"):
        encode([np.zeros((64, 96, 3))], tmp_path, "x")
    with pytest.raises(UserError, match="unknown format avi"):
        encode(moving_square(2), tmp_path, "x", formats="mp4,avi")
    assert list(tmp_path.iterdir()) == []  # no temp folder left either


def test_failed_encode_leaves_nothing_and_keeps_old_outputs(tmp_path):
    (tmp_path / "m.mp4").write_bytes(b"old movie")

    def broken():
        yield from moving_square(3)
        raise RuntimeError("renderer crashed")

    with pytest.raises(RuntimeError, match="crashed"):
        encode(broken(), tmp_path, "m", fps=5)
    assert [p.name for p in tmp_path.iterdir()] == ["m.mp4"] and (tmp_path / "m.mp4").read_bytes() == b"old movie"


def test_unwritable_folder_is_an_encode_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot create output folder"):
        encode(moving_square(2), blocker / "out", "m")
    (tmp_path / "m.gif").mkdir()  # named as the output file, before any encoding
    with pytest.raises(UserError, match=f"^{tmp_path}/m.gif is a folder; remove it or choose another --out$"):
        encode(moving_square(2), tmp_path, "m", formats="png,gif")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "m.gif"]


# --- the command ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    return equivariant_run(tmp_path_factory.mktemp("run") / "equi.h5", np.arange(9) * 50, extra_heads=2)


@pytest.mark.slow
def test_movie_command_tiny_movie(tiny_run, tmp_path, capsys):
    out = tmp_path / "movie"
    argv = [
        "movie",
        str(tiny_run),
        "--out",
        str(out),
        "--fps",
        "8",
        "--hold",
        "1",
        "--panel-px",
        "220",
        "--no-progress",
    ]
    assert render_main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == [f"orbits.{e}" for e in ("gif", "html", "mp4", "png", "webm")]
    stream, frames = probe(out / "orbits.mp4")
    assert "h264" in stream and "yuv420p" in stream and frames == 9 + 8 + 8  # snapshots + 1 s at the orbits + end
    m = re.search(r"(\d+)x(\d+)", stream.split("yuv420p")[1])
    w, h = int(m.group(1)), int(m.group(2))
    assert w % 2 == 0 and h % 2 == 0
    assert top_level_boxes(out / "orbits.mp4").index("moov") < top_level_boxes(out / "orbits.mp4").index("mdat")
    assert probe(out / "orbits.gif")[1] == 25 and b"NETSCAPE2.0\x03\x01\x00\x00" in (out / "orbits.gif").read_bytes()
    assert "25 frames" in capsys.readouterr().out


@pytest.mark.slow
def test_movie_command_panels_option(tiny_run, tmp_path):
    out = tmp_path / "two"
    assert (
        render_main(
            [
                "movie",
                str(tiny_run),
                "--out",
                str(out),
                "--panels",
                "qk:0,10",
                "ov:10,-10",
                "--formats",
                "mp4,png",
                "--hold",
                "0",
                "--event-hold",
                "0",
                "--panel-px",
                "220",
                "--trail",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == ["orbits.mp4", "orbits.png"]
    assert probe(out / "orbits.mp4")[1] == 9  # one frame per snapshot, no holds


def cli(*argv):
    """Run `python -m headmovies` in a subprocess: (exit code, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-m", "headmovies", *argv], cwd=ROOT, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def only_weights(path, names, n=24, m=2):
    W = dict(zip(("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U"), equivariant_weights(24, 2, (12,), 32, 4)))
    return write_run(path, [0, 10], [{k: W[k] for k in names}] * 2, n=n, m=m)


def bad_inputs(tmp_path, tiny_run):
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes(tiny_run.read_bytes()[: tiny_run.stat().st_size // 2])
    corrupt = tmp_path / "corrupt.h5"
    corrupt.write_bytes(np.random.default_rng(0).bytes(4096))
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    qk_only = only_weights(tmp_path / "qk_only.h5", ("W_E", "W_Q", "W_K"))
    no_group = only_weights(tmp_path / "nogroup.h5", ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U"), n=None)
    run = str(tiny_run)
    return {
        "missing": ([str(tmp_path / "nope.h5")], "does not exist"),
        "truncated": ([str(truncated)], "not a readable HDF5 run file"),
        "corrupt": ([str(corrupt)], "not a readable HDF5 run file"),
        "no OV weights": ([str(qk_only)], "has no weights ['W_V', 'W_O', 'W_U'], so panel ov:10,-10"),
        "no group": ([str(no_group)], "has no group data (n, m)"),
        "unwritable": ([run, "--out", str(blocker / "sub")], "cannot create output folder"),
        "format": ([run, "--formats", "mp4,avi"], "unknown format avi"),
        "panel circuit": ([run, "--panels", "xy:0,10"], "bad panel 'xy:0,10'"),
        "panel frequency": ([run, "--panels", "qk:0,2.5"], "bad panel 'qk:0,2.5'"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "truncated",
        "corrupt",
        "no OV weights",
        "no group",
        "unwritable",
        "format",
        "panel circuit",
        "panel frequency",
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, tmp_path, tiny_run, capsys):
    argv, message = bad_inputs(tmp_path, tiny_run)[case]
    out = tmp_path / "out"
    if "--out" not in argv:
        argv = [argv[0], "--out", str(out), *argv[1:]]
    assert render_main(["movie", *argv, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err, err
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.slow
def test_bad_input_in_a_subprocess_has_no_traceback(tmp_path):
    code, out, err = cli("movie", str(tmp_path / "nope.h5"), "--out", str(tmp_path / "o"))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("movie", "--help")
    assert code == 0 and "--panels" in out and "--formats" in out and "--fps" in out

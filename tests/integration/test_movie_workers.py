"""`headmovies movie --workers N`: the same movie as one process, and Ctrl-C in a terminal
(SIGINT to the whole process group: the command, its drawing workers and ffmpeg) leaves no
output, no work folder and no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import sigint_as_at_a_terminal

from headmovies.cli import main

from equivariant import equivariant_run

ROOT = Path(__file__).resolve().parents[2]


def framemd5(path: Path) -> list[str]:
    from headmovies.render.core.encode import find_ffmpeg

    out = subprocess.run(
        [find_ffmpeg(["libx264"]), "-v", "error", "-i", str(path), "-f", "framemd5", "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split(",")[-1].strip() for line in out.splitlines() if line and not line.startswith("#")]


def test_movie_drawn_by_workers_is_the_same_movie(tmp_path):
    run = equivariant_run(tmp_path / "w.h5", np.arange(0, 500, 25), extra_heads=3)
    common = ["movie", str(run), "--formats", "mp4", "--panel-px", "240", "--no-progress", "--hold", "0"]
    assert main([*common, "--out", str(tmp_path / "one"), "--workers", "1"]) == 0
    assert main([*common, "--out", str(tmp_path / "three"), "--workers", "3"]) == 0
    one, three = framemd5(tmp_path / "one" / "orbits.mp4"), framemd5(tmp_path / "three" / "orbits.mp4")
    assert len(one) >= 20 and one == three


@pytest.mark.slow
def test_ctrl_c_stops_the_drawing_workers_and_leaves_nothing(tmp_path):
    run = equivariant_run(tmp_path / "long.h5", np.arange(0, 20000, 25), extra_heads=3)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "headmovies", "movie", str(run), "--out", str(out), "--workers", "2"]
    proc = subprocess.Popen(
        [*argv, "--formats", "mp4", "--panel-px", "240", "--no-progress"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
        preexec_fn=sigint_as_at_a_terminal,
    )
    try:
        end = time.time() + 120
        while time.time() < end and proc.poll() is None:  # the encoder's work folder: frames flow
            if out.is_dir() and any(p.name.startswith(".orbits.encoding") for p in out.iterdir()):
                break
            time.sleep(0.05)
        time.sleep(1.0)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        os.killpg(proc.pid, signal.SIGINT)
        err = proc.communicate(timeout=60)[1]
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "interrupted"
    assert not out.exists() or list(out.iterdir()) == []
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):  # no worker and no ffmpeg left in the group
        os.killpg(proc.pid, 0)

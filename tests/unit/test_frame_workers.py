"""Frames drawn in worker processes: the same pixels as one process draws, in movie order, with
bounded memory; a failing worker is an error in the parent, and no worker outlives a stopped
movie."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import numpy as np
import pytest

from headmovies.cli import main
from headmovies.render.core.frame_workers import SLOTS, frames_in_workers
from headmovies.render.orbits.movie import OrbitMovie
from headmovies.runfile.reader import Run

from equivariant import equivariant_run

EPOCHS = np.array([0, 25, 50, 75, 100, 200, 300, 400, 500, 600])


def numbered(k: int, step: int, count: int = 11, fail_at: int | None = None):
    """Frames k, k + step, ... of a movie whose frame t is filled with t."""
    for t in range(k, count, step):
        if t == fail_at:
            raise ValueError(f"no frame {t}")
        yield np.full((4, 6, 3), t, np.uint8)


@pytest.mark.parametrize("workers", [1, 2, 3, 11, 20])
def test_frames_come_back_in_movie_order(workers):
    got = [int(f[0, 0, 0]) for f in frames_in_workers(numbered, 11, (4, 6, 3), workers)]
    assert got == list(range(11))  # 11 > SLOTS * workers for 2 and 3: buffers are reused
    assert SLOTS * 3 < 11 and mp.active_children() == []


def test_a_failing_worker_is_an_error_here_and_stops_every_worker():
    frames = frames_in_workers(lambda k, s: numbered(k, s, fail_at=5), 11, (4, 6, 3), 2)
    with pytest.raises(RuntimeError, match=r"frame worker 1 failed:(.|\n)*ValueError: no frame 5"):
        list(frames)
    assert mp.active_children() == []


def test_a_movie_stopped_early_leaves_no_worker():
    frames = frames_in_workers(numbered, 11, (4, 6, 3), 3)
    assert int(next(frames)[0, 0, 0]) == 0 and int(next(frames)[0, 0, 0]) == 1
    frames.close()  # what an encoder error or Ctrl-C does to the generator
    assert mp.active_children() == []


@pytest.fixture(scope="module")
def run_path(tmp_path_factory):
    return equivariant_run(tmp_path_factory.mktemp("run") / "workers.h5", EPOCHS, extra_heads=3)


@pytest.fixture(scope="module")
def movie(run_path):
    with Run(run_path) as run:
        mv = OrbitMovie(run, panel_px=240, fps=8, event_hold_s=1.0)
    yield mv
    mv.close()


def test_orbit_movie_frames_drawn_in_workers_are_the_same_pixels(movie):
    one = [f.copy() for f in movie.frames(1)]
    assert len(one) == len(EPOCHS) and not np.array_equal(one[0], one[-1])
    for workers in (2, 3):
        assert all(np.array_equal(a, b) for a, b in zip(one, movie.frames(workers), strict=True))


def test_workers_out_of_range_is_one_line(tmp_path, capsys, run_path):
    assert main(["movie", str(run_path), "--out", str(tmp_path), "--workers", "0"]) == 2
    assert capsys.readouterr().err.strip().endswith("--workers must be in 1..64, got 0")


def test_orbit_checks_in_workers_are_the_same_as_here(run_path):
    """The same orbits, dead heads and panel lines; the errors up to the rounding that numpy's
    vectorised sums leave to memory alignment."""
    from headmovies.render.orbits.panel_choice import SOURCE_PANELS
    from headmovies.render.orbits.spectrum import panel_lines
    from headmovies.render.orbits.stream import collect, final_snapshot

    with Run(run_path) as run:
        final = final_snapshot(run)
        here = collect(run, SOURCE_PANELS, check=True, final=final, workers=1)
        there = collect(run, SOURCE_PANELS, check=True, final=final, workers=3)
        plain = collect(run, SOURCE_PANELS, check=True, workers=2)  # the final snapshot checked there too
    assert mp.active_children() == []
    h = here.history
    assert [len(o) for o in h.orbits] == [0] * 8 + [2, 2]  # a 12-orbit and a 4-orbit from epoch 500
    for other in (there, plain):
        o = other.history
        assert np.array_equal(here.epochs, other.epochs) and np.array_equal(here.coords, other.coords)
        assert [[(size, heads) for size, heads, _ in t] for t in h.orbits] == [
            [(size, heads) for size, heads, _ in t] for t in o.orbits
        ]
        worst = [e for t in h.orbits for *_, e in t]  # errors of ~1e-7 here (exact orbits): they agree to 1e-12
        assert worst == pytest.approx([e for t in o.orbits for *_, e in t], rel=0, abs=1e-12)
        np.testing.assert_allclose(h.head_error, o.head_error, rtol=1e-9, atol=1e-12)
        assert np.array_equal(h.dead, o.dead) and np.array_equal(h.in_orbit, o.in_orbit)
        lines = [panel_lines(g, SOURCE_PANELS, 24, 2) for g in here.groups]
        assert lines == [panel_lines(g, SOURCE_PANELS, 24, 2) for g in other.groups]


def test_a_worker_with_frames_to_spare_does_not_hang_the_movie():
    got = [int(f[0, 0, 0]) for f in frames_in_workers(lambda k, s: numbered(k, s, count=40), 9, (4, 6, 3), 2)]
    assert got == list(range(9)) and mp.active_children() == []


def test_a_worker_that_dies_is_an_error_not_a_hang():
    def dying(k, step):
        if k == 0:
            os._exit(3)
        yield from numbered(k, step)

    with pytest.raises(RuntimeError, match="frame worker 0 died"):
        list(frames_in_workers(dying, 11, (4, 6, 3), 3))
    assert mp.active_children() == []


def test_forked_map_keeps_order_and_stops_its_workers():
    from headmovies.render.core.frame_workers import forked_map

    assert list(forked_map(lambda x: x * x, range(30), 3, ahead=2)) == [x * x for x in range(30)]
    with pytest.raises(RuntimeError, match=r"worker 1 failed:(.|\n)*ZeroDivisionError"):
        list(forked_map(lambda x: 1 / (x - 4), range(30), 3))
    squares = forked_map(lambda x: x * x, range(30), 2)
    assert next(squares) == 0
    squares.close()  # the pass failed on its own side (a damaged snapshot): workers are killed

    def broken():
        yield 1
        raise OSError("damaged bytes")

    with pytest.raises(OSError, match="damaged bytes"):
        list(forked_map(lambda x: x, broken(), 2))
    assert mp.active_children() == []


def test_a_worker_that_ended_before_the_parent_wrote_to_it_still_reports_its_error():
    """The race that the load of a busy machine exposed: worker 1 fails and exits before the
    parent sends it the number of a slot to reuse. That send meets a closed pipe; the parent must
    go on to read the worker's error, not stop at BrokenPipeError. Here worker 1 draws frame 1
    and fails at frame 3 at once, and the parent, slow to consume, sends it the slot of frame 1
    (at frame 2) after it exited."""

    def slow_consumer():
        frames = frames_in_workers(lambda k, s: numbered(k, s, fail_at=3), 11, (4, 6, 3), 2)
        for _ in frames:
            time.sleep(0.3)  # worker 1 has failed and exited by the time the parent writes to it

    with pytest.raises(RuntimeError, match=r"frame worker 1 failed:(.|\n)*ValueError: no frame 3"):
        slow_consumer()
    assert mp.active_children() == []

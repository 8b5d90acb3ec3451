"""Frames drawn in worker processes, handed back in order (docs/movie.md, "Encoding").

`frames_in_workers(draw_every, count, shape, workers)` forks `workers` processes; worker k
calls `draw_every(k, workers)`, which yields frames k, k + workers, k + 2·workers, ... of the
movie (each worker owns its own figure: the one it inherited at the fork), and copies each
into one of `SLOTS` frame buffers of shared memory that are its own. The parent yields the
frames in movie order straight from those buffers, while the encoder (another process) runs,
so drawing and encoding share every core. A frame yielded is valid until the next one is
asked for (its buffer is then handed back to its worker); `encode` writes each frame to ffmpeg
before asking for the next one. Memory: workers × SLOTS frames, whatever the movie's length.

A frame's pixels do not depend on which frames its figure drew before (every artist is set
from the frame's state, and the blitted background is redrawn whenever what it shows changes),
so frames drawn in workers are the same pixels as frames drawn in one process (tested).

Workers are forked (POSIX), so the movie's prepared state is shared, not pickled; the run
file is closed before frames are drawn. They ignore Ctrl-C (the parent stops them), die with
the parent (Linux: parent-death signal), and an error in one is raised in the parent as a
RuntimeError with the worker's traceback. Where fork is missing, one process draws.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator

import numpy as np

SLOTS = 2  # frame buffers per worker: one being drawn while the other waits for the encoder


def default_workers() -> int:
    """Worker processes for drawing on this machine, and for the orbit checks of a pass
    (`render.orbits.stream.collect`): one per core, at most 4 (1 on one core: work in this
    process). On an idle 2-core machine 2 workers drew and encoded the default movie 1.2-1.5x
    as fast as one process, and 3 no faster than 2 (docs/benchmarks.md)."""
    if mp.parent_process() is not None:  # inside a worker (a sweep's): its siblings share the cores
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 1 if cores < 2 else min(4, cores)


def can_fork() -> bool:
    return "fork" in mp.get_all_start_methods()


def frames_in_workers(
    draw_every: Callable[[int, int], Iterator[np.ndarray]],
    count: int,
    shape: tuple[int, ...],
    workers: int,
) -> Iterator[np.ndarray]:
    """The `count` uint8 frames of `shape` ([H, W, C]) that `draw_every(k, workers)` yields in
    worker k (frames k, k + workers, ...), in movie order. With workers <= 1 or no fork, drawn
    here (`draw_every(0, 1)`). RuntimeError when a worker fails or draws a wrong frame."""
    if workers <= 1 or count <= 1 or not can_fork():
        yield from draw_every(0, 1)
        return
    workers = min(workers, count)
    ctx = mp.get_context("fork")
    size = int(np.prod(shape))
    buffers = [ctx.RawArray(ctypes.c_uint8, SLOTS * size) for _ in range(workers)]
    slots = [np.frombuffer(memoryview(b), np.uint8).reshape(SLOTS, *shape) for b in buffers]
    pipes = [ctx.Pipe() for _ in range(workers)]
    procs = [
        ctx.Process(target=_worker, args=(draw_every, k, workers, slots[k], pipes[k][1], pipes), daemon=True)
        for k in range(workers)
    ]
    with _running(procs, pipes):
        for t in range(count):
            k, n = t % workers, t // workers
            prev = t - 1  # the consumer asks for the next frame: the previous one is written
            if prev >= 0 and prev + SLOTS * workers < count:  # its buffer has another frame to hold
                _send(pipes[prev % workers][0], prev)
            try:
                msg = pipes[k][0].recv()
            except EOFError:
                raise RuntimeError(f"frame worker {k} died (exit code {procs[k].exitcode})") from None
            if msg[0] == "error":
                raise RuntimeError(f"frame worker {k} failed:\n{msg[1]}")
            yield slots[k][n % SLOTS]


def _send(conn, message) -> None:
    """Send to a worker; one that has ended (after sending its error, or killed) is not an error
    here: the next read from it says what happened."""
    with contextlib.suppress(BrokenPipeError):
        conn.send(message)


@contextlib.contextmanager
def _running(procs: list, pipes: list) -> Iterator[None]:
    """Start the forked `procs` and close the parent's copies of their pipe ends; on leaving,
    close the parent's ends (a worker waiting on its pipe reads the end and exits). Left
    normally, each worker ends on its own (10 s at most); left by an error or an early stop (a
    consumer that stops iterating, Ctrl-C) they are killed (SIGKILL, which no lock or handler
    can hold up)."""
    done = False
    try:
        for p in procs:
            p.start()
        for _, child in pipes:
            child.close()
        yield
        done = True
    finally:
        for parent, _ in pipes:
            parent.close()
        for p in procs:
            if p.pid is not None:
                p.join(timeout=10 if done else 0)
            if p.is_alive():
                p.kill()
                p.join()


def _worker_setup(conn, pipes) -> None:
    """In a worker: close the pipe ends inherited at the fork but `conn` (each pipe ends when its
    two owners close it), leave Ctrl-C to the parent, stop on SIGTERM, die with the parent."""
    for parent, child in pipes:
        parent.close()
        if child is not conn:
            child.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the workers on Ctrl-C
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the command's unwinding handler: just stop
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # die with the parent (1 = PR_SET_PDEATHSIG)
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def _worker(draw_every, k: int, workers: int, slots: np.ndarray, conn, pipes) -> None:
    _worker_setup(conn, pipes)
    try:
        for n, frame in enumerate(draw_every(k, workers)):
            if n >= SLOTS:
                conn.recv()  # wait until the frame last drawn into this slot is encoded
            if frame.shape != slots.shape[1:] or frame.dtype != np.uint8:
                raise ValueError(f"frame {frame.dtype} {frame.shape}, expected uint8 {slots.shape[1:]}")
            np.copyto(slots[n % SLOTS], frame)
            conn.send(("frame", n))
    except (BrokenPipeError, EOFError):  # the parent stopped
        pass
    except BaseException:
        with contextlib.suppress(OSError):
            conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def forked_map(fn: Callable, items: Iterable, workers: int, ahead: int = 4) -> Iterator:
    """fn(item) for each of `items`, computed in `workers` forked processes (item i in worker
    i mod workers), yielded in order; at most `ahead` items a worker in flight, so `items` is
    read lazily (memory bounded). Items and results are pickled; `fn` is inherited at the fork.
    RuntimeError when a worker fails or dies; the workers are killed (SIGKILL, which no lock or
    handler can hold up) when the iteration ends early, and end on their own when it is done."""
    ctx = mp.get_context("fork")
    pipes = [ctx.Pipe() for _ in range(workers)]
    procs = [ctx.Process(target=_map_worker, args=(fn, pipes[k][1], pipes), daemon=True) for k in range(workers)]
    with _running(procs, pipes):
        sent = got = 0
        items = iter(items)
        more = True
        while True:
            while more and sent - got < ahead * workers:
                item = next(items, _END)
                if item is _END:
                    more = False
                    break
                _send(pipes[sent % workers][0], item)
                sent += 1
            if got == sent:
                break
            try:
                ok, value = pipes[got % workers][0].recv()
            except EOFError:
                raise RuntimeError(f"worker {got % workers} died (exit code {procs[got % workers].exitcode})") from None
            if not ok:
                raise RuntimeError(f"worker {got % workers} failed:\n{value}")
            got += 1
            yield value


_END = object()


def _map_worker(fn, conn, pipes) -> None:
    _worker_setup(conn, pipes)
    try:
        while True:
            try:
                item = conn.recv()
            except EOFError:  # the parent is done
                return
            try:
                result = (True, fn(item))
            except Exception:
                result = (False, traceback.format_exc())
            conn.send(result)
    except (BrokenPipeError, EOFError):
        pass
    finally:
        conn.close()

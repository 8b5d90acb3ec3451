"""One writer per run file: an exclusive lock on `<run>.lock` beside it (docs/run-file.md, "Faults").

The lock is an `flock` held for the writer's lifetime, so the kernel drops it when the writer
dies, SIGKILL included: a lock file left behind by a killed writer never blocks the next one.
The file holds a line naming the holder (PID, host, command, start time) for the error a second
writer gets. Linux and macOS (`fcntl`); standard library only.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from headmovies.errors import RunLockedError, UserError


def lock_path(run_path: str | os.PathLike) -> Path:
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + ".lock")


def holder(run_path: str | os.PathLike) -> str | None:
    """Who holds the lock of `run_path` ('PID 123 on host, `headmovies train ...` since ...'),
    or None when no live process holds it."""
    path = lock_path(run_path)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd) or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read(fd: int) -> str:
    for _ in range(20):  # the holder writes its line just after taking the lock
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
        if text:
            return text
        time.sleep(0.01)
    return ""


class RunLock:
    """Exclusive lock of one run file; a context manager. `acquire` raises RunLockedError
    (one line naming the holder) at once if another process holds it; `release` removes the
    lock file. `hint` is appended to that error (what to do instead)."""

    def __init__(self, run_path: str | os.PathLike, hint: str = ""):
        self.run_path, self.path, self.hint = Path(run_path), lock_path(run_path), hint
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise UserError(f"cannot create the lock file {self.path}: {exc.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = _read(fd) or "another process"
                os.close(fd)
                hint = f"; {self.hint}" if self.hint else ""
                if who.startswith(f"PID {os.getpid()} on {socket.gethostname()} "):  # a notebook's earlier cell
                    raise RunLockedError(
                        f"{self.run_path} is already being written in this process (PID {os.getpid()}), which "
                        f"holds {self.path.name}: one writer per run file; an earlier writer of it is open{hint}"
                    ) from None
                raise RunLockedError(
                    f"{self.run_path} is being written by {who}, which holds {self.path.name}: "
                    f"one writer per run file{hint}"
                ) from None
            # A holder that released meanwhile unlinked the file we opened: lock the new one instead.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
        prog = "headmovies" if prog in ("headmovies", "__main__.py") else prog
        line = f"PID {os.getpid()} on {socket.gethostname()} (`{' '.join([prog, *sys.argv[1:3]])}`, since {since})"
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (line + "\n").encode(), 0)
        except OSError:
            pass  # a full disk: the lock holds all the same, its note is empty
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still held: the next writer locks a fresh file
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

"""Ctrl-C and SIGTERM delivered where unwinding is safe.

Python runs a signal handler at whatever bytecode the main thread is at. A KeyboardInterrupt
raised there can land in a destructor (h5py's, torch's), where Python prints it as "Exception
ignored" and the process runs on, or inside h5py while it holds its global lock, so that closing
the file hangs. Long loops (training, the live viewer) therefore take signals through
`deferred_signals`: the handler only records the signal, and the loop calls `deliver()` between
steps, which runs the handler that was installed before (the CLI's, which raises
KeyboardInterrupt) there.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager


class deferred_signals:
    """Context manager: inside it, SIGINT and SIGTERM only set `pending` (a threading.Event);
    `deliver()` then calls the handler each had before, at a point the caller chose. A second
    signal before that calls it at once, so a stuck loop still stops. Signals whose handler is
    not a Python function (ignored, or the OS default) are left alone, and so is everything
    outside the main thread, where Python allows no handlers."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.pending = threading.Event()
        self._before: dict[int, Callable] = {}
        self._received: int | None = None

    def __enter__(self) -> deferred_signals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):
                    self._before[sig] = handler
                    signal.signal(sig, self._record)
        return self

    def _record(self, signum, frame) -> None:
        if self.pending.is_set():
            self._before[signum](signum, frame)
        self._received = signum
        self.pending.set()

    def deliver(self) -> None:
        """Run the earlier handler of a recorded signal (usually: raise KeyboardInterrupt)."""
        signum = self._received
        if self.pending.is_set() and signum is not None:  # `_record` sets both
            self.pending.clear()
            self._before.get(signum, signal.default_int_handler)(signum, None)

    def __exit__(self, *exc) -> None:
        for sig, handler in self._before.items():
            signal.signal(sig, handler)


def ignore_between_jobs() -> None:
    """Process-pool initializer: a spawned worker ignores Ctrl-C while it starts and while it
    waits for a job (importing torch, reading its queue: a KeyboardInterrupt there prints a
    traceback per worker); each job takes it back with `interrupts_in_pool_jobs`. The parent
    stops idle workers itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def interrupts_in_pool_jobs():
    """Around a job: in a pool worker started with `ignore_between_jobs`, Ctrl-C raises
    KeyboardInterrupt within the job and is ignored again after it. Elsewhere: nothing."""
    import multiprocessing

    worker = (
        multiprocessing.parent_process() is not None
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    )
    if worker:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if worker:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

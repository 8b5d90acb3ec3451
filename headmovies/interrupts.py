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
from typing import Callable


class deferred_signals:
    """Context manager: inside it, SIGINT and SIGTERM only set `pending` (a threading.Event);
    `deliver()` then calls the handler each had before, at a point the caller chose. A second
    signal before that calls it at once, so a stuck loop still stops. Signals whose handler is
    not a Python function (ignored, or the OS default) are left alone, and so is everything
    outside the main thread, where Python allows no handlers."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.pending = threading.Event()
        self._before: dict[int, Callable] = {}
        self._received: int | None = None

    def __enter__(self) -> "deferred_signals":
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
        if self.pending.is_set():
            self.pending.clear()
            self._before.get(self._received, signal.default_int_handler)(self._received, None)

    def __exit__(self, *exc) -> bool:
        for sig, handler in self._before.items():
            signal.signal(sig, handler)
        return False

"""A sweep's progress in epochs (docs/sweeps.md, "Progress"): the bar's total is the epochs its
runs still have to train, and a thread reads each unfinished run's newest snapshot from its run
file (`runfile.latest_epoch`) every `interval` seconds, so the bar moves while runs train, not
only when one finishes. The postfix counts runs done and failed and names the newest epoch of
the runs in training.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from headmovies import runfile
from headmovies.sweeps.plan import PlannedRun

POLL_S = 2.0  # how often the run files are read


class EpochProgress:
    """Progress of `runs` in epochs, shown on `bar` (a tqdm bar of `total`, or None: counted only).

    Each run counts from its newest snapshot when the sweep starts (0 for a new run) to its
    last epoch (`stop_at` or the config's `epochs`); `finished(name)` counts a run in full (done
    or failed). `poll()` reads the run files once; `start()` polls in a daemon thread until
    `stop()`. `done` [epochs counted], `total` and `newest` {run: epoch} are read by tests."""

    def __init__(self, runs: Sequence[PlannedRun], bar=None, interval: float | None = None):
        self.bar, self.interval = bar, POLL_S if interval is None else interval
        self.paths: dict[str, Path] = {r.name: r.path for r in runs}
        self.target = {r.name: int(r.stop_at if r.stop_at is not None else r.cfg.epochs) for r in runs}
        self.base = {r.name: (runfile.latest_epoch(r.path) or 0) if r.action == "resume" else 0 for r in runs}
        self.newest = dict(self.base)
        self.finished_runs: set[str] = set()
        self.failed = 0
        self.total = sum(max(0, self.target[n] - self.base[n]) for n in self.target)
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def done(self) -> int:
        return sum(max(0, min(self.newest[n], self.target[n]) - self.base[n]) for n in self.target)

    def poll(self) -> None:
        """Read the newest epoch of every unfinished run and show the sums."""
        for name in [n for n in self.paths if n not in self.finished_runs]:
            epoch = runfile.latest_epoch(self.paths[name])
            with self.lock:
                if epoch is not None and name not in self.finished_runs:
                    self.newest[name] = max(self.newest[name], epoch)
        self._show()

    def finished(self, name: str, ok: bool = True) -> None:
        """A run's rows arrived: count it in full."""
        with self.lock:
            self.finished_runs.add(name)
            self.newest[name] = max(self.newest[name], self.target[name])
            self.failed += not ok
        self._show()

    def _show(self) -> None:
        with self.lock:
            done = self.done
            training = {n: e for n, e in self.newest.items() if n not in self.finished_runs and e > self.base[n]}
            ok = len(self.finished_runs) - self.failed
            postfix = f"runs done {ok}, failed {self.failed}"
            if training:
                newest = max(training, key=training.get)  # type: ignore[arg-type]
                postfix += f"; {len(training)} training, newest {newest} at epoch {training[newest]:,}"
            if self.bar is not None:
                self.bar.n = done
                self.bar.set_postfix_str(postfix, refresh=False)
                self.bar.refresh()

    def start(self) -> EpochProgress:
        def loop():
            while not self._stop.wait(self.interval):
                self.poll()

        self._thread = threading.Thread(target=loop, name="sweep-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

"""The Ray backend of a sweep (docs/sweeps.md, "Backends"): its jobs as Ray tasks of one CPU
each, on a local Ray instance started for the sweep or on a running cluster. Ray is an optional
extra (RAY_INSTALL); it is imported only once a sweep asks for it.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from headmovies.errors import UserError
from headmovies.sweeps.jobs import failed_rows, one_line, run_job
from headmovies.sweeps.plan import Job

RAY_INSTALL = "pip install -e .[ray]"


def _check_reachable(address: str, timeout: float = 2.0, flag: str = "--address") -> None:
    """UserError unless a TCP connection to the host:port of `address` ('HOST:PORT' or
    'ray://HOST:PORT', given as `flag`) opens within `timeout` seconds: Ray itself retries for
    minutes, printing a warning every few seconds."""
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise UserError(f"{flag} {address!r} is not HOST:PORT (e.g. 10.0.0.5:6379 or ray://10.0.0.5:10001) or auto")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise UserError(
            f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}); start one with "
            f"`ray start --head` there, or fix {flag}"
        ) from None


def connect_ray(address: str | None, workers: int | None) -> None:
    """Start a local Ray instance (address None and no RAY_ADDRESS) or connect to a cluster.
    UserError if Ray is not installed or the cluster (--address, else RAY_ADDRESS) cannot be
    reached: a TCP connect to its HOST:PORT is tried first, for 2 s at most."""
    if importlib.util.find_spec("ray") is None:
        raise UserError(f"--backend ray needs Ray, an optional extra: {RAY_INSTALL}")
    # Ray reads RAY_ADDRESS when no address is given: checked the same way
    given, flag = (address, "--address") if address is not None else (os.environ.get("RAY_ADDRESS"), "RAY_ADDRESS")
    if given and given not in ("auto", "local"):
        _check_reachable(given, flag=flag)
    import logging

    import ray

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ray.init(
            address=address,
            num_cpus=workers if address is None else None,
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    except Exception as exc:
        raise UserError(f"cannot start or reach Ray{f' at {address}' if address else ''}: {one_line(exc)}") from None
    finally:
        for sig, handler in handlers.items():  # Ray's own SIGTERM handler aborts the driver
            signal.signal(sig, handler)


def cluster_cpus() -> int:
    """The CPUs of the Ray cluster connected to (at least 1). Needs `connect_ray` first."""
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def run_ray(jobs: list[Job], workers: int | None, on_rows: Callable[[list[dict]], None]) -> None:
    """Run the jobs as Ray tasks (1 CPU each), at most `workers` at a time (default: the
    cluster's CPUs). Needs `connect_ray` first."""
    import ray

    task = ray.remote(num_cpus=1, max_retries=0)(run_job)
    limit = workers or cluster_cpus()
    queue = list(jobs)
    running: dict = {}  # Ray object ref -> its job
    try:
        while queue or running:
            while queue and len(running) < limit:
                job = queue.pop(0)
                running[task.remote(job)] = job
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                job = running.pop(ref)
                try:
                    rows = ray.get(ref)
                except Exception as exc:  # the task's worker died, or the node was lost
                    rows = failed_rows(job, UserError(f"its Ray task failed ({one_line(exc)})"))
                on_rows(rows)
    except BaseException:
        for ref in running:
            ray.cancel(ref, force=True)
        raise


def disconnect_ray() -> None:
    """Stop the local Ray instance started by `connect_ray`, or disconnect from the cluster."""
    import ray

    ray.shutdown()

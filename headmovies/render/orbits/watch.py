"""The live view (docs/viewer.md): serve the viewer on 127.0.0.1 and follow a run that is still
training.

`Follower` reads the run file with the SWMR reader (`Run.refresh`) every `interval` seconds
and adds new snapshots to a `viewer.ViewerData`. A writer restarted with `--resume` replaces
the file (`RunWriter.reopen` copies it up to the checkpoint and renames the copy into place):
the follower sees the new inode, reopens, keeps the snapshots both files share and drops the
rest, which the resumed writer writes again. A file replaced by a different run (`--force`)
makes the page reload. The page polls `/update?gen=G&since=T` (JSON) and gets the chunks it
lacks; `gen` counts reopenings, so a page that holds dropped snapshots is told where to cut.
Requests whose Host header is not the viewer's own address get 403 (`host_allowed`: DNS rebinding).

Planes. When new snapshots arrive (at most every `rechoose_s` seconds, and once the run is
complete), the follower applies the movie's rule (`panel_choice.resolve_panels`, the
`--panels` words) to the newest snapshot again, as the movie applies it to the whole run's
last. When the choice changes (an orbit appeared in other planes) and holds at the next check
too (or the run is complete), it rebuilds the payload in
the new planes from every snapshot so far and the page reloads (the page's identity gains a
plane count).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np

from headmovies.errors import RunFileError, UserError, plural
from headmovies.interrupts import deferred_signals
from headmovies.render.orbits.check import DEAD_TOL, TOL
from headmovies.render.orbits.check_run import group_of
from headmovies.render.orbits.viewer import ViewerData, page
from headmovies.runfile.reader import Run

POLL_MS = 1000  # the page asks for new snapshots this often
RECHOOSE_S = 5.0  # the planes are chosen again at most this often while snapshots arrive
SAY_S = 30  # a message about the file shows this long in the page


def shared_prefix(old: Run, new: Run) -> int:
    """How many leading snapshots two files of one run hold identically. A resumed writer copies
    the records up to its checkpoint and writes the later ones again (bit for bit on CPU, not
    necessarily elsewhere), so snapshots are compared from the last common epoch backwards."""
    k = min(len(old), len(new))
    agree = old.epochs[:k] == new.epochs[:k]
    k = k if agree.all() else int(np.argmin(agree))
    names = old.weight_names
    while k > 0 and names == new.weight_names:
        a, b = old.weights(k - 1, names), new.weights(k - 1, names)
        if all(np.array_equal(a[n], b[n]) for n in names):
            return k
        k -= 1
    return k


class Follower:
    """A run file followed as it grows, thread-safe: `poll()` from one thread, `page_text()` and
    `update()` from the server's."""

    def __init__(
        self,
        path: str | os.PathLike,
        panels: Sequence[str] | None = None,
        tol: float = TOL,
        dead_tol: float = DEAD_TOL,
        rechoose_s: float = RECHOOSE_S,
    ):
        self.path = Path(path)
        self.rechoose_s, self.chosen_at, self.planes_gen = rechoose_s, time.monotonic(), 0
        self.pending: list | None = None  # planes chosen at the last check, not yet shown
        self.panels, self.tol, self.dead_tol = panels, tol, dead_tol
        self.lock = threading.Lock()
        self.inode = 0
        self.identity = ""
        self.gen = 0
        self.cuts: dict[int, int] = {}  # gen -> snapshots kept when it began
        self.message, self.said_at, self.error = "", 0.0, False  # shown in the page for SAY_S seconds
        self.last_growth = time.monotonic()
        run = self._open()
        self.run: Run | None = run  # None once closed
        self.data = ViewerData(run, panels, tol, dead_tol)
        self.data.grow(run)
        self.meta = self.data.meta()

    def _open(self) -> Run:
        """The run file, opened, its inode and identity noted (the caller closes the one before)."""
        inode = os.stat(self.path).st_ino  # before opening: a replacement in between is seen next poll
        run = Run(self.path)
        try:
            group_of(run)  # a clear error for a run without C_n data
        except Exception:
            run.close()
            raise
        self.inode = inode
        self.identity = f"{run.f.attrs['created']}|{run.shape('W_Q')}"
        return run

    def _replaced(self) -> bool:
        try:
            return os.stat(self.path).st_ino != self.inode
        except FileNotFoundError:
            return False  # mid-replacement or removed: keep what we have

    def poll(self) -> int:
        """Reopen if the file was replaced, read new snapshots. Returns how many were added.
        Problems with the file are kept in `message` (shown in the page), never raised."""
        try:
            with self.lock:
                if self.run is None:  # closed
                    return 0
                before = self.data.count
                if self._replaced():
                    old, old_identity = self.run, self.identity  # the old file stays open to compare
                    run = self.run = self._open()
                    if self.identity != old_identity:  # another run (--force): start over
                        self.data = ViewerData(run, self.panels, self.tol, self.dead_tol)
                        before = 0
                        self._say("the run file was replaced by a new run")
                    else:  # resumed: keep the shared prefix
                        before = min(before, self.data.truncate(shared_prefix(old, run)))
                        self._say("writer restarted (--resume): following the new file")
                    old.close()
                    self.gen += 1
                    self.cuts[self.gen] = self.data.count
                else:
                    run = self.run
                    run.refresh()
                chunk = self.data.grow(run)
                added = self.data.count - before if chunk else 0
                if chunk:
                    self.last_growth = time.monotonic()
                    if self._rechoose(run):
                        added = self.data.count  # the page reloads every snapshot
                if self.error:
                    self.error = False
                    self._say("")
                self.meta = self.data.meta()
                return max(added, 0)
        except (RunFileError, UserError, OSError, KeyError) as exc:
            self._say(f"cannot read the run file now ({str(exc).splitlines()[0]}); retrying")
            self.error = True
            return 0

    def _rechoose(self, run: Run) -> bool:
        """Apply the plane rule to the newest snapshot (throttled by `rechoose_s`, always once
        the run is complete); rebuild the payload if it picks other planes at two checks in a
        row (an orbit at the tolerance's edge does not flip the page back and forth), or at
        once when the run is complete. True if it did."""
        now = time.monotonic()
        if now - self.chosen_at < self.rechoose_s and not run.complete:
            return False
        self.chosen_at = now
        fresh = ViewerData(run, self.panels, self.tol, self.dead_tol)  # resolves on the newest snapshot
        if fresh.panels == self.data.panels:
            self.pending = None
            return False
        if fresh.panels != self.pending and not run.complete:  # a new choice must hold at two checks
            self.pending = fresh.panels
            return False
        self.pending = None
        old = " ".join(map(str, self.data.panels))
        fresh.grow(run)
        self.data = fresh
        self.planes_gen += 1
        self._say(f"new planes for the orbits so far: {' '.join(map(str, fresh.panels))} (were {old})")
        return True

    def page_identity(self) -> str:
        """The run file's identity and how often the planes changed: a page of older planes reloads."""
        return f"{self.identity}|planes {self.planes_gen}"

    def _say(self, message: str) -> None:
        self.message, self.said_at = message, time.monotonic()

    def status(self) -> dict:
        last = self.data.chunks[-1].data["epochs"][-1] if self.data.chunks else 0
        return {
            "epoch": int(last),
            "final_epoch": int(self.meta["final_epoch"]),
            "complete": bool(self.meta["complete"]),
            "quiet_s": round(time.monotonic() - self.last_growth, 1),
            "message": self.message if self.error or time.monotonic() - self.said_at < SAY_S else "",
            "snapshots": self.data.count,
        }

    def live(self) -> dict:
        return {"update": "update", "poll_ms": POLL_MS, "gen": self.gen, "identity": self.page_identity()}

    def page_text(self) -> str:
        with self.lock:
            return page({"meta": self.meta, "chunks": [c.data for c in self.data.chunks], "live": self.live()})

    def update(self, gen: int, since: int, identity: str | None = None) -> dict:
        """The chunks a page at (gen, since) lacks. A page from an older gen gets everything from
        the lowest cut since its gen (it drops what it holds beyond)."""
        with self.lock:
            if identity is not None and identity != self.page_identity():
                return {"reload": True}
            if gen > self.gen or gen < 0:
                start = 0
            else:
                start = min([since] + [self.cuts[g] for g in range(gen + 1, self.gen + 1)])
            start = max(0, min(start, self.data.count))
            chunks = [c.data for c in self.data.chunks if c.stop > start]
            return {
                "gen": self.gen,
                "identity": self.page_identity(),
                "meta": self.meta,
                "chunks": chunks,
                "status": self.status(),
            }

    def close(self) -> None:
        with self.lock:
            if self.run is not None:
                self.run.close()
                self.run = None


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def host_allowed(host: str | None, address: object) -> bool:
    """True when a request's Host header names the address the viewer listens on (`address`,
    the server's (host, port)): 127.0.0.1:PORT, localhost:PORT or [::1]:PORT, or the host it was
    bound to. A page of another site that a DNS-rebinding attack points at 127.0.0.1 sends its
    own name as Host, so it is refused (403), as Jupyter and TensorBoard refuse it."""
    if not host or not isinstance(address, tuple):
        return False
    bound, port = str(address[0]), int(address[1])
    names = {*LOOPBACK_NAMES, f"[{bound}]" if ":" in bound else bound} - {"0.0.0.0", "[::]"}
    return host.strip().lower() in {f"{name}:{port}" for name in names}


def _handler(follower: Follower):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # the name http.server calls
            if not host_allowed(self.headers.get("Host"), self.server.server_address):
                self._send(
                    HTTPStatus.FORBIDDEN, b"forbidden: the Host header is not this viewer's address\n", "text/plain"
                )
                return
            url = urlparse(self.path)
            try:
                if url.path in ("/", "/index.html"):
                    self._send(HTTPStatus.OK, follower.page_text().encode("utf-8"), "text/html; charset=utf-8")
                elif url.path == "/update":
                    q = parse_qs(url.query)
                    gen = int(q.get("gen", ["-1"])[0])
                    since = int(q.get("since", ["0"])[0])
                    body = follower.update(gen, since, q.get("identity", [None])[0])
                    self._send(HTTPStatus.OK, json.dumps(body, allow_nan=False).encode("utf-8"), "application/json")
                else:
                    self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
            except ValueError:
                self._send(HTTPStatus.BAD_REQUEST, b"bad query\n", "text/plain")
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format, *args) -> None:  # quiet: the terminal shows the run's progress
            pass

    return Handler


def serve(follower: Follower, host: str = "127.0.0.1", port: int = 8765) -> ThreadingHTTPServer:
    """Start the HTTP server in a daemon thread; UserError if the port is taken."""
    try:
        server = ThreadingHTTPServer((host, port), _handler(follower))
    except OSError as exc:
        raise UserError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass another --port (--port 0 picks a free one)"
        ) from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="viewer-server", daemon=True).start()
    return server


def wait_for_run(path: Path, interval: float, log: Callable[[str], None]) -> None:
    """Block until `path` holds a snapshot (a watch started before training)."""
    said = False
    while True:
        try:
            with Run(path):
                return
        except RunFileError as exc:
            if path.exists() and "no snapshot" not in str(exc):
                raise
            if not said:
                state = "has no snapshot yet" if path.exists() else "does not exist yet (a training's --out?)"
                log(f"waiting for {path} to hold a snapshot: it {state} (Ctrl-C stops)")
                said = True
        time.sleep(interval)


def watch(
    run_path: str | os.PathLike,
    panels: Sequence[str] | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    interval: float = 1.0,
    tol: float = TOL,
    dead_tol: float = DEAD_TOL,
    open_browser: bool = False,
    log: Callable[[str], None] = print,
) -> None:
    """Serve the live viewer of `run_path` until Ctrl-C (KeyboardInterrupt, or SIGTERM through the
    CLI), then stop the server and close the file. Prints the URL, then one line per change."""
    path = Path(run_path)
    wait_for_run(path, interval, log)
    follower = Follower(path, panels, tol, dead_tol)
    server = serve(follower, host, port)
    url = f"http://{host}:{server.server_address[1]}/"
    st = follower.status()
    log(
        f"serving the live viewer of {path} at {url} (Ctrl-C stops): epoch {st['epoch']:,} of "
        f"{st['final_epoch']:,}, {plural(st['snapshots'], 'snapshot')}"
    )
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    # Ctrl-C (and SIGTERM) only wake this loop: raised inside h5py they could leave its lock held
    with deferred_signals() as signals:
        try:
            while not signals.pending.wait(interval):
                message = follower.message
                if follower.poll():
                    st = follower.status()
                    log(
                        f"epoch {st['epoch']:,} of {st['final_epoch']:,} ({plural(st['snapshots'], 'snapshot')})"
                        + (", training finished" if st["complete"] else "")
                    )
                if follower.message and follower.message != message:
                    log(follower.message)
        finally:
            server.shutdown()
            server.server_close()
            follower.close()
        signals.deliver()  # stopped by Ctrl-C or SIGTERM: the CLI's handler raises
    raise KeyboardInterrupt  # (outside the main thread, no handler ran: say stopped all the same)

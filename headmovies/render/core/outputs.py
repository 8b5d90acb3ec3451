"""Output files appear whole or not at all: each is written under a temporary name in its
folder and renamed into place when complete (a rename within a folder is atomic).

Every command that writes figures or text uses these helpers; the movie encoder
(`render.core.encode`) does the same for its files, written in a hidden work folder
(`work_folder`) whose lock tells a live render's folder from one a killed render left
(`remove_stale_work`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from headmovies import disk
from headmovies.errors import DiskFullError, UserError

FIGURE_FORMATS = ("png", "svg")


def check_out_dir(out_dir: str | os.PathLike) -> None:
    """Check, creating nothing, that `out_dir` can be made and written: UserError (one line,
    `disk.check_folder`) otherwise. For commands that compute for long before they write."""
    disk.check_folder(out_dir)


def prepare_out_dir(out_dir: str | os.PathLike) -> Path:
    """Create `out_dir` if needed and check that files can be created in it. UserError (one
    line) if it cannot be created, is not a folder, or is not writable."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if disk.is_full(exc):
            raise DiskFullError(disk.full_message(out_dir.parent, f"cannot create {out_dir}")) from None
        disk.check_folder(out_dir)  # says why in the common words, if it can
        raise UserError(f"cannot create output folder {out_dir}: {exc.strerror or exc}") from None
    disk.check_folder(out_dir)
    try:
        fd, probe = tempfile.mkstemp(dir=out_dir, prefix=".write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"cannot write to output folder {out_dir}: {exc.strerror or exc}") from None
    return out_dir


def unique_names(paths: Sequence[os.PathLike]) -> list[str]:
    """One output sub-folder name per input file: its stem, made unique (run, run-2, ...)."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for p in paths:
        stem = Path(p).stem
        seen[stem] = seen.get(stem, 0) + 1
        names.append(stem if seen[stem] == 1 else f"{stem}-{seen[stem]}")
    return names


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temporary(final: Path) -> Path:
    """A fresh hidden temporary file beside `final`, with the mode a new file would get."""
    try:
        fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    except OSError as exc:
        raise _write_error(final, exc) from None
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600
    return Path(tmp)


def _write_error(final: Path, exc: OSError) -> UserError:
    """One line for a failed write of `final`: the disk is full, or the folder refuses it."""
    if disk.is_full(exc):
        return DiskFullError(
            disk.full_message(final.parent, f"while writing {final.name}", f"{final.name} was not written")
        )
    return UserError(f"cannot write {final}: {exc.strerror or exc}")


@contextmanager
def atomic(final: Path):
    """Yield a temporary path beside `final`; on success rename it to `final`, on any failure
    remove it (an OSError becomes one line: a full disk or an unwritable folder)."""
    tmp = _temporary(final)
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _write_error(final, exc) from None
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write a UTF-8 text file atomically; returns its path."""
    path = Path(path)
    with atomic(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def save_figure(
    fig,
    out_dir: str | os.PathLike,
    name: str,
    formats: Sequence[str] = FIGURE_FORMATS,
    dpi: int = 150,
    close: bool = True,
) -> list[Path]:
    """Write a matplotlib figure as out_dir/name.{png,svg} (each atomically); returns the paths.
    SVGs carry no date, so a figure rendered twice is the same file. Closes pyplot figures."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if fig.canvas is None or not hasattr(fig.canvas, "print_figure"):
        FigureCanvasAgg(fig)
    paths = []
    for fmt in formats:
        final = Path(out_dir) / f"{name}.{fmt}"
        with atomic(final) as tmp:
            fig.savefig(tmp, format=fmt, dpi=dpi, facecolor="white", metadata={"Date": None} if fmt == "svg" else None)
        paths.append(final)
    if close:
        import matplotlib.pyplot as plt

        if plt.fignum_exists(fig.number if hasattr(fig, "number") else -1):
            plt.close(fig)
    return paths


def remove_stale_work(out_dir: Path) -> list[Path]:
    """Remove the `.NAME.encoding-PID-*` folders that killed renders left in `out_dir`. A live
    encode holds an flock on its folder's `lock` file (dropped by the kernel when it dies); a
    folder without that file (older versions) counts as stale once a minute old."""
    removed = []
    for work in out_dir.glob(".*.encoding-*"):
        try:
            fd = os.open(work / "lock", os.O_RDONLY)
        except FileNotFoundError:
            try:
                stale = work.is_dir() and time.time() - work.stat().st_mtime > 60
            except OSError:
                stale = False
        except OSError:
            continue
        else:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                stale = True
            except BlockingIOError:
                stale = False  # a live render, maybe another process's
            finally:
                os.close(fd)
        if stale:
            shutil.rmtree(work, ignore_errors=True)
            removed.append(work)
    return removed


def work_folder(out_dir: Path, basename: str) -> tuple[Path, int]:
    """A fresh hidden work folder in `out_dir` and the fd of its held `lock` (see remove_stale_work)."""
    work = Path(tempfile.mkdtemp(dir=out_dir, prefix=f".{basename}.encoding-{os.getpid()}-"))
    fd = os.open(work / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return work, fd

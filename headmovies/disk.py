"""Free disk space, told before writing rather than discovered half-way (docs/run-file.md, "Faults").

Both sides use it: the run-file writer checks room for each snapshot and checkpoint before
writing it, and every writer of outputs turns a full disk into one line (`DiskFullError`).
Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from headmovies.errors import DiskFullError, UserError

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
MARGIN = 1 << 20  # bytes kept free beyond an estimate: HDF5 metadata, the close's own flush


def free_bytes(path: str | os.PathLike) -> int:
    """Bytes an unprivileged writer may still use on the file system of `path` (a file or a
    folder; the nearest existing parent is asked)."""
    st = os.statvfs(_nearest_existing(path))
    return st.f_bavail * st.f_frsize


def _nearest_existing(path: str | os.PathLike) -> Path:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_folder(folder: str | os.PathLike, may_create: bool = True) -> None:
    """UserError (one line, the same wording in every command) unless files can be written in
    `folder`, or, with `may_create`, it can be created: it is not a file, the nearest existing
    folder above it is a folder, writable, and on a disk (not /proc). Creates nothing."""
    folder = Path(folder)  # shown as given; relative paths are checked as they are
    if folder.exists() and not folder.is_dir():
        kind = _kind(folder.stat().st_mode) or "a file"
        raise UserError(f"output folder {folder} is {kind}; {'remove it or ' * (kind == 'a file')}choose another --out")
    base = _nearest_existing(folder)
    if not base.is_dir():
        raise UserError(f"cannot create output folder {folder}: {base} is a file")
    if base != folder and not may_create:
        raise UserError(f"output folder {folder} does not exist; create it first (mkdir -p {folder})")
    if not os.access(base, os.W_OK | os.X_OK) or os.statvfs(base).f_blocks == 0:
        raise UserError(
            f"cannot write to output folder {folder}: it is read-only, not yours or not on a disk"
            if base == folder
            else f"cannot create output folder {folder}: {base} is not a writable folder on a disk"
        )


def _kind(mode: int) -> str | None:
    """What a file of `mode` (st_mode) is when it is neither a regular file nor a folder."""
    kinds = (
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    for test, name in kinds:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file"


def check_file_kind(path: str | os.PathLike, role: str) -> None:
    """UserError (one line) when `path` exists and is a named pipe (FIFO), a socket or a device:
    opening one would block forever or read a stream, not a file. `role` names it in the line
    ('run file', '--out'). A missing path, a regular file or a folder (its callers have their own
    line for one) passes; symlinks are followed. Checked before anything opens `path`."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing, a broken symlink or a loop: the opener's own line says which
    kind = _kind(mode)
    if kind is not None:
        raise UserError(f"{role} {path} is {kind}, not a regular file; give the path of a file")


def missing(path: str | os.PathLike) -> str:
    """Why `path`, which does not exist as far as `Path.exists` says, cannot be opened: 'is a
    symlink loop', 'is a broken symlink (to TARGET)' or 'does not exist'."""
    p = Path(path)
    if p.is_symlink():
        try:
            p.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "is a symlink loop"
        return f"is a broken symlink (to {os.readlink(p)})"
    return "does not exist"


def human(nbytes: float) -> str:
    """1536 -> '1.5 KB' (decimal units, as df -H prints them)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(nbytes) < 1000 or unit == "TB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1000
    return f"{nbytes:.1f} TB"


def require_free(path: str | os.PathLike, nbytes: int, what: str, then: str = "") -> None:
    """Raise DiskFullError (one line: what needs how much, what is free, `then`) unless the file
    system of `path` has `nbytes` + MARGIN free. UserError if `path` lies where files cannot be
    written at all (no such folder writable, or a pseudo file system such as /proc)."""
    p = _nearest_existing(path)
    if not p.is_dir() and p != Path(path):
        raise UserError(f"cannot write {path}: {p} is not a folder")
    folder = p if p.is_dir() else p.parent
    if not os.access(folder, os.W_OK) or os.statvfs(folder).f_blocks == 0:
        raise UserError(
            f"cannot write into {folder}: not a writable folder on a disk"
            if folder == Path(path)
            else f"cannot write {path}: {folder} is not a writable folder on a disk"
        )
    free = free_bytes(path)
    if free < nbytes + MARGIN:
        raise DiskFullError(full_message(path, f"{what} needs {human(nbytes + MARGIN)}, {human(free)} free", then))


def is_full(exc: BaseException) -> bool:
    """True if `exc` (OSError, or an h5py/torch error quoting errno 28) reports a full disk or quota."""
    if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
        return True
    text = str(exc)
    return "errno = 28" in text or "No space left on device" in text or "Disk quota exceeded" in text


def full_message(path: str | os.PathLike, detail: str = "", then: str = "") -> str:
    """'disk full on the file system of PATH (DETAIL); THEN' as one line."""
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    text = f"disk full: not enough free space on the file system of {folder}"
    if detail:
        text += f" ({detail})"
    return text + (f"; {then}" if then else "")

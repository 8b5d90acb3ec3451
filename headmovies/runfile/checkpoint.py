"""The checkpoint file beside a run file, `<run>.ckpt`: where it lives, and its atomic replacement.

The bytes are the trainer's (model, optimizer and RNG state, serialised by
`headmovies.train.checkpoints`); this module only puts them on disk so that a kill or a full
disk at any moment leaves the old checkpoint or the new one, whole: room checked first, written
to `<ckpt>.tmp`, fsync'ed, renamed over the old one (docs/run-file.md, "Faults"). Standard
library only (with `headmovies.disk` for the room check): no torch, no h5py.
"""

from __future__ import annotations

import os
from pathlib import Path

from headmovies import disk
from headmovies.errors import DiskFullError


def checkpoint_path(run_path: str | os.PathLike) -> Path:
    """`<run>.ckpt` beside the run file `run_path`."""
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + ".ckpt")


def write_checkpoint(path: Path, data: bytes | memoryview, epoch: int, then: str = "") -> None:
    """Replace the checkpoint `path` with `data` (the checkpoint at `epoch`) atomically: room
    checked, written to `<ckpt>.tmp`, fsync'ed, renamed. On failure the old checkpoint stays and
    no .tmp is left; a full disk raises DiskFullError (its message ends with `then`)."""
    disk.require_free(path.parent, len(data), f"the checkpoint at epoch {epoch}", then)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if disk.is_full(exc):
            raise DiskFullError(
                disk.full_message(path, f"while writing the checkpoint at epoch {epoch}", then)
            ) from None
        raise


def read_checkpoint(path: Path) -> bytes:
    """The bytes of the checkpoint `path`, read back whole for the trainer to deserialise.
    OSError if it cannot be read (the caller says what that means for its run)."""
    return Path(path).read_bytes()

"""The run file: the one contract between training (`headmovies.train`) and rendering (`headmovies.render`).

Both sides import this module; it needs only numpy and h5py (never torch).
Layout (schema version 1; docs/run-file.md):

    /                     attrs: schema_version, experiment, config (JSON), seed, created (ISO 8601),
                                 versions (JSON), git_commit, n, m (symmetric runs)
    /complete             [1] int8, 1 once training reached its final epoch
    /snapshots/epoch      [T] int64, the scheduled epochs written so far
    /snapshots/<weight>   [T, ...] float32, TransformerLens names (W_E, W_Q, W_K, W_V, W_O, W_U, ...)
    /metrics/epoch        [T] int64, same epochs as the snapshots
    /metrics/<name>       [T] float64 (train_loss, train_acc, heldout_acc, eq_error_pooled, ...)
    /split/<name>         int64 index arrays (e.g. train, heldout), written once

Every dataset is created before SWMR mode is switched on; each snapshot is appended by
`resize`, write, `flush`, so a reader that opens with `swmr=True` and `refresh`es sees only
complete snapshots (h5py's SWMR recipe); `snapshot_count` is the one rule that counts them.
A run killed mid-write must be opened with `swmr=True` (HDF5 leaves its "open for write" flag
set); `open_for_reading` does that.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import h5py
import numpy as np

from headmovies import disk
from headmovies.errors import RunFileError

SCHEMA_VERSION = 1
SNAPSHOTS = "snapshots"
METRICS = "metrics"
SPLIT = "split"
COMPLETE = "complete"
EPOCH = "epoch"
REQUIRED_ATTRS = ("schema_version", "experiment", "config", "seed", "created", "versions")
# Metrics renamed since files were first written: {old name: name now}. Readers map old files.
RENAMED_METRICS = {"eq_error": "eq_error_pooled"}  # before the worst-input error was stored too


_RETRAIN = "if it was a run, retrain it with `headmovies train EXPERIMENT --out PATH --force`"


def open_for_reading(path: str | os.PathLike) -> h5py.File:
    """Open a run file read-only in SWMR mode (works on live, finished and killed runs).

    Raises RunFileError (one line, with a fix) if the file is missing, is not HDF5, is from
    another schema version, or lacks the root attributes and snapshot epochs.
    """
    path = Path(path)
    if not path.exists():
        raise RunFileError(
            f"run file {path} {disk.missing(path)} (make one with `headmovies train EXP --out RUN`, "
            "`make movie`, or a Recorder in your own loop)"
        )
    if path.is_dir():
        raise RunFileError(f"{path} is a folder, not a run file")
    disk.check_file_kind(path, "run file")  # a FIFO would block the open forever
    try:
        # A plain open first: it rejects a truncated or corrupt file at once, whereas an SWMR
        # reader retries damaged metadata for minutes. Live and killed runs are "already open
        # for write" and go on to the SWMR open.
        h5py.File(path, "r").close()
    except OSError as exc:
        if "already open for write" not in str(exc):
            raise _open_error(path, exc) from None
    try:
        f = h5py.File(path, "r", swmr=True)
    except OSError as exc:
        raise _open_error(path, exc) from None
    try:
        missing = [a for a in REQUIRED_ATTRS if a not in f.attrs]
        if missing:
            raise RunFileError(f"{path} is not a run file: root attributes {missing} are missing")
        version = int(f.attrs["schema_version"])
        if version != SCHEMA_VERSION:
            raise RunFileError(
                f"{path} has run-file schema version {version}; this tool reads version {SCHEMA_VERSION}: retrain it"
            )
        if SNAPSHOTS not in f or EPOCH not in f[SNAPSHOTS]:
            raise RunFileError(f"{path} holds no /{SNAPSHOTS}/{EPOCH}: it is not a complete run file")
    except RunFileError:
        f.close()
        raise
    except Exception as exc:  # h5py raises KeyError/OSError on damaged metadata
        f.close()
        raise RunFileError(f"{path} is damaged: {str(exc).splitlines()[0]}") from None
    return f


def _open_error(path: Path, exc: OSError) -> RunFileError:
    """The one line for a run file HDF5 would not open: held by another process (a file lock, or
    with HDF5_USE_FILE_LOCKING=FALSE a non-SWMR writer's "open for write" flag), which is no
    damage and needs no retraining, or truncated or corrupt."""
    text = str(exc)
    if exc.errno == errno.EAGAIN or "unable to lock file" in text:
        return RunFileError(
            f"run file {path} is open for writing in another process (HDF5 file lock); wait for it or stop it"
        )
    if "not already open for SWMR writing" in text:
        clear = f"if no process has it open, `h5clear -s {path}` clears the flag"
        if file_locking_off():  # HDF5 took no lock, so a live writer cannot be told from a dead one
            return RunFileError(
                f"run file {path} is open for writing in another process, not in SWMR mode (HDF5's 'open for "
                "write' flag is set, and file locking is off here, HDF5_USE_FILE_LOCKING=FALSE, so whether that "
                "process still runs cannot be told), or was left so by one that was killed; wait for it or stop "
                f"it; {clear}"
            )
        return RunFileError(
            f"run file {path} was left open for writing by an HDF5 writer not in SWMR mode that ended without "
            "closing it (HDF5's 'open for write' flag is set, and no process holds the file's lock: it was "
            f"killed, or it runs with file locking off); {clear}"
        )
    return RunFileError(
        f"{path} is not a readable HDF5 run file (truncated or corrupt?): {text.splitlines()[0] if text else exc}",
        fix=_RETRAIN,
    )


def file_locking_off() -> bool:
    """True when HDF5 takes no file locks in this process (HDF5_USE_FILE_LOCKING=FALSE or 0)."""
    return os.environ.get("HDF5_USE_FILE_LOCKING", "").strip().upper() in ("FALSE", "0")


def is_checksum_error(exc: BaseException) -> bool:
    """True if `exc` (h5py's OSError) is a chunk whose Fletcher-32 checksum fails: bytes changed on
    disk. HDF5 reports it as a filter failure ("filter returned failure during read")."""
    text = str(exc)
    return isinstance(exc, OSError) and ("filter returned failure" in text or "checksum" in text.lower())


def read_error(path: str | os.PathLike, dataset: str, epoch: int | None, exc: BaseException) -> str:
    """One line for a failed read of `/dataset` (at the snapshot of `epoch`, None: the dataset as
    a whole) of the run file `path`: damaged bytes when the chunk's checksum fails, else HDF5's
    first line."""
    where = f"/{dataset}" + ("" if epoch is None else f" of the snapshot at epoch {epoch}")
    if is_checksum_error(exc):
        return (
            f"{path} is damaged: {where} fails its checksum (its bytes changed on disk); restore the file "
            "from a copy or retrain it"
        )
    return f"{path}: cannot read {where}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def is_complete(f: h5py.File) -> bool:
    """True once the writer marked the run finished (refreshes for live readers)."""
    if COMPLETE not in f:
        return False
    ds = f[COMPLETE]
    ds.refresh()
    return bool(ds[0])


def read_config(f: h5py.File) -> dict:
    """The resolved training config stored at the root, as a dict."""
    return json.loads(f.attrs["config"])


def weight_names(f: h5py.File) -> list[str]:
    """Names of the stored weights, e.g. ['W_E', 'W_K', 'W_O', 'W_Q', 'W_U', 'W_V']."""
    return sorted(k for k in f[SNAPSHOTS] if k != EPOCH)


def weight_shapes(f: h5py.File) -> dict[str, tuple[int, ...]]:
    """Each stored weight's shape in one snapshot, e.g. {'W_Q': (32, 24, 8), ...}."""
    return {k: tuple(int(d) for d in f[SNAPSHOTS][k].shape[1:]) for k in weight_names(f)}


def metric_datasets(f: h5py.File) -> dict[str, h5py.Dataset]:
    """{name: dataset} of every metric under /metrics (its /metrics/epoch left out), in the file's
    order. A name with '/' (written by older Recorders, which did not refuse one) is a dataset in
    nested groups, found and named by its path, e.g. 'loss/train'."""
    out: dict[str, h5py.Dataset] = {}
    if METRICS not in f:
        return out

    def visit(name: str, obj) -> None:
        if isinstance(obj, h5py.Dataset) and name != EPOCH:
            out[name] = obj

    f[METRICS].visititems(visit)
    return out


def append_row(ds: h5py.Dataset, t: int, value) -> None:
    """Grow `ds` [T, ...] to t + 1 rows and write `value` (one row, shape ds.shape[1:]) as row t:
    `ds.resize(t + 1, axis=0); ds[t] = value` through h5py's low-level calls (half the time of
    its high-level ones; a snapshot writes some 30 rows), stored bytes the same (HDF5 converts
    `value`'s dtype to the dataset's as before). ValueError for a row of another shape."""
    row = np.asarray(value, order="C", dtype=None if isinstance(value, np.ndarray) else ds.dtype)
    shape = ds.id.shape[1:]
    if row.shape != shape:
        raise ValueError(f"a row of {ds.name} is {list(shape)}, got {list(row.shape)}")
    ds.id.set_extent((t + 1, *shape))
    space = ds.id.get_space()
    space.select_hyperslab((t,) + (0,) * len(shape), (1, *shape))
    ds.id.write(h5py.h5s.create_simple((1, *shape)), space, row.reshape(1, *shape))


def snapshot_count(f: h5py.File, refresh: bool = False) -> int:
    """The number of complete snapshots: the rule every reader and copier of a run file follows.

    A snapshot is complete once its epoch is written (the writer appends weights first, epoch
    last), and no more are counted than any weight holds (defensive). A file opened just now
    sees what the writer has flushed; a long-lived SWMR reader passes `refresh=True` to pick up
    a live writer's appends since (each dataset refreshed, the epochs before the weights). No
    other handle to these datasets may be open during a refresh: HDF5 misreads through it after.
    """
    snaps = f[SNAPSHOTS]
    ep = snaps[EPOCH]
    if refresh:
        ep.refresh()
    count = ep.shape[0]
    for name in weight_names(f):
        ds = snaps[name]
        if refresh:
            ds.refresh()
        count = min(count, ds.shape[0])
    return count


def snapshot_epochs(f: h5py.File, count: int | None = None) -> np.ndarray:
    """The epochs of the complete snapshots (`snapshot_count`, or the first `count`), int64 [T],
    ascending. RunFileError when /snapshots/epoch cannot be read: damaged bytes name the dataset,
    the snapshots whose epochs fail the checksum, and whether `recover` can keep the others."""
    count = snapshot_count(f) if count is None else count
    index, epochs, lost = readable_epochs(f, count)
    if lost:
        raise RunFileError(epochs_damaged(f.filename, lost, count, len(index)))
    return epochs


def readable_epochs(f: h5py.File, count: int | None = None) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """(index [K], epochs [K], lost): the complete snapshots whose epochs can be read, by their
    index in the file, and the index ranges [lo, hi) of those whose /snapshots/epoch chunk fails
    its checksum (damaged bytes; each chunk holds the epochs of up to 1,024 snapshots). Any other
    failed read is a RunFileError."""
    count = snapshot_count(f) if count is None else count
    ds = f[SNAPSHOTS][EPOCH]
    try:
        return np.arange(count), ds[:count], []
    except Exception as exc:
        if not is_checksum_error(exc):
            raise RunFileError(read_error(f.filename, f"{SNAPSHOTS}/{EPOCH}", None, exc)) from None
    step = int(ds.chunks[0]) if ds.chunks else count
    index, epochs, lost = [], [], []
    for lo in range(0, count, step):  # which chunks: read them one by one
        hi = min(count, lo + step)
        try:
            epochs.append(ds[lo:hi])
            index.append(np.arange(lo, hi))
        except Exception as exc:
            if not is_checksum_error(exc):
                raise RunFileError(read_error(f.filename, f"{SNAPSHOTS}/{EPOCH}", None, exc)) from None
            lost.append((lo, hi))
    join = np.concatenate
    return join(index or [np.zeros(0, np.int64)]), join(epochs or [np.zeros(0, np.int64)]), lost


def epochs_damaged(path: str | os.PathLike, lost: list[tuple[int, int]], count: int, readable: int) -> str:
    """One line for a run file whose /snapshots/epoch fails its checksum for the snapshot index
    ranges `lost` (of `count`; `readable` epochs can still be read): what is lost, and the way out."""
    shown = ", ".join(f"{lo + 1}" if hi == lo + 1 else f"{lo + 1}..{hi}" for lo, hi in lost)
    head = (
        f"{path} is damaged: /{SNAPSHOTS}/{EPOCH} of the snapshots {shown} (of {count:,}) fails its checksum "
        "(its bytes changed on disk)"
    )
    if readable:
        return (
            f"{head}, so their epochs cannot be read; `headmovies recover {path} --out COPY.h5` keeps the other "
            f"{readable:,} snapshot{'s' if readable != 1 else ''}, or restore the file from a copy"
        )
    return f"{head}: no snapshot's epoch can be read, so none can be kept; restore the file from a copy or retrain it"


def latest_epoch(path: str | os.PathLike) -> int | None:
    """The epoch of the newest complete snapshot of the run file at `path` (`snapshot_count`),
    read through a short-lived SWMR reader; None when there is no such file yet, it holds no
    snapshot or it cannot be read now (a progress display asks again later)."""
    try:
        with open_for_reading(path) as f:
            epochs = snapshot_epochs(f)
            return int(epochs[-1]) if len(epochs) else None
    except (RunFileError, OSError, KeyError, ValueError):
        return None


def read_snapshot(f: h5py.File, epoch: int) -> dict[str, np.ndarray] | None:
    """The weights of the complete snapshot at `epoch`, float32 arrays by name (e.g.
    {'W_Q': [n_heads, d_model, d_head], ...}), or None when `f` holds no complete snapshot there.
    RunFileError for damaged bytes (a failed checksum)."""
    where = np.flatnonzero(snapshot_epochs(f) == epoch)
    if not len(where):
        return None
    t = int(where[0])
    out = {}
    for name in weight_names(f):
        try:
            out[name] = f[SNAPSHOTS][name][t]
        except OSError as exc:
            raise RunFileError(read_error(f.filename, f"{SNAPSHOTS}/{name}", epoch, exc)) from None
    return out


def library_versions() -> dict[str, str]:
    """{'numpy': ..., 'h5py': ...}: the versions of the libraries that write the file, for the
    root attribute `versions` (the trainer adds its own)."""
    return {"numpy": np.__version__, "h5py": h5py.__version__}


def is_closed_cleanly(path: str | os.PathLike) -> bool:
    """True when `path` opens without SWMR, as any HDF5 tool opens it (h5ls, h5dump, a plain
    h5py.File); False for a live or killed run (HDF5's "open for write" flag is set) or a file
    HDF5 cannot open."""
    try:
        h5py.File(path, "r").close()
    except OSError:
        return False
    return True


def read_split(f: h5py.File) -> dict[str, np.ndarray]:
    """The stored data split, e.g. {'train': int64[N_train], 'heldout': int64[N_heldout]}."""
    if SPLIT not in f:
        return {}
    return {k: f[SPLIT][k][()] for k in f[SPLIT]}

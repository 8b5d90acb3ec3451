"""Streams snapshots into an HDF5 run file, crash-safe and readable while it grows (docs/run-file.md).

h5py's SWMR recipe: create every dataset, switch SWMR on, then per snapshot `resize`, write,
`flush`. The epoch is appended last, so a reader that sizes itself by `/snapshots/epoch`
never sees a half-written snapshot. A new file is built under `<path>.partial` and renamed
into place (`publish`) once it holds its first snapshot, so the final path never holds a file
without one.

A full disk: room for each snapshot is checked before it is written (`disk.require_free`),
and HDF5's chunk cache is off (`rdcc_nbytes=0`), so a write that fails anyway fails at once,
before the epoch that would announce it. The handle is then detached from the file (its
descriptor pointed at an in-memory file) before closing, so HDF5 writes nothing more: the
file stays as a killed writer would leave it, with every complete snapshot.

Checksums: every chunked dataset is written with HDF5's Fletcher-32 filter (`fletcher32=True`),
a checksum per chunk, so bytes damaged on disk fail the read of their chunk (`schema.read_error`)
instead of reading as weights. The stored values are the same; bench/runfile_checksums.py
measures the cost (docs/run-file.md). Files written before read as they are; a resume or
`recover` copy gains the checksums.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NoReturn

import h5py
import numpy as np

from headmovies import disk
from headmovies.errors import DiskFullError, plural
from headmovies.runfile import probe_records, schema
from headmovies.runfile.copies import copy_records
from headmovies.runfile.schema import COMPLETE, EPOCH, METRICS, SNAPSHOTS, SPLIT

CHECKSUMS = True  # Fletcher-32 per chunk; False only to measure its cost (bench/runfile_checksums.py)


def partial_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".partial")


def _new_file(path: Path, swmr_ready: bool = True) -> h5py.File:
    # rdcc_nbytes=0: no chunk cache, so a failed write raises in the call that made it
    return h5py.File(path, "x", libver="latest" if swmr_ready else "earliest", rdcc_nbytes=0)


def _detach(f: h5py.File) -> None:
    """Point `f`'s file descriptor at an empty in-memory file, so that closing `f` after a failed
    write changes nothing on disk (and HDF5, whose state a failed flush leaves inconsistent,
    cannot crash on the real file)."""
    try:
        fd = f.id.get_vfd_handle()
        mem = os.memfd_create("detached-run-file") if hasattr(os, "memfd_create") else os.open(os.devnull, os.O_RDWR)
        os.dup2(mem, fd)
        os.close(mem)
    except Exception:  # best effort; the close below is guarded too
        pass


def _close_quietly(f: h5py.File) -> None:
    try:
        if f.id.valid:
            f.close()
    except Exception:  # the file on disk is already what it will be
        pass


def _nbytes(weights: dict[str, np.ndarray], metrics: dict[str, float]) -> int:
    return sum(np.asarray(w).size * 4 for w in weights.values()) + 8 * (len(metrics) + 2)


def clean_copy(src_path: str | os.PathLike, out: str | os.PathLike, skip_damaged_epochs: bool = False) -> int:
    """Write every complete snapshot of the run file `src_path` (live, killed or finished) into a
    new, closed run file `out` that any HDF5 tool opens (`h5ls`, a plain `h5py.File`), built under
    `<out>.partial` and renamed into place; `out` may be `src_path` itself. Returns the number of
    snapshots. Raises RunFileError for an unreadable source, DiskFullError when there is no room.
    `skip_damaged_epochs`: as `copy_records`."""
    src_path, out = Path(src_path), Path(out)
    tmp = partial_path(out)
    src = schema.open_for_reading(src_path)
    try:
        disk.require_free(out.parent, src_path.stat().st_size, f"a copy of {src_path}")
        tmp.unlink(missing_ok=True)
        f = None
        try:
            f = _new_file(tmp, swmr_ready=False)
            count = copy_records(src, f, skip_damaged_epochs=skip_damaged_epochs, checksums=CHECKSUMS)
            f.flush()
        except BaseException as exc:
            _fail(f, tmp, exc, out, f"writing {out}", f"{src_path} is unchanged")
        f.close()
    finally:
        src.close()
    os.replace(tmp, out)
    return count


def fork_copy(src: h5py.File, out: str | os.PathLike, through_epoch: int, attrs: dict) -> Path:
    """Write `src`'s records through `through_epoch` (an open run file; /complete cleared) into
    `<out>.partial`, root attributes updated with `attrs` (dicts stored as JSON, None removes), and return that
    path for the caller to rename. Raises DiskFullError, leaving nothing, when there is no room."""
    out = Path(out)
    tmp = partial_path(out)
    tmp.unlink(missing_ok=True)
    disk.require_free(
        out.parent, Path(src.filename).stat().st_size, "the fork's copy of its source", f"nothing was written to {out}"
    )
    f = None
    try:
        f = _new_file(tmp)
        copy_records(src, f, through_epoch, checksums=CHECKSUMS)
        for key, value in attrs.items():
            if value is None:
                f.attrs.pop(key, None)
            else:
                f.attrs[key] = json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
        f.flush()
    except BaseException as exc:
        _fail(f, tmp, exc, out, f"copying {src.filename} to fork it", f"nothing was written to {out}")
    f.close()
    return tmp


def _fail(
    f: h5py.File | None, tmp: Path | None, exc: BaseException, where: Path, what: str, then: str = ""
) -> NoReturn:
    """Give up on `f` (None: not opened) after `exc`: detach it if the disk is full, close it,
    remove `tmp`, and raise DiskFullError (about the file system of `where`: `what`; `then`) for
    a full disk, or `exc` itself otherwise."""
    full = disk.is_full(exc)
    if f is not None:
        if full:
            _detach(f)
        _close_quietly(f)
    if tmp is not None:
        tmp.unlink(missing_ok=True)
    if full:
        raise DiskFullError(disk.full_message(where, f"while {what}", then)) from None
    raise exc


class RunWriter:
    """Appends (epoch, weights, metrics) records to an open SWMR run file.

    Use `RunWriter.create` (then `publish`) for a new run and `RunWriter.reopen` to continue a
    (possibly killed) one. Weights are stored float32, metrics float64; both chunked along time.
    `hint` is appended to a DiskFullError from `append` (how to continue).
    """

    def __init__(self, f: h5py.File, path: Path, tmp: Path | None = None):
        self.f, self.path, self.tmp = f, path, tmp
        self.hint = ""
        self.closed = False  # once closed (or given up after a failed write), `f` is never touched again
        self._datasets: dict[str, h5py.Dataset] = {}  # by path: one lookup per dataset, not per snapshot

    def _dataset(self, path: str) -> h5py.Dataset:
        """The dataset at `path` of `f`, looked up once (a snapshot writes some 30 of them)."""
        ds = self._datasets.get(path)
        if ds is None:
            ds = self._datasets[path] = self.f[path]
        return ds

    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        attrs: dict,
        epoch: int,
        weights: dict[str, np.ndarray],
        metrics: dict[str, float],
        split: dict[str, np.ndarray],
        probe: dict[str, np.ndarray] | None = None,
        probe_tokens: np.ndarray | None = None,
        weight_dtype: type = np.float32,
        probe_labels: list[str] | None = None,
    ) -> RunWriter:
        """Build `<path>.partial` holding the first snapshot; `publish()` renames it to `path`
        (`discard()` removes it). `path` must not exist (the caller removes it for --force).
        `attrs` values that are dicts are stored as JSON strings. `probe`: the first snapshot's
        probe record and `probe_tokens` its batch (/probe, `probe_records`), or None;
        `weight_dtype`: float32, or float16 for half the size (`Recorder(dtype=...)`); `probe_labels`: the
        first probe sequence's tokens as strings, or None. Raises
        DiskFullError, leaving nothing behind, when the disk cannot hold the first snapshot."""
        path = Path(path)
        tmp = partial_path(path)
        tmp.unlink(missing_ok=True)
        first = _nbytes(weights, metrics) + probe_records.nbytes(probe)
        first += sum(np.asarray(i).size * 8 for i in split.values())
        disk.require_free(path.parent, first, "the first snapshot", f"nothing was written to {path}")
        f = None
        try:
            f = _new_file(tmp)
            for key, value in attrs.items():
                f.attrs[key] = json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
            f.create_dataset(COMPLETE, shape=(1,), maxshape=(1,), chunks=(1,), dtype=np.int8, fletcher32=CHECKSUMS)
            snaps, mets = f.create_group(SNAPSHOTS), f.create_group(METRICS)
            for name, w in weights.items():
                w = np.asarray(w, dtype=np.float32)
                snaps.create_dataset(
                    name,
                    shape=(0, *w.shape),
                    maxshape=(None, *w.shape),
                    chunks=(1, *w.shape),
                    dtype=weight_dtype,
                    fletcher32=CHECKSUMS,
                )
            snaps.create_dataset(
                EPOCH, shape=(0,), maxshape=(None,), chunks=(1024,), dtype=np.int64, fletcher32=CHECKSUMS
            )
            for name in (EPOCH, *metrics):
                mets.create_dataset(
                    name,
                    shape=(0,),
                    maxshape=(None,),
                    chunks=(1024,),
                    dtype=np.int64 if name == EPOCH else np.float64,
                    fletcher32=CHECKSUMS,
                )
            grp = f.create_group(SPLIT)
            for name, idx in split.items():
                grp.create_dataset(name, data=np.asarray(idx, dtype=np.int64))
            if probe is not None:
                probe_records.create(f, probe, np.asarray(probe_tokens), CHECKSUMS, probe_labels)
            f.swmr_mode = True
            writer = cls(f, path, tmp)
            writer._append(epoch, weights, metrics, probe)
        except BaseException as exc:
            _fail(f, tmp, exc, path, "writing the first snapshot", f"nothing was written to {path}")
        return writer

    def publish(self) -> None:
        """Rename `<path>.partial` to `path` (the open handle follows the inode)."""
        if self.tmp is not None:
            os.replace(self.tmp, self.path)
            self.tmp = None

    def discard(self) -> None:
        """Close and remove a file that was never published."""
        if not self.closed:
            self.closed = True
            _close_quietly(self.f)
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)

    @classmethod
    def reopen(
        cls,
        path: str | os.PathLike,
        keep_through_epoch: int,
        attrs: dict | None = None,
        new_metrics: tuple[str, ...] = (),
    ) -> RunWriter:
        """Continue a run whose checkpoint is at `keep_through_epoch`.

        A killed SWMR writer leaves HDF5's "open for write" flag set, so the file cannot be
        reopened for writing; instead every record up to `keep_through_epoch` is copied
        (`copy_records`) into a fresh `<path>.partial` which then atomically replaces `path`.
        Records after the checkpoint are dropped: the resumed run recomputes them bit for bit.
        `attrs` updates root attributes (e.g. the config when training is extended);
        `new_metrics` adds metric names, NaN at the records kept (`copy_records`). Raises
        DiskFullError, leaving `path` as it was, when the disk cannot hold the copy.
        """
        path = Path(path)
        tmp = partial_path(path)
        tmp.unlink(missing_ok=True)
        src = schema.open_for_reading(path)
        try:
            disk.require_free(
                path.parent, path.stat().st_size, f"resuming {path} (a fresh copy of it)", f"{path} is unchanged"
            )
            f = None
            try:
                f = _new_file(tmp)
                copy_records(src, f, keep_through_epoch, tuple(new_metrics), checksums=CHECKSUMS)
                for key, value in (attrs or {}).items():
                    f.attrs[key] = value
                f.swmr_mode = True
                f.flush()
            except BaseException as exc:
                _fail(f, tmp, exc, path, f"copying {path} to resume it", f"{path} is unchanged")
        finally:
            src.close()
        os.replace(tmp, path)
        return cls(f, path)

    def with_metrics(self, names: list[str]) -> RunWriter:
        """This run file with metric names added (NaN at every snapshot so far), as a new writer:
        this one is closed and the file rebuilt beside it and renamed into place (HDF5 cannot
        add a dataset under SWMR). Live readers keep the file as it was until they reopen it."""
        if self.tmp is not None:
            raise ValueError("publish a new run file before adding metrics to it")
        last = self.last_epoch()
        self.close()
        writer = RunWriter.reopen(self.path, last, new_metrics=tuple(names))
        writer.hint = self.hint
        return writer

    def has_probe(self) -> bool:
        """True when the file holds /probe (its snapshots carry probe records)."""
        return probe_records.has_probe(self.f)

    def metric_names(self) -> list[str]:
        """The names of the stored metrics (in the file's order, /metrics/epoch left out)."""
        return list(schema.metric_datasets(self.f))

    def count(self) -> int:
        return int(self._dataset(f"{SNAPSHOTS}/{EPOCH}").shape[0])

    def append(
        self,
        epoch: int,
        weights: dict[str, np.ndarray],
        metrics: dict[str, float],
        probe: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Append one snapshot, its metrics and its probe record (a run file with /probe), then
        flush. Raises DiskFullError before writing when the disk lacks room for it, or when a
        write fails for lack of room; the file then holds every earlier snapshot, whole, and this
        writer is closed."""
        then = f"{self.path} holds {plural(self.count(), 'complete snapshot')}, through epoch {self.last_epoch()}" + (
            f"; {self.hint}" if self.hint else ""
        )
        try:
            need = _nbytes(weights, metrics) + probe_records.nbytes(probe)
            disk.require_free(self.path.parent, need, f"the snapshot at epoch {epoch}", then)
        except DiskFullError:
            self.close()
            raise
        try:
            self._append(epoch, weights, metrics, probe)
        except BaseException as exc:
            if not disk.is_full(exc):
                raise
            self.closed = True  # _fail closes `f`, once: HDF5 crashes on a second flush or close of it
            _fail(self.f, None, exc, self.path, f"writing the snapshot at epoch {epoch}", then)

    def _append(
        self, epoch: int, weights: dict[str, np.ndarray], metrics: dict[str, float], probe: dict | None = None
    ) -> None:
        # Weights first, epoch last, with a flush between (one flush may reach the file in any
        # object order).
        get = self._dataset
        snap_epoch, met_epoch = get(f"{SNAPSHOTS}/{EPOCH}"), get(f"{METRICS}/{EPOCH}")
        t = snap_epoch.shape[0]
        for name, w in weights.items():
            schema.append_row(get(f"{SNAPSHOTS}/{name}"), t, w)
        if probe is not None:
            probe_records.append(self.f, t, probe, get)
        k = met_epoch.shape[0]
        for name, value in metrics.items():
            schema.append_row(get(f"{METRICS}/{name}"), k, value)
        schema.append_row(met_epoch, k, epoch)
        self.f.flush()  # the records reach the file before the epoch that announces them
        schema.append_row(snap_epoch, t, epoch)
        self.f.flush()

    def last_epoch(self) -> int:
        ep = self._dataset(f"{SNAPSHOTS}/{EPOCH}")
        return int(ep[ep.shape[0] - 1]) if ep.shape[0] else -1

    def mark_complete(self) -> None:
        """Flag the run as finished (/complete = 1). A dataset, not an attribute: attributes
        cannot change under SWMR, and reopening the file would clash with live readers."""
        try:
            self.f[COMPLETE][0] = 1
            self.f.flush()
        except BaseException as exc:
            if not disk.is_full(exc):
                raise
            self.closed = True
            _fail(
                self.f,
                None,
                exc,
                self.path,
                "marking the run complete",
                f"{self.path} holds every snapshot; it reads as incomplete",
            )

    def close(self) -> None:
        """Flush and close, once; after a failed flush (full disk) the handle is detached first,
        so the file keeps what the last successful flush wrote. A writer given up after a failed
        write (`append`, `mark_complete`) was closed then: HDF5 is not called again, since a
        second flush or close of a file whose write failed crashes it (segfault)."""
        if self.closed:
            return
        self.closed = True
        if not self.f.id.valid:
            return
        try:
            self.f.flush()
        except Exception:  # a full disk: keep the file as the last flush left it
            _detach(self.f)
        _close_quietly(self.f)

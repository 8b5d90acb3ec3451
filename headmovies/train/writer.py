"""Streams snapshots into an HDF5 run file, crash-safe and readable while it grows (docs/run-file.md).

h5py's SWMR recipe: create every dataset, switch SWMR on, then per snapshot `resize`, write,
`flush`. The epoch is appended last, so a reader that sizes itself by `/snapshots/epoch`
never sees a half-written snapshot. A new file is built under `<path>.partial` and renamed
into place once it holds its first snapshot, so the final path never holds a file without one.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np

from headmovies import runfile
from headmovies.runfile import COMPLETE, EPOCH, METRICS, SNAPSHOTS, SPLIT


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


class RunWriter:
    """Appends (epoch, weights, metrics) records to an open SWMR run file.

    Use `RunWriter.create` for a new run and `RunWriter.reopen` to continue a (possibly
    killed) one. Weights are stored float32, metrics float64; both chunked along time.
    """

    def __init__(self, f: h5py.File, path: Path):
        self.f, self.path = f, path

    @classmethod
    def create(cls, path: str | os.PathLike, attrs: dict, epoch: int, weights: dict[str, np.ndarray],
               metrics: dict[str, float], split: dict[str, np.ndarray]) -> "RunWriter":
        """Create `path` holding the first snapshot. `path` must not exist (the caller removes it
        for --force). `attrs` values that are dicts are stored as JSON strings."""
        path = Path(path)
        tmp = _partial(path)
        tmp.unlink(missing_ok=True)
        f = h5py.File(tmp, "x", libver="latest")
        try:
            for key, value in attrs.items():
                f.attrs[key] = json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
            f.create_dataset(COMPLETE, shape=(1,), maxshape=(1,), chunks=(1,), dtype=np.int8)
            snaps, mets = f.create_group(SNAPSHOTS), f.create_group(METRICS)
            for name, w in weights.items():
                w = np.asarray(w, dtype=np.float32)
                snaps.create_dataset(name, shape=(0, *w.shape), maxshape=(None, *w.shape),
                                     chunks=(1, *w.shape), dtype=np.float32)
            snaps.create_dataset(EPOCH, shape=(0,), maxshape=(None,), chunks=(1024,), dtype=np.int64)
            for name in (EPOCH, *metrics):
                mets.create_dataset(name, shape=(0,), maxshape=(None,), chunks=(1024,),
                                    dtype=np.int64 if name == EPOCH else np.float64)
            grp = f.create_group(SPLIT)
            for name, idx in split.items():
                grp.create_dataset(name, data=np.asarray(idx, dtype=np.int64))
            f.swmr_mode = True
            writer = cls(f, path)
            writer.append(epoch, weights, metrics)
        except BaseException:
            f.close()
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)  # the open handle follows the inode
        return writer

    @classmethod
    def reopen(cls, path: str | os.PathLike, keep_through_epoch: int, attrs: dict | None = None) -> "RunWriter":
        """Continue a run whose checkpoint is at `keep_through_epoch`.

        A killed SWMR writer leaves HDF5's "open for write" flag set, so the file cannot be
        reopened for writing; instead every record up to `keep_through_epoch` is copied into a
        fresh `<path>.partial` which then atomically replaces `path`. Records after the
        checkpoint are dropped: the resumed run recomputes them bit for bit. `attrs` updates
        root attributes (e.g. the config when training is extended).
        """
        path = Path(path)
        tmp = _partial(path)
        tmp.unlink(missing_ok=True)
        src = runfile.open_for_reading(path)
        try:
            keep = int(np.searchsorted(src[SNAPSHOTS][EPOCH][()], keep_through_epoch, side="right"))
            keep_m = int(np.searchsorted(src[METRICS][EPOCH][()], keep_through_epoch, side="right"))
            f = h5py.File(tmp, "x", libver="latest")
            try:
                for key, value in src.attrs.items():
                    f.attrs[key] = value
                for key, value in (attrs or {}).items():
                    f.attrs[key] = value
                f.create_dataset(COMPLETE, shape=(1,), maxshape=(1,), chunks=(1,), dtype=np.int8)
                for group, n in ((SNAPSHOTS, keep), (METRICS, keep_m)):
                    g = f.create_group(group)
                    for name, ds in src[group].items():
                        new = g.create_dataset(name, shape=(n, *ds.shape[1:]), maxshape=(None, *ds.shape[1:]),
                                               chunks=ds.chunks, dtype=ds.dtype)
                        new[...] = ds[:n]
                src.copy(src[SPLIT], f, name=SPLIT)
                f.swmr_mode = True
                f.flush()
            except BaseException:
                f.close()
                tmp.unlink(missing_ok=True)
                raise
        finally:
            src.close()
        os.replace(tmp, path)
        return cls(f, path)

    def append(self, epoch: int, weights: dict[str, np.ndarray], metrics: dict[str, float]) -> None:
        """Append one snapshot and its metrics, then flush. Weights first, epoch last, with a
        flush between (one flush may reach the file in any object order)."""
        snaps, mets = self.f[SNAPSHOTS], self.f[METRICS]
        t = snaps[EPOCH].shape[0]
        for name, w in weights.items():
            ds = snaps[name]
            ds.resize(t + 1, axis=0)
            ds[t] = w
        k = mets[EPOCH].shape[0]
        for name, value in metrics.items():
            ds = mets[name]
            ds.resize(k + 1, axis=0)
            ds[k] = value
        mets[EPOCH].resize(k + 1, axis=0)
        mets[EPOCH][k] = epoch
        self.f.flush()  # the records reach the file before the epoch that announces them
        snaps[EPOCH].resize(t + 1, axis=0)
        snaps[EPOCH][t] = epoch
        self.f.flush()

    def last_epoch(self) -> int:
        ep = self.f[SNAPSHOTS][EPOCH]
        return int(ep[ep.shape[0] - 1]) if ep.shape[0] else -1

    def mark_complete(self) -> None:
        """Flag the run as finished (/complete = 1). A dataset, not an attribute: attributes
        cannot change under SWMR, and reopening the file would clash with live readers."""
        self.f[COMPLETE][0] = 1
        self.f.flush()

    def close(self) -> None:
        if self.f.id.valid:
            self.f.close()

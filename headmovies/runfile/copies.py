"""Copy a run file's records into a new one: every complete snapshot, metric record, probe record
and the split, up to an epoch (the writer's resume, `recover`'s clean copy, a fork's copy;
runfile/writer.py writes the new file around it; docs/run-file.md)."""

from __future__ import annotations

import h5py
import numpy as np

from headmovies.errors import RunFileError, plural, warn
from headmovies.runfile import probe_records, schema
from headmovies.runfile.schema import COMPLETE, EPOCH, METRICS, SNAPSHOTS, SPLIT


def copy_records(
    src: h5py.File,
    dst: h5py.File,
    keep_through_epoch: int | None = None,
    new_metrics: tuple[str, ...] = (),
    skip_damaged_epochs: bool = False,
    checksums: bool = True,
) -> int:
    """Copy root attributes, /split and every complete snapshot and metric record of `src` (up to
    and including `keep_through_epoch`, or all) into the empty file `dst`, datasets growable as
    the writer makes them; /complete is copied (all records) or cleared. `new_metrics`: metric
    names added, NaN at every record copied. `skip_damaged_epochs` (`recover`): snapshots whose
    /snapshots/epoch chunk fails its checksum are left out, with a warning naming them
    (RunFileError if no epoch can be read); otherwise they are a RunFileError. `checksums`:
    Fletcher-32 on every dataset written (the writer's CHECKSUMS). Returns the snapshot count."""
    count = schema.snapshot_count(src)  # the complete snapshots only
    if skip_damaged_epochs:
        index, epochs, lost = schema.readable_epochs(src, count)
        if lost and not len(index):
            raise RunFileError(schema.epochs_damaged(src.filename, lost, count, 0))
        if lost:
            shown = ", ".join(f"{lo + 1}" if hi == lo + 1 else f"{lo + 1}..{hi}" for lo, hi in lost)
            warn(
                f"{src.filename}: /{SNAPSHOTS}/{EPOCH} of the snapshots {shown} (of {count:,}) fails its checksum; "
                f"the copy leaves out those {plural(count - len(index), 'snapshot')}, whose epochs cannot be read"
            )
    else:
        epochs = schema.snapshot_epochs(src, count)
        index = np.arange(count)
    limit = np.inf if keep_through_epoch is None else keep_through_epoch
    keep = int(np.searchsorted(epochs, limit, side="right"))
    index = index[:keep]
    last = epochs[keep - 1] if keep else -1  # metrics only of the snapshots kept
    keep_m = int(np.searchsorted(src[METRICS][EPOCH][()], last, side="right")) if METRICS in src else 0
    for key, value in src.attrs.items():
        dst.attrs[key] = value
    done = keep_through_epoch is None and schema.is_complete(src)
    dst.create_dataset(COMPLETE, data=np.array([int(done)], np.int8), maxshape=(1,), chunks=(1,), fletcher32=checksums)
    for group, rows in ((SNAPSHOTS, index), (METRICS, np.arange(keep_m))):
        n = len(rows)
        g = dst.create_group(group)
        found: dict = {}
        if group == SNAPSHOTS and group in src:
            found = dict(src[SNAPSHOTS].items())
        elif group in src:  # nested metric names ('a/b') by their path, created so in the copy
            found = {EPOCH: src[METRICS][EPOCH], **schema.metric_datasets(src)}
        for name, ds in found.items():
            new = g.create_dataset(
                name,
                shape=(n, *ds.shape[1:]),
                maxshape=(None, *ds.shape[1:]),
                chunks=ds.chunks,
                dtype=ds.dtype,
                fletcher32=checksums,  # a file written before checksums gains them
            )
            for lo in range(0, n, 256):  # bounded memory for long runs
                sel = rows[lo : lo + 256]
                try:  # a contiguous block in one read; rows after a damaged epoch chunk one by one
                    if int(sel[-1]) - int(sel[0]) == len(sel) - 1:
                        block = ds[int(sel[0]) : int(sel[-1]) + 1]
                    else:
                        block = np.stack([ds[int(t)] for t in sel])
                except OSError as exc:
                    raise RunFileError(schema.read_error(src.filename, f"{group}/{name}", None, exc)) from None
                new[lo : lo + len(sel)] = block
    for name in new_metrics:
        dst[METRICS].create_dataset(
            name, data=np.full(keep_m, np.nan), maxshape=(None,), chunks=(1024,), dtype=np.float64, fletcher32=checksums
        )
    probe_records.copy(src, dst, keep, checksums)
    if SPLIT in src:
        src.copy(src[SPLIT], dst, name=SPLIT)
    else:
        dst.create_group(SPLIT)
    return keep

"""The run file (HDF5), the one contract between training and rendering: its format at both ends.

    schema.py      the layout, its constants, `open_for_reading`, the complete-snapshot rule
                   (`snapshot_count`) and the reads training needs (`read_snapshot`, ...)
    writer.py      `RunWriter`: streams snapshots in, crash-safe (SWMR), and the copies
                   (`clean_copy` for `recover`, `fork_copy` for forks, resume's copy)
    copies.py      `copy_records`: a run's records copied into a new file (the writer's copies)
    probe_records.py  the /probe group: each head's probe patterns and scores per snapshot
    reader.py      `Run`: epochs, metrics, config and weights per snapshot, live or finished
    lock.py        one writer per run file
    checkpoint.py  the checkpoint file beside it (`<run>.ckpt`): its path, atomic replacement,
                   reading it back (the bytes are the trainer's; standard library only)

Needs numpy and h5py only, never torch; no module outside this package imports h5py or
indexes the file's groups (tests/unit/test_layout.py). docs/run-file.md describes the format.
"""

from headmovies.runfile.schema import (
    COMPLETE,
    EPOCH,
    METRICS,
    SCHEMA_VERSION,
    SNAPSHOTS,
    SPLIT,
    is_closed_cleanly,
    is_complete,
    latest_epoch,
    library_versions,
    open_for_reading,
    read_config,
    read_snapshot,
    read_split,
    snapshot_count,
    snapshot_epochs,
    weight_names,
    weight_shapes,
)

__all__ = [
    "COMPLETE",
    "EPOCH",
    "METRICS",
    "SCHEMA_VERSION",
    "SNAPSHOTS",
    "SPLIT",
    "is_closed_cleanly",
    "is_complete",
    "latest_epoch",
    "library_versions",
    "open_for_reading",
    "read_config",
    "read_snapshot",
    "read_split",
    "snapshot_count",
    "snapshot_epochs",
    "weight_names",
    "weight_shapes",
]

"""The probe's records in a run file: the group /probe (docs/run-file.md, "The probe").

    /probe/tokens                  [B, P] int64, the probe batch (written once); its attribute
                                   `labels`, when the Recorder had `decode`: JSON [P] strings,
                                   the first sequence's tokens decoded
    /probe/scores/<name>           [T, L, H] float32, per head: previous_token, duplicate_token,
                                   induction (TransformerLens's detectors; NaN: no such head)
    /probe/patterns                [T, S, L, H, P, P] float16, the attention patterns on the
                                   first S probe sequences (query rows, key columns)
    /probe/in_context_score        [T] float32, loss on the probe's second copy minus its first

Row t is the snapshot at /snapshots/epoch[t]. The writer appends a snapshot's probe rows with
its weights, before the epoch that announces it, so the complete-snapshot rule
(`schema.snapshot_count`) covers them; a reader reads only that many rows. Chunked one row
per snapshot with Fletcher-32 checksums, like the weights. A file without /probe (recorded
without a probe, or before there was one) reads as before; readers that do not know /probe
ignore it. Needs numpy and h5py only.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import h5py
import numpy as np

from headmovies.errors import RunFileError
from headmovies.runfile import schema

PROBE = "probe"
# half a perfect head's score (1 for previous- and duplicate-token, 0.5 for induction on the
# repeated probe): at or above it a head is called strong (`headmovies heads`, `figures`)
STRONG = {"previous_token": 0.5, "duplicate_token": 0.5, "induction": 0.25}
TOKENS = "tokens"  # the one dataset without a time axis
LABELS = "labels"  # attribute of /probe/tokens: JSON list of the first sequence's decoded tokens


def nbytes(row: dict[str, np.ndarray] | None) -> int:
    """Bytes of one snapshot's probe row."""
    return sum(np.asarray(v).nbytes for v in (row or {}).values())


def create(
    f: h5py.File, row: dict[str, np.ndarray], tokens: np.ndarray, checksums: bool = True, labels: list | None = None
) -> None:
    """Create /probe in a new file (before SWMR is switched on): /probe/tokens and an empty,
    growable dataset per name of `row` (one snapshot's arrays, e.g. "scores/induction" [L, H]);
    `labels`: the first probe sequence's tokens as strings [P] (`Recorder(decode=...)`), stored
    as the JSON attribute `labels` of /probe/tokens."""
    g = f.create_group(PROBE)
    g.create_dataset(TOKENS, data=np.asarray(tokens, dtype=np.int64))
    if labels is not None:
        g[TOKENS].attrs[LABELS] = json.dumps([str(s) for s in labels])
    for name, value in row.items():
        value = np.asarray(value)
        g.create_dataset(
            name,
            shape=(0, *value.shape),
            maxshape=(None, *value.shape),
            chunks=(1, *value.shape) if value.ndim else (1024,),
            dtype=value.dtype,
            fletcher32=checksums,
        )


def append(
    f: h5py.File, t: int, row: dict[str, np.ndarray], dataset: Callable[[str], h5py.Dataset] | None = None
) -> None:
    """Write `row` as row t of each /probe dataset (the writer flushes before the epoch);
    `dataset(path)`: the dataset at a path of `f` (the writer's cache of handles), default `f[path]`."""
    get = dataset if dataset is not None else f.__getitem__
    for name, value in row.items():
        schema.append_row(get(f"{PROBE}/{name}"), t, value)


def _names(g: h5py.Group, prefix: str = "") -> list[str]:
    out = []
    for key, item in g.items():
        if isinstance(item, h5py.Group):
            out += _names(item, f"{prefix}{key}/")
        elif prefix or key != TOKENS:
            out.append(prefix + key)
    return out


def copy(src: h5py.File, dst: h5py.File, keep: int, checksums: bool = True) -> None:
    """Copy /probe of `src` into `dst` with its first `keep` rows (the snapshots kept), growable."""
    if PROBE not in src:
        return
    g = dst.create_group(PROBE)
    g.create_dataset(TOKENS, data=src[PROBE][TOKENS][()])
    for key, value in src[PROBE][TOKENS].attrs.items():
        g[TOKENS].attrs[key] = value
    for name in _names(src[PROBE]):
        ds = src[PROBE][name]
        try:
            rows = ds[:keep]
        except OSError as exc:
            raise RunFileError(schema.read_error(src.filename, f"{PROBE}/{name}", None, exc)) from None
        new = g.create_dataset(
            name,
            shape=(keep, *ds.shape[1:]),
            maxshape=(None, *ds.shape[1:]),
            chunks=ds.chunks,
            dtype=ds.dtype,
            fletcher32=checksums,
        )
        new[:keep] = rows


def has_probe(f: h5py.File) -> bool:
    return PROBE in f and TOKENS in f[PROBE]


def read_tokens(f: h5py.File) -> np.ndarray | None:
    """The probe batch [B, P] int64, or None for a file without a probe."""
    return f[PROBE][TOKENS][()] if has_probe(f) else None


def read_labels(f: h5py.File) -> list[str] | None:
    """The first probe sequence's tokens as strings [P] (`Recorder(decode=...)`), or None."""
    if not has_probe(f) or LABELS not in f[PROBE][TOKENS].attrs:
        return None
    return [str(s) for s in json.loads(f[PROBE][TOKENS].attrs[LABELS])]


def read(
    f: h5py.File, count: int, names: tuple[str, ...] | None = None, rows: slice | None = None
) -> dict[str, np.ndarray]:
    """The probe's records of the first `count` snapshots (`schema.snapshot_count`), {name:
    array [T', ...]} for `names` (default every one but the patterns), of `rows` (default all T);
    {} for a file without a probe. RunFileError naming the dataset for damaged bytes."""
    if not has_probe(f):
        return {}
    g = f[PROBE]
    wanted = names if names is not None else tuple(n for n in _names(g) if n != "patterns")
    out = {}
    for name in wanted:
        ds = g[name]
        if f.swmr_mode or f.mode == "r":
            ds.refresh()
        n = min(count, ds.shape[0])
        try:
            out[name] = ds[:n] if rows is None else ds[:n][rows]
        except OSError as exc:
            raise RunFileError(schema.read_error(f.filename, f"{PROBE}/{name}", None, exc)) from None
    return out


def read_patterns(f: h5py.File, t: int) -> np.ndarray | None:
    """The stored patterns [S, L, H, P, P] (float32) of snapshot index t, or None without a probe."""
    if not has_probe(f) or "patterns" not in f[PROBE]:
        return None
    try:
        return f[PROBE]["patterns"][t].astype(np.float32)
    except OSError as exc:
        raise RunFileError(schema.read_error(f.filename, f"{PROBE}/patterns", None, exc)) from None

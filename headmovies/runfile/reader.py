"""Read a run file (live, finished or killed): epochs, metrics, config, and weights per snapshot.

Snapshots are read as needed, never all at once, so memory stays flat in run length.
Needs only numpy and h5py (the schema is `runfile`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from headmovies.errors import RunFileError, warn
from headmovies.runfile import probe_records, schema
from headmovies.runfile.schema import EPOCH, METRICS, SNAPSHOTS


class Run:
    """An open run file. Use as a context manager.

    Attributes: path, experiment (str), config (dict), seed (int), n and m (group data or
    None), epochs (int64 [T], the complete snapshots), complete (bool, training finished).
    Raises RunFileError for a missing, corrupt or foreign file.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.f = schema.open_for_reading(self.path)
        try:
            self.experiment = str(self.f.attrs["experiment"])
            self.config = schema.read_config(self.f)
            self.seed = int(self.f.attrs["seed"])
            self.n = int(self.f.attrs["n"]) if "n" in self.f.attrs else None
            self.m = int(self.f.attrs["m"]) if "m" in self.f.attrs else None
            self.refresh()
        except RunFileError:
            self.f.close()
            raise
        except Exception as exc:
            self.f.close()
            raise RunFileError(f"{self.path} is damaged: {str(exc).splitlines()[0]}") from None

    def refresh(self) -> None:
        """Pick up snapshots appended by a live writer (SWMR): epochs first, then weights.
        Trailing snapshots with non-finite weights (a diverged run) are left out, with one
        warning line; RunFileError if no snapshot is left."""
        count = schema.snapshot_count(self.f, refresh=True)
        if count == 0:
            raise RunFileError(f"{self.path} holds no snapshot yet")
        ep = schema.snapshot_epochs(self.f, count)  # RunFileError naming a damaged chunk of them
        finite = self._finite_count(count, ep)
        if finite == 0:
            raise RunFileError(
                f"{self.path}: every snapshot holds non-finite weights (NaN or inf: training "
                "diverged at once); retrain with a lower lr or init_scale"
            )
        self.epochs = ep[:finite]
        self.complete = schema.is_complete(self.f)
        if finite < count:  # `warn` says it once per command, however often opened
            bad = ep[finite:count]
            which = (
                f"the snapshot at epoch {bad[0]} holds"
                if len(bad) == 1
                else f"the {len(bad)} snapshots at epochs {bad[0]}..{bad[-1]} hold"
            )
            warn(
                f"{self.path}: {which} non-finite weights (training diverged); using the "
                f"{finite} snapshot{'s' if finite > 1 else ''} through epoch {self.epochs[-1]}"
            )

    def _finite_count(self, count: int, epochs: np.ndarray) -> int:
        """Snapshots before the first of the trailing run of non-finite ones (only the end is
        read: a diverged run stays non-finite, and the trainer stops at its first such snapshot)."""
        t = count
        while t > 0:
            rows = []
            for n in self.weight_names:
                try:
                    rows.append(self.f[SNAPSHOTS][n][t - 1])
                except Exception as exc:
                    epoch = int(epochs[t - 1])
                    raise RunFileError(schema.read_error(self.path, f"{SNAPSHOTS}/{n}", epoch, exc)) from None
            if all(np.isfinite(r).all() for r in rows):
                break
            t -= 1
        return t

    @property
    def weight_names(self) -> list[str]:
        return schema.weight_names(self.f)

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of weight `name` in one snapshot, e.g. (n_heads, d_model, d_head) for W_Q
        (TransformerLens order); RunFileError if the run lacks it."""
        self.require(name)
        return tuple(int(d) for d in self.f[SNAPSHOTS][name].shape[1:])

    def __len__(self) -> int:
        return len(self.epochs)

    def require(self, *names: str) -> None:
        """Raise RunFileError naming the weights this run lacks."""
        missing = [n for n in names if n not in self.weight_names]
        if missing:
            raise RunFileError(
                f"{self.path} ({self.experiment}) has no weights {missing}; it holds {self.weight_names}"
            )

    def weights(self, t: int, names: list[str] | None = None) -> dict[str, np.ndarray]:
        """Weights of snapshot index t (negative counts from the end), float32 arrays by name.
        RunFileError (naming the epoch and dataset) for damaged bytes (a failed checksum) or
        non-finite weights: the trainer stops at its first non-finite snapshot, so one inside a
        run's finite snapshots means the file was changed."""
        t = range(len(self))[t]
        names = names or self.weight_names
        self.require(*names)
        return {n: self._rows(n, t, t + 1)[0] for n in names}

    def iter_weights(
        self, names: list[str] | None = None, chunk: int = 64, indices: np.ndarray | None = None
    ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """Yield (epoch, weights) for each snapshot (or the given indices), reading `chunk`
        snapshots per HDF5 call; memory is bounded by the chunk, not the run length.
        RunFileError as `weights` for a damaged or non-finite snapshot."""
        names = names or self.weight_names
        self.require(*names)
        idx = np.arange(len(self)) if indices is None else np.asarray(indices)
        for start in range(0, len(idx), chunk):
            sel = idx[start : start + chunk]
            lo, hi = int(sel.min()), int(sel.max()) + 1
            block = {n: self._rows(n, lo, hi) for n in names}
            for t in sel:
                yield int(self.epochs[t]), {n: block[n][t - lo] for n in names}

    def _rows(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Snapshots lo..hi-1 of weight `name`, checked once as they are read: every chunk's
        checksum (HDF5, files written with it) and every value finite. RunFileError naming
        the first bad snapshot's epoch and the dataset otherwise."""
        ds = self.f[SNAPSHOTS][name]
        try:
            rows = ds[lo:hi].astype(np.float32, copy=False)  # a float16 run file (Recorder(dtype=...)) too
        except Exception:
            for t in range(lo, hi):  # which snapshot: read them one by one
                try:
                    ds[t]
                except Exception as exc:
                    raise RunFileError(
                        schema.read_error(self.path, f"{SNAPSHOTS}/{name}", int(self.epochs[t]), exc)
                    ) from None
            raise RunFileError(f"{self.path}: cannot read /{SNAPSHOTS}/{name}, snapshots {lo}..{hi - 1}") from None
        finite = np.isfinite(rows.reshape(len(rows), -1)).all(axis=1)
        if not finite.all():
            epoch = int(self.epochs[lo + int(np.argmin(finite))])
            raise RunFileError(
                f"{self.path}: the snapshot at epoch {epoch} holds non-finite weights (NaN or inf) in "
                f"/{SNAPSHOTS}/{name}, though later ones are finite (the trainer never writes that: the "
                "file was changed or damaged); restore it from a copy or retrain it"
            )
        return rows

    def metrics(self) -> dict[str, np.ndarray]:
        """{'epoch': int64 [K], name: float64 [K], ...} for every logged metric, under today's
        names (`schema.RENAMED_METRICS` maps those of older files)."""
        if METRICS not in self.f:
            return {}
        g = self.f[METRICS]
        found = {EPOCH: g[EPOCH], **schema.metric_datasets(self.f)}  # nested names too ('a/b')
        for ds in found.values():
            ds.refresh()
        k = g[EPOCH].shape[0]
        out = {}
        for name, ds in found.items():
            try:
                out[schema.RENAMED_METRICS.get(name, name)] = ds[:k]
            except Exception as exc:
                raise RunFileError(schema.read_error(self.path, f"{METRICS}/{name}", None, exc)) from None
        return out

    def head_scores(self) -> dict[str, np.ndarray]:
        """Every head's probe scores at each snapshot (docs/run-file.md, "The probe"): {score name:
        float32 [T, L, H]} for previous_token, duplicate_token and induction (NaN: a head the
        layer lacks); {} for a run recorded without a probe. RunFileError for damaged bytes."""
        rows = probe_records.read(self.f, len(self))
        return {k.split("/", 1)[1]: v for k, v in rows.items() if k.startswith("scores/")}

    def in_context_scores(self) -> np.ndarray | None:
        """The probe's in-context score at each snapshot, float32 [T] (nats; NaN where the
        forward returned no logits), or None without a probe."""
        return probe_records.read(self.f, len(self)).get("in_context_score")

    def probe_tokens(self) -> np.ndarray | None:
        """The probe batch, int64 [B, P], or None for a run recorded without a probe."""
        return probe_records.read_tokens(self.f)

    def probe_labels(self) -> list[str] | None:
        """The first probe sequence's tokens as strings [P] (recorded with `Recorder(decode=...)`),
        or None."""
        return probe_records.read_labels(self.f)

    def patterns(self, t: int) -> np.ndarray | None:
        """The attention patterns [S, L, H, P, P] (float32; query rows, key columns) on the first
        S probe sequences at snapshot index t (negative counts from the end), or None."""
        return probe_records.read_patterns(self.f, range(len(self))[t])

    def split(self) -> dict[str, np.ndarray]:
        return schema.read_split(self.f)

    def provenance(self) -> dict:
        """What made this run, from its root attributes: {"created": ISO 8601 UTC or None,
        "git_commit": str ("" when unknown) or None, "versions": {library: version} or None,
        "machine": {"cpu", "cores", "system"} or None}. None: the file does not record it
        (older files, written before `machine` existed, lack it)."""

        def parsed(name: str):
            try:
                value = json.loads(self.f.attrs[name])
            except (KeyError, TypeError, ValueError):
                return None
            return value if isinstance(value, dict) else None

        def text(name: str):
            return str(self.f.attrs[name]) if name in self.f.attrs else None

        return {
            "created": text("created"),
            "git_commit": text("git_commit"),
            "versions": parsed("versions"),
            "machine": parsed("machine"),
        }

    def attrs(self) -> dict:
        """Every root attribute, JSON strings decoded (e.g. a recorded run's `group_order`,
        `adapter`, `layers`; docs/recording.md), numpy scalars as Python ones."""
        out = {}
        for key, value in self.f.attrs.items():
            if isinstance(value, bytes):
                value = value.decode()
            if isinstance(value, str) and value[:1] in "[{":
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            out[key] = value.item() if isinstance(value, np.generic) else value
        return out

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

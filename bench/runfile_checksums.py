"""The cost of the run file's per-chunk checksums (HDF5's Fletcher-32 filter, `fletcher32=True`
on every chunked dataset; docs/run-file.md, "Checksums"): writing and reading the same snapshots
with and without them, in one run.

    .venv/bin/python bench/runfile_checksums.py [--snapshots 281] [--rounds 3] [--set KEY=VALUE ...]

The snapshots are the default orbit run's weights (its config, `--set` to change it; random
values of the right shapes, 281 snapshots as the default schedule writes), appended through
`RunWriter` as training appends them (resize, write, flush per snapshot; no chunk cache), then
read back by `Run.iter_weights` as every renderer reads them. Each round writes and reads both
variants, interleaved; the best round counts. Prints seconds per snapshot and the ratios
checksums / none (1.00: no cost).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from headmovies.runfile import writer
from headmovies.runfile.reader import Run
from headmovies.runfile.writer import RunWriter
from headmovies.train import config
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.task import OrbitTask

ATTRS = {"schema_version": 1, "experiment": "orbits", "config": {}, "seed": 0, "created": "", "versions": {}}


def snapshots(sets: dict, count: int) -> list[dict[str, np.ndarray]]:
    task = OrbitTask(config.resolve(OrbitConfig, sets=sets))
    shapes = {k: np.asarray(v).shape for k, v in task.snapshot().items()}
    rng = np.random.default_rng(0)
    return [{k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()} for _ in range(count)]


def write(path: Path, snaps: list[dict[str, np.ndarray]], checksums: bool) -> float:
    writer.CHECKSUMS = checksums
    metrics = {"train_loss": 1.0, "heldout_acc": 0.5}
    t0 = time.perf_counter()
    w = RunWriter.create(path, ATTRS, 0, snaps[0], metrics, {"train": np.arange(10)})
    w.publish()
    for t, s in enumerate(snaps[1:], 1):
        w.append(10 * t, s, metrics)
    w.close()
    seconds = time.perf_counter() - t0
    writer.CHECKSUMS = True
    return seconds


def read(path: Path) -> float:
    t0 = time.perf_counter()
    with Run(path) as run:
        total = sum(float(w["W_Q"][0, 0, 0]) for _, w in run.iter_weights())
    assert np.isfinite(total)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snapshots", type=int, default=281)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    snaps = snapshots(config.parse_sets(args.sets), args.snapshots)
    mb = sum(v.nbytes for v in snaps[0].values()) / 1e6
    best: dict[tuple[str, bool], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for checksums in (True, False):
                path = Path(tmp) / f"run-{int(checksums)}-{r}.h5"
                for kind, seconds in (("write", write(path, snaps, checksums)), ("read", read(path))):
                    key = (kind, checksums)
                    best[key] = min(best.get(key, np.inf), seconds)
                size = path.stat().st_size
                path.unlink()
                best[("bytes", checksums)] = size
    print(f"{args.snapshots} snapshots of {mb:.2f} MB (float32), best of {args.rounds} rounds")
    for kind in ("write", "read"):
        on, off = best[(kind, True)], best[(kind, False)]
        per = 1e3 / args.snapshots
        print(
            f"{kind:5s}  checksums {per * on:7.3f} ms/snapshot  none {per * off:7.3f} ms/snapshot  ratio {on / off:.2f}"
        )
    print(f"file   checksums {best[('bytes', True)] / 1e6:.2f} MB   none {best[('bytes', False)] / 1e6:.2f} MB")


if __name__ == "__main__":
    main()

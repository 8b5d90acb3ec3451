"""The faults the fault tests inject, one record each: the source of the fault table in
docs/run-file.md ("Faults"), which tests/test_fault_table.py regenerates and checks.

A test that injects a fault carries `@injects("key")`; test_fault_table.py fails for a record
no test injects, for a key no record has, and for a table in the docs that differs from
`table()`. Regenerate the table with `python tests/test_fault_table.py --write`.
"""

from __future__ import annotations

from dataclasses import dataclass

TEST_FILES = ("test_faults.py", "test_faults_round2.py")


@dataclass(frozen=True)
class Fault:
    fault: str  # what goes wrong
    injected: str  # how the tests make it happen, for real
    sees: str  # what the user sees
    kept: str  # what is kept, and how to go on


FAULTS: dict[str, Fault] = {
    "kill": Fault(
        "SIGKILL of a trainer (at random points)",
        "`kill -9` of a real `train` while a reader follows the file",
        "nothing (killed); live readers never see a torn snapshot",
        "every flushed snapshot, whole; the checkpoint before; `--resume` is bit for bit",
    ),
    "sigterm": Fault(
        "Ctrl-C or SIGTERM of a trainer",
        "a real SIGTERM or SIGINT to `train`",
        '"stopping after the snapshot at epoch E", exit 130',
        "every snapshot and a checkpoint of the last; `--resume` trains nothing again",
    ),
    "disk-full-first": Fault(
        "full disk before the first snapshot",
        "a small tmpfs, filled",
        "one line, exit 2",
        "nothing at `--out` (no `.partial`)",
    ),
    "disk-full-later": Fault(
        "full disk at a later snapshot or checkpoint",
        "a small tmpfs, filled while training",
        "one line (what needs how much, what is free), exit 2",
        "whole snapshots, the old checkpoint; free space, then `--resume` (exact)",
    ),
    "disk-stays-full": Fault(
        "a disk that stays full after the free-space check (every write after the N-th fails)",
        "`strace -e inject=pwrite64:error=ENOSPC:when=N+`, and an LD_PRELOAD shim (tests/enospc_shim.c) "
        "failing write/pwrite after N calls",
        "one line naming the complete snapshots kept, exit 2 (was a segfault)",
        "every complete snapshot, whole; nothing at `--out` if the first failed; `--resume` continues",
    ),
    "disk-full-render": Fault(
        "full disk while rendering",
        "a small tmpfs, filled",
        "one line, exit 2",
        "no movie and no temporary file; figures finished before stay whole",
    ),
    "second-trainer": Fault(
        "a second trainer on the same `--out`",
        "two real `train` processes",
        "the second stops at once naming the holder (PID, host, since)",
        "the first run, untouched",
    ),
    "held-open": Fault(
        "a healthy run file held open for writing by another HDF5 process",
        "a second Python process holding `h5py.File(RUN, 'a')`, with and without HDF5_USE_FILE_LOCKING=FALSE",
        "one line: the file is open for writing in another process (no 'corrupt', no `--force`), exit 2; "
        "also from `recover` and `--resume`",
        "the file, untouched; wait for that process or stop it",
    ),
    "killed-renderer": Fault(
        "a killed renderer",
        "`kill -9` of a real `headmovies movie`",
        "nothing (killed); its ffmpeg dies with it (Linux)",
        "no movie; the next render removes the work folder",
    ),
    "killed-ffmpeg": Fault(
        "a killed ffmpeg",
        "`kill -9` of the render's ffmpeg",
        "one line naming the signal, exit 2",
        "no movie, no temporary file",
    ),
    "diverged": Fault(
        "non-finite weights at the end (a diverged run)",
        "a real divergence (a huge loss weight)",
        "one warning; the snapshots through the last finite one are drawn",
        "the run file as written",
    ),
    "nonfinite-inside": Fault(
        "non-finite weights in a snapshot inside the run",
        "NaN or inf written into one interior snapshot of a real run file",
        "one line naming the epoch and dataset from `movie`, `figures`, `view`, exit 2; no numpy warnings",
        "the run file as it is; no output file",
    ),
    "damaged-bytes": Fault(
        "damaged bytes in a run file",
        "random bytes written over one chunk's data (its offset from h5py's `get_chunk_info`) of a real run",
        "one line naming the dataset and the snapshot's epoch (a failed Fletcher-32 checksum), exit 2, from "
        "every command; the census names the run, leaves it out and exits 1",
        "no output file, no copy; the other runs of a census are counted",
    ),
    "sweep-killed": Fault(
        "SIGKILL of a local sweep",
        "`kill -9` of a real `sweep` with two pool workers",
        "nothing (killed); its workers and the resource tracker end within a few seconds",
        "each run file whole (closed at a snapshot, or as a killed run); rerun the sweep to go on",
    ),
    "ray-unreachable": Fault(
        "an unreachable Ray cluster",
        "`--address` or RAY_ADDRESS 127.0.0.1:1 (loopback, nothing listens)",
        "one line within about 2 s (a TCP connect first), exit 2",
        "nothing created",
    ),
    "gif-fps": Fault(
        "a GIF asked faster than browsers play it",
        "`--fps 100` with gif in `--formats`",
        "one line (GIF delays are in 1/100 s; at most 50 fps), exit 2",
        "nothing created",
    ),
    "bad-input": Fault(
        "bad input (options, configs, files)",
        "each case of tests/test_faults.py's table, in a fresh process too",
        "one line, exit 2, no traceback",
        "nothing created",
    ),
}

HEADER = "| fault | how it is injected | what the user sees | what is kept | tests |"


def table(counts: dict[str, int]) -> str:
    """The markdown table, one row per record in order, with `counts[key]` test functions each."""
    rows = [HEADER, "|---|---|---|---|---|"]
    for key, f in FAULTS.items():
        rows.append(f"| {f.fault} | {f.injected} | {f.sees} | {f.kept} | {counts.get(key, 0)} |")
    return "\n".join(rows) + "\n"


def injects(*keys: str):
    """Decorator: the test injects the faults `keys` (records of FAULTS)."""
    unknown = [k for k in keys if k not in FAULTS]
    if unknown:
        raise KeyError(f"no fault record {unknown}")

    def mark(test):
        test.faults = keys
        return test

    return mark

"""Fault injection (docs/run-file.md, "Faults"): full disks, concurrent writers, SIGKILLs at
random points with exact resumes and live reads, killed renderers and ffmpeg, non-finite
weights, and a table of bad inputs that each get one line, exit code 2 and create nothing.

Full disks are real: a small tmpfs mounted inside the test (we run as root here). Where mount is
not permitted, the tests fall back to an injected full disk: the free-space query reports what a
small disk would have left, and a write raises OSError(ENOSPC).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from faults import injects

import headmovies
from headmovies import disk, runfile
from headmovies.cli import main
from headmovies.errors import DiskFullError, RunFileError
from headmovies.interrupts import deferred_signals
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.runfile.writer import RunWriter

from equivariant import equivariant_run, write_run

ROOT = Path(headmovies.__file__).resolve().parents[1]  # the repository
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
TINY = {
    "p": 5,
    "n_heads": 3,
    "d_model": 8,
    "d_head": 2,
    "early_every": 10,
    "switch_epoch": 30,
    "late_every": 20,
    "seed": 0,
    "split": "random",
}
WIDE = {**TINY, "n_heads": 32, "d_model": 32}  # ~33 KB per snapshot: fills a small disk fast
KILLS = int(os.environ.get("HEADMOVIES_FAULT_KILLS", "3"))  # raise for a longer campaign


def train_argv(out, epochs, *extra, cfg=TINY, every="0", **sets):
    values = {**cfg, "epochs": epochs, **sets}
    return [
        "train",
        "orbits",
        "--out",
        str(out),
        "--no-progress",
        "--checkpoint-every",
        every,
        *sum((["--set", f"{k}={v}"] for k, v in values.items()), []),
        *extra,
    ]


def headmovies(*argv, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "headmovies", *map(str, argv)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def one_line_error(err: str, *needles: str) -> str:
    """The error is one line, the last, holding every needle (progress notes may come before)."""
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in err, err
    assert [line for line in lines if line.startswith("error")] == lines[-1:], err
    for needle in needles:
        assert needle in lines[-1], (needle, lines[-1])
    return lines[-1]


def listing(folder: Path) -> list[str]:
    """Every file and folder under `folder` (hidden ones too), relative, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def read_run(path) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(epochs [T], weights {name: [T, ...]}, metrics {name: [K]}) of the complete snapshots."""
    with runfile.open_for_reading(path) as f:
        t = min(ds.shape[0] for ds in f["snapshots"].values())
        weights = {k: f["snapshots"][k][:t] for k in runfile.weight_names(f)}
        metrics = {k: v[()] for k, v in f["metrics"].items()}
        return f["snapshots/epoch"][:t], weights, metrics


def assert_rows_match(path, ref) -> int:
    """Every complete snapshot of `path` equals the reference run's at that epoch, bit for bit
    (so no snapshot is torn, zero-filled or from another run); returns how many."""
    epochs, weights, _ = read_run(path)
    ref_epochs, ref_weights, _ = ref
    index = {int(e): i for i, e in enumerate(ref_epochs)}
    for t, epoch in enumerate(epochs):
        for k in ref_weights:
            np.testing.assert_array_equal(weights[k][t], ref_weights[k][index[int(epoch)]], err_msg=f"epoch {epoch}")
    return len(epochs)


def assert_same_run(path, ref) -> None:
    epochs, weights, metrics = read_run(path)
    np.testing.assert_array_equal(epochs, ref[0])
    for k in ref[1]:
        np.testing.assert_array_equal(weights[k], ref[1][k])
    for k in ref[2]:
        np.testing.assert_array_equal(metrics[k], ref[2][k])
    with runfile.open_for_reading(path) as f:
        assert runfile.is_complete(f)


# --- small disks -------------------------------------------------------------------------------


class SmallDisk:
    """A folder on a file system of `size` bytes: a real tmpfs when mount is permitted, else a
    plain folder whose free space is reported as what a disk of that size would have left."""

    def __init__(self, path: Path, size: int, monkeypatch):
        self.path, self.size, self.monkeypatch = path, size, monkeypatch
        path.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
        self.real = done.returncode == 0
        if not self.real:
            real_free = disk.free_bytes

            def inside(p):
                return Path(p).resolve().is_relative_to(path.resolve())

            def used():
                return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())

            monkeypatch.setattr(disk, "free_bytes", lambda p: max(0, size - used()) if inside(p) else real_free(p))

    def grow(self, size: int) -> None:
        """More room (a remount keeps the files), or the injection lifted."""
        if self.real:
            subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)
        else:
            self.monkeypatch.undo()

    def fill(self, leave: int) -> None:
        """Leave only `leave` bytes free."""
        free = disk.free_bytes(self.path)
        if free > leave:
            with open(self.path / "filler", "wb") as fh:
                fh.write(b"\0" * (free - leave))

    def unmount(self) -> None:
        if self.real:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    disks = []

    def make(size: int, name: str = "disk") -> SmallDisk:
        d = SmallDisk(tmp_path / name, size, monkeypatch)
        disks.append(d)
        return d

    yield make
    for d in disks:
        d.unmount()


@pytest.fixture(scope="module")
def wide_ref(tmp_path_factory):
    """The uninterrupted WIDE run of 1000 epochs that the full-disk runs are compared with."""
    out = tmp_path_factory.mktemp("ref") / "wide.h5"
    assert main(train_argv(out, 1000, cfg=WIDE)) == 0
    return read_run(out)


@injects("disk-full-first")
@pytest.mark.slow
def test_disk_full_before_the_first_snapshot_leaves_nothing(small_disk, capsys):
    d = small_disk(600_000)  # less than a snapshot needs with its margin
    out = d.path / "run.h5"
    assert main(train_argv(out, 60)) == 2
    one_line_error(capsys.readouterr().err, "disk full", "the first snapshot needs", f"nothing was written to {out}")
    assert listing(d.path) == []  # no run file, no .partial, no checkpoint, no lock


@injects("disk-full-later")
@pytest.mark.slow
@pytest.mark.parametrize("every, where", [("1000", "the snapshot at epoch"), ("0", "the checkpoint at epoch")])
def test_disk_full_at_a_later_snapshot_keeps_whole_snapshots_and_resumes_exactly(
    small_disk, wide_ref, capsys, every, where
):
    """2 MB fill up after ~25 snapshots, at a snapshot (checkpoints only at the ends) or at a
    checkpoint (one per snapshot). One line, exit 2; every listed snapshot is whole (equal to
    the uninterrupted run's); no .partial, .ckpt.tmp or lock is left; with room again,
    --resume ends bit for bit equal to the uninterrupted run."""
    d = small_disk(2_000_000)
    out = d.path / "run.h5"
    assert main(train_argv(out, 1000, cfg=WIDE, every=every)) == 2
    one_line_error(capsys.readouterr().err, "disk full", where, "--resume")
    assert listing(d.path) == ["run.h5", "run.h5.ckpt"]
    kept = assert_rows_match(out, wide_ref)
    assert 5 < kept < len(wide_ref[0])
    d.grow(64_000_000)
    assert main(train_argv(out, 1000, "--resume", cfg=WIDE, every=every)) == 0
    assert_same_run(out, wide_ref)


def _fill(t: int) -> dict[str, np.ndarray]:
    return {"W_Q": np.full((4, 16, 16), t + 1, np.float32), "W_K": np.full((4, 16, 16), -(t + 1), np.float32)}


ATTRS = {
    "schema_version": runfile.SCHEMA_VERSION,
    "experiment": "orbits",
    "config": {},
    "seed": 0,
    "created": "2026-01-01T00:00:00",
    "versions": {},
}


@injects("disk-full-later")
def test_a_write_that_meets_a_full_disk_keeps_every_complete_snapshot(small_disk, monkeypatch):
    """The race the space check cannot see (another process fills the disk between check and
    write): the HDF5 write itself fails. The writer stops with DiskFullError, the file lists
    only snapshots whose rows were written, and HDF5 does not crash on close."""
    d = small_disk(1_000_000)
    if d.real:
        monkeypatch.setattr(disk, "free_bytes", lambda p: 1 << 50)  # the check passes; the disk is full
    else:  # injected: the 40th row write fails
        calls = {"n": 0}
        write = h5py.Dataset.__setitem__

        def failing(self, key, value):
            calls["n"] += 1
            if calls["n"] > 80:
                raise OSError(errno.ENOSPC, "No space left on device")
            return write(self, key, value)

        monkeypatch.setattr(h5py.Dataset, "__setitem__", failing)
    out = d.path / "run.h5"
    writer = RunWriter.create(out, ATTRS, 0, _fill(0), {"loss": 0.0}, {})
    writer.publish()

    def append_until_full():
        for t in range(1, 10_000):
            writer.append(t, _fill(t), {"loss": float(t)})

    with pytest.raises(DiskFullError, match="while writing the snapshot at epoch"):
        append_until_full()
    writer.close()
    epochs, weights, metrics = read_run(out)
    assert len(epochs) > 10 and epochs.tolist() == list(range(len(epochs)))
    for t in range(len(epochs)):
        assert (weights["W_Q"][t] == t + 1).all() and (weights["W_K"][t] == -(t + 1)).all()
    assert metrics["loss"][: len(epochs)].tolist() == list(map(float, range(len(epochs))))
    assert listing(d.path) == ["run.h5"]
    # a new run on the full disk: the first snapshot's write fails, and no .partial is left
    with pytest.raises(DiskFullError, match="nothing was written"):
        RunWriter.create(d.path / "b.h5", ATTRS, 0, _fill(0), {"loss": 0.0}, {})
    assert listing(d.path) == ["run.h5"]


@pytest.fixture(scope="module")
def tiny_equi(tmp_path_factory):
    return equivariant_run(tmp_path_factory.mktemp("equi") / "equi.h5", np.arange(9) * 50, extra_heads=2)


@injects("disk-full-render")
def test_the_renderer_on_a_full_disk_says_so_and_leaves_nothing(small_disk, tiny_equi, capsys, monkeypatch):
    d = small_disk(400_000)
    d.fill(4_000)  # room to start, not for the movie
    if not d.real:  # injected: the first image written meets a full disk
        import matplotlib.figure

        import headmovies.render.core.encode as encode

        def full(*args, **kw):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(encode, "_write_png", full)
        monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full)
    out = d.path / "movie"
    assert (
        main(
            [
                "movie",
                str(tiny_equi),
                "--out",
                str(out),
                "--no-progress",
                "--formats",
                "mp4,webm,png",
                "--panels",
                "qk:0,10",
                "--panel-px",
                "220",
            ]
        )
        == 2
    )
    one_line_error(capsys.readouterr().err, "disk full", "nothing was written")
    assert listing(out) == []  # no movie, no poster, no .orbits.encoding-* folder
    figures = d.path / "figures"
    assert main(["figures", str(tiny_equi), "--out", str(figures), "--no-progress"]) == 2
    one_line_error(capsys.readouterr().err, "disk full")
    assert not [p for p in listing(figures) if p.startswith(".")]  # no temporary file left
    for p in figures.glob("*.json"):
        json.loads(p.read_text())  # what was written before the disk filled is whole


# --- one writer per run file --------------------------------------------------------------------


def _wait_for_snapshots(path: Path, count: int, proc, timeout=120.0) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, f"training ended early: {proc.stderr.read()}"
        try:
            with runfile.open_for_reading(path) as f:
                n = f["snapshots/epoch"].shape[0]
                if n >= count:
                    return n
        except RunFileError:
            pass
        time.sleep(0.02)
    raise AssertionError("no snapshots appeared")


@injects("second-trainer")
@pytest.mark.slow
def test_a_second_writer_stops_at_once_naming_the_first(tmp_path, capsys):
    out = tmp_path / "run.h5"
    first = headmovies(*train_argv(out, 100_000))
    try:
        _wait_for_snapshots(out, 3, first)
        for extra in ([], ["--force"], ["--resume"], ["--reuse"]):
            t0 = time.monotonic()
            assert main(train_argv(out, 100_000, *extra, seed=1)) == 2
            assert time.monotonic() - t0 < 5
            one_line_error(
                capsys.readouterr().err, f"{out} is being written by PID {first.pid} ", "one writer per run file"
            )
        assert not (tmp_path / "run.previous.h5").exists()  # --reuse of another config moved nothing
        assert main(["recover", str(out)]) == 2  # in place would pull the file from under the writer
        one_line_error(capsys.readouterr().err, f"PID {first.pid}", "--out CLEAN.h5")
    finally:
        first.send_signal(signal.SIGTERM)  # unwinds like Ctrl-C
        first.wait(timeout=60)
    assert first.returncode == 130
    with runfile.open_for_reading(out) as f:  # the first run's file, untouched by the others
        assert runfile.read_config(f)["seed"] == 0 and f["snapshots/epoch"].shape[0] >= 3
    import torch

    assert torch.load(checkpoint_path(out), weights_only=False)["config"]["seed"] == 0
    assert not (tmp_path / "run.h5.lock").exists() and main(train_argv(out, 60, "--force")) == 0


def _signal_arrives(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.05)  # Python runs the handler between bytecodes, soon after


def test_deferred_signals_wait_for_deliver_and_a_second_signal_does_not():
    calls = []

    def handler(signum, frame):  # stands in for the CLI's, which raises KeyboardInterrupt
        calls.append(signum)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, handler)
    try:
        with deferred_signals() as signals:
            _signal_arrives(signal.SIGTERM)  # recorded, not raised: the step goes on
            assert signals.pending.is_set() and calls == []
            with pytest.raises(KeyboardInterrupt):
                signals.deliver()  # raised where the loop chose
            assert calls == [signal.SIGTERM] and not signals.pending.is_set()
            signals.deliver()  # delivered once
            _signal_arrives(signal.SIGTERM)
            with pytest.raises(KeyboardInterrupt):  # a second one before deliver: at once
                _signal_arrives(signal.SIGTERM)
            assert calls == [signal.SIGTERM] * 2
        assert signal.getsignal(signal.SIGTERM) is handler  # restored on leaving
    finally:
        signal.signal(signal.SIGTERM, before)


@injects("sigterm")
@pytest.mark.slow
def test_sigterm_stops_training_at_the_next_snapshot_with_a_checkpoint_every_time(tmp_path, capsys):
    """A KeyboardInterrupt raised at an arbitrary bytecode of a training step was sometimes
    dropped (the process trained on; seen in CI). Now SIGTERM (as Ctrl-C) lets training run on
    to the next snapshot and checkpoint it, so --resume continues from the last snapshot."""
    import torch

    rng = random.Random(0)
    for i in range(6):
        out = tmp_path / f"run{i}.h5"
        proc = headmovies(*train_argv(out, 100_000, every="30"))  # periodic checkpoints: none yet
        try:
            _wait_for_snapshots(out, 3, proc)
            time.sleep(rng.uniform(0, 0.3))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                assert proc.wait(timeout=20) == 130, proc.stderr.read()
            finally:
                proc.kill()
        err = proc.stderr.read()
        with runfile.open_for_reading(out) as f:
            epochs = f["snapshots/epoch"][:]
        assert len(epochs) >= 3
        assert f"stopping after the snapshot at epoch {int(epochs[-1]):,}, with a checkpoint there" in err, err
        assert torch.load(checkpoint_path(out), weights_only=False)["epoch"] == epochs[-1]
    assert main(train_argv(out, int(epochs[-1]) + 20, "--resume", every="30")) == 0
    assert "trained again" not in capsys.readouterr().err  # nothing retrained


@injects("sigterm")
@pytest.mark.slow
@pytest.mark.parametrize("signal_at, stop_at, complete", [(25, 30, False), (55, 60, True)])
def test_a_signal_stops_at_the_next_snapshot_and_one_in_the_last_interval_completes_the_run(
    signal_at, stop_at, complete, tmp_path, monkeypatch, capsys
):
    """Deterministic: SIGTERM arrives during epoch `signal_at` of a 60-epoch run (snapshots
    every 10 epochs to 30, then every 20, and at 60): training stops after the next snapshot
    with its checkpoint; in the last interval the run is first marked complete."""
    import torch

    from headmovies.train.orbits.task import OrbitTask

    step = OrbitTask.step

    def step_with_signal(self, epoch):
        if epoch == signal_at:
            os.kill(os.getpid(), signal.SIGTERM)
        step(self, epoch)

    monkeypatch.setattr(OrbitTask, "step", step_with_signal)
    out = tmp_path / "run.h5"
    assert main(train_argv(out, 60, every="1000")) == 130
    assert f"stopping after the snapshot at epoch {stop_at}, with a checkpoint there" in capsys.readouterr().err
    with runfile.open_for_reading(out) as f:
        assert int(f["snapshots/epoch"][-1]) == stop_at and runfile.is_complete(f) == complete
    assert torch.load(checkpoint_path(out), weights_only=False)["epoch"] == stop_at


@pytest.mark.slow
def test_resume_after_a_kill_says_which_snapshots_it_trains_again(tmp_path, capsys):
    out = tmp_path / "run.h5"
    proc = headmovies(*train_argv(out, 100_000, every="30"))  # only the checkpoint of epoch 0
    try:
        _wait_for_snapshots(out, 3, proc)
    finally:
        proc.kill()
        proc.wait()
    with runfile.open_for_reading(out) as f:
        later = int(np.count_nonzero(f["snapshots/epoch"][:] > 0))
    assert later >= 2
    assert main(train_argv(out, 100, "--resume")) == 0
    assert (
        f"resuming {out} from its checkpoint at epoch 0: its {later} later snapshots will be trained again"
        in capsys.readouterr().err
    )


@pytest.mark.slow
def test_resume_refuses_a_checkpoint_of_another_run(tmp_path, capsys):
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    assert main(train_argv(a, 40, seed=1)) == 0 and main(train_argv(b, 40, seed=2)) == 0
    shutil.copy(checkpoint_path(a), checkpoint_path(b))  # the pair a lost race used to leave
    before = b.read_bytes()
    assert main(train_argv(b, 80, "--resume", seed=2)) == 2
    one_line_error(capsys.readouterr().err, "belongs to another run", "seed 1 vs 2", f"headmovies recover {b}")
    assert b.read_bytes() == before
    # same config, but the file's snapshot at the checkpoint epoch is not the checkpoint's model
    assert main(train_argv(b, 40, "--force", seed=2)) == 0
    with h5py.File(b, "r+") as f:  # a finished run closes cleanly: edit one weight
        f["snapshots/W_Q"][-1, 0, 0, 0] += 1
    assert main(train_argv(b, 80, "--resume", seed=2)) == 2
    one_line_error(capsys.readouterr().err, "does not hold the weights of the file's snapshot at epoch 40")


def test_a_run_without_checkpoint_names_the_command_that_recovers_it(tmp_path, capsys):
    out = tmp_path / "run.h5"
    assert main(train_argv(out, 40)) == 0
    checkpoint_path(out).unlink()  # as a kill before the first checkpoint would
    assert main(train_argv(out, 80, "--resume")) == 2
    one_line_error(capsys.readouterr().err, "checkpoint run.h5.ckpt is missing", f"headmovies recover {out}", "--force")
    assert main(train_argv(out, 80)) == 2
    one_line_error(capsys.readouterr().err, "has no checkpoint", "--force", f"headmovies recover {out} --out")
    assert main(["recover", str(out), "--out", str(tmp_path / "copy.h5")]) == 0
    assert read_run(tmp_path / "copy.h5")[0].tolist() == [0, 10, 20, 30, 40]


# --- kills --------------------------------------------------------------------------------------


@injects("kill")
@pytest.mark.slow
def test_kills_at_random_points_resume_exactly_and_live_reads_are_never_torn(tmp_path, capsys):
    """KILLS SIGKILLs at random points (after a random number of snapshots, plus a random
    fraction of a snapshot interval), each followed by --resume; meanwhile this process reads the
    live file over and over. Every read and every killed file holds only snapshots equal to
    the uninterrupted run's; the killed file opens with SWMR, not with a plain open, until
    `headmovies recover` closes it; and the last resume ends equal to the uninterrupted run."""
    from headmovies.runfile.reader import Run

    epochs = 200 * (KILLS + 2)
    ref_path = tmp_path / "ref.h5"
    assert main(train_argv(ref_path, epochs)) == 0
    ref = read_run(ref_path)
    ref_index = {int(e): i for i, e in enumerate(ref[0])}
    out = tmp_path / "run.h5"
    rng = random.Random(2026)
    kills = exact_resumes = reads = torn = 0
    for _i in range(KILLS):
        resume = out.exists()
        proc = headmovies(*train_argv(out, epochs, *(["--resume"] if resume else [])))
        start = read_run(out)[0].size if resume else 0
        have = _wait_for_snapshots(out, 1, proc) if not resume else start
        target = have + rng.randint(1, 8)
        while proc.poll() is None:  # read the live file until the kill point
            try:
                with Run(out) as run:
                    t = rng.randrange(len(run))
                    w = run.weights(t, ["W_Q", "W_O"])
                    reads += 1
                    j = ref_index[int(run.epochs[t])]
                    torn += not (
                        np.array_equal(w["W_Q"], ref[1]["W_Q"][j]) and np.array_equal(w["W_O"], ref[1]["W_O"][j])
                    )
                    if len(run) >= target:
                        break
            except RunFileError:
                pass  # replaced by the resume's copy just now
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        assert proc.poll() is None, "the run finished before the kill; raise epochs"
        proc.kill()
        proc.wait()
        kills += 1
        assert checkpoint_path(out).exists()  # the run file never exists without one
        assert assert_rows_match(out, ref) >= target
        exact_resumes += resume
        with pytest.raises(OSError, match="already open for write"):
            h5py.File(out, "r").close()
    assert main(["recover", str(out)]) == 0  # a clean, closed copy in place
    capsys.readouterr()
    h5py.File(out, "r").close()
    assert_rows_match(out, ref)
    done = headmovies(*train_argv(out, epochs, "--resume"))
    assert done.wait(timeout=300) == 0, done.stderr.read()
    assert_same_run(out, ref)
    exact_resumes += 1
    assert torn == 0 and reads > 20 and kills == KILLS
    print(f"\nkills survived {kills}, exact resumes {exact_resumes}, reads {reads}, torn reads {torn}")


# --- killed renderers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_equi(tmp_path_factory):
    """200 snapshots: a movie that takes a few seconds."""
    return equivariant_run(tmp_path_factory.mktemp("long") / "long.h5", np.arange(200) * 10, extra_heads=2)


def _encoder_of(pid: int) -> int | None:
    """The pid of the encoding ffmpeg child of `pid` (the one reading frames from a pipe), if any."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        if ppid == pid and b"pipe:" in cmdline:
            return int(stat.parent.name)
    return None


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _start_movie(run, out):
    proc = headmovies(
        "movie",
        run,
        "--out",
        out,
        "--formats",
        "mp4",
        "--panel-px",
        "220",
        "--hold",
        "0",
        "--panels",
        "qk:0,10",
        "--no-progress",
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        ffmpeg = _encoder_of(proc.pid)
        if ffmpeg:
            return proc, ffmpeg
        time.sleep(0.02)
    raise AssertionError("ffmpeg never started")


@injects("killed-renderer")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's (prctl)")
@pytest.mark.slow
def test_a_killed_renderer_takes_ffmpeg_along_and_the_next_render_cleans_up(long_equi, tmp_path):
    out = tmp_path / "movie"
    proc, ffmpeg = _start_movie(long_equi, out)
    # Hold ffmpeg's input pipe open: it then never sees end-of-file, so only the parent-death
    # signal can stop it once the renderer is gone (else it would finish the movie on EOF).
    pipe = os.open(f"/proc/{ffmpeg}/fd/0", os.O_WRONLY)
    try:
        time.sleep(0.3)
        proc.kill()
        proc.wait()
        deadline = time.time() + 10
        while not _gone(ffmpeg) and time.time() < deadline:
            time.sleep(0.02)
        assert _gone(ffmpeg), "ffmpeg outlived the renderer"
    finally:
        os.close(pipe)
    stale = [p for p in listing(out) if ".orbits.encoding-" in p and "/" not in p]
    assert len(stale) == 1  # what the killed render left behind ...
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "headmovies",
            "movie",
            str(long_equi),
            "--out",
            str(out),
            "--formats",
            "png",
            "--no-progress",
        ],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr
    assert listing(out) == ["orbits.png"]  # ... the next render into the folder removed


@injects("killed-ffmpeg")
@pytest.mark.slow
def test_a_killed_ffmpeg_is_one_line_and_leaves_nothing(long_equi, tmp_path):
    out = tmp_path / "movie"
    proc, ffmpeg = _start_movie(long_equi, out)
    os.kill(ffmpeg, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    one_line_error(err, "ffmpeg was killed by signal 9")
    assert listing(out) == []


# --- non-finite weights -------------------------------------------------------------------------


@injects("diverged")
@pytest.mark.slow
def test_a_diverged_run_is_drawn_to_its_last_finite_snapshot_with_one_warning(tmp_path, capsys):
    """A real divergence: the second phase's OV-bias weight overflows the loss after epoch 30,
    the trainer stops at the next snapshot (50), and that snapshot's weights are NaN. Every
    orbit command warns once and uses the snapshots through epoch 30 (before, they exited 0
    calling every head dead)."""
    run = tmp_path / "nan.h5"
    assert main(train_argv(run, 60, refine_start=30, refine_ov_bias_weight=1e308)) == 2
    assert "training diverged by epoch 50" in capsys.readouterr().err
    with runfile.open_for_reading(run) as f:
        assert f["snapshots/epoch"][()].tolist() == [0, 10, 20, 30, 50]
        assert np.isnan(f["snapshots/W_Q"][-1]).all()
    warning = (
        f"warning: {run}: the snapshot at epoch 50 holds non-finite weights (training diverged); "
        "using the 4 snapshots through epoch 30"
    )
    assert main(["orbits", "check", str(run), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert captured.err.strip() == warning
    assert report["epoch"] == 30 and len(report["dead"]) < 3
    assert main(["movie", str(run), "--out", str(tmp_path / "m"), "--formats", "mp4,png", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and warning in err
    assert main(["figures", str(run), "--out", str(tmp_path / "f"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and warning in err
    assert json.loads((tmp_path / "f" / "orbits.json").read_text())["epoch"] == 30
    W = {k: np.full((2, 3, 4), np.nan, np.float32) for k in ("W_Q", "W_K")}
    all_nan = write_run(tmp_path / "allnan.h5", [0], [W])
    assert main(["orbits", "check", str(all_nan)]) == 2
    one_line_error(capsys.readouterr().err, "every snapshot holds non-finite weights")


# --- bad input: one line, exit 2, nothing created ------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny finished run of each experiment family."""
    d = tmp_path_factory.mktemp("runs")
    small = ["--set", "epochs=20", "--set", "early_every=10"]
    assert (
        main(
            [
                "train",
                "orbits",
                "--out",
                str(d / "orbits.h5"),
                "--no-progress",
                *sum((["--set", f"{k}={v}"] for k, v in {**TINY, "epochs": 20}.items()), []),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "train",
                "induction-1l",
                "--out",
                str(d / "ind.h5"),
                "--no-progress",
                *small,
                "--set",
                "d_model=8",
                "--set",
                "n_heads=2",
                "--set",
                "d_head=4",
                "--set",
                "batch_size=8",
                "--set",
                "eval_size=16",
            ]
        )
        == 0
    )
    assert main(["train", "ov-coherent", "--out", str(d / "ov.h5"), "--no-progress", *small, "--set", "batch=8"]) == 0
    return d


def _ro_folder(tmp: Path) -> Path:
    """A folder nothing can be written to: a read-only tmpfs as root, chmod 555 otherwise."""
    ro = tmp / "ro"
    ro.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(ro)], check=True)
    else:
        ro.chmod(0o555)
    return ro


def _bad_inputs(tmp: Path, runs: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (argv, text the error line must hold). Files the cases need are made here."""
    orbit, ind, ov = (str(runs / n) for n in ("orbits.h5", "ind.h5", "ov.h5"))
    movie = ["movie", orbit, "--out", str(tmp / "out"), "--no-progress"]

    def train(*a):
        return train_argv(tmp / "new.h5", 20, *a)

    (tmp / "latin1.toml").write_bytes('lr = "caf\xe9"\n'.encode("latin-1"))
    (tmp / "folder.h5").mkdir()
    (tmp / "ckdir.h5.ckpt").mkdir()
    (tmp / "trunc.h5").write_bytes((runs / "orbits.h5").read_bytes())
    (tmp / "trunc.h5.ckpt").write_bytes(checkpoint_path(runs / "orbits.h5").read_bytes()[:1000])
    (tmp / "exists.h5").write_bytes(b"")
    return {
        # the movie's options, item by item
        "fps nan": (movie + ["--fps", "nan"], "--fps must be a number in (0, 120], got nan"),
        "fps inf": (movie + ["--fps", "inf"], "--fps must be a number in (0, 120], got inf"),
        "fps 0": (movie + ["--fps", "0"], "--fps must be a number in (0, 120], got 0.0"),
        "gif fps 100": (movie + ["--fps", "100"], "--fps 100 is too fast for a GIF: its frame delays count in 1/100 s"),
        "hold nan": (movie + ["--hold", "nan"], "--hold must be a number of seconds in [0, 60], got nan"),
        "hold -1": (movie + ["--hold", "-1"], "--hold must be a number of seconds in [0, 60], got -1.0"),
        "trail nan": (movie + ["--trail", "nan"], "--trail must be a number of epochs >= 0, got nan"),
        "trail -5": (movie + ["--trail", "-5"], "--trail must be a number of epochs >= 0, got -5.0"),
        "panel-px 100000": (movie + ["--panel-px", "100000"], "--panel-px must be in 220..2000, got 100000"),
        "panel-px 8": (
            movie + ["--panel-px", "8"],
            (
                "--panel-px must be in 220..2000 (below 220 the text no longer fits; "
                "to show the movie smaller, give it a smaller width in the page), got 8"
            ),
        ),
        # checked before any run is read or any file written
        "html alone": (movie + ["--formats", "html"], "the html snippet plays the mp4/webm movie"),
        "ov html without a movie": (
            ["ov-coherent", "report", ov, "--out", str(tmp / "out"), "--formats", "png,html", "--no-progress"],
            "the html snippet plays the mp4/webm movie",
        ),
        "induction html without a movie": (
            ["induction", "report", ind, "--out", str(tmp / "out"), "--formats", "png,html", "--no-progress"],
            "the html snippet plays the mp4/webm movie",
        ),
        "checkpoint-every nan": (
            train("--checkpoint-every", "nan"),
            "--checkpoint-every must be a number of seconds >= 0",
        ),
        "epochs 10**12": (train("--set", "epochs=1000000000000"), "epochs must be in 0..100,000,000"),
        "n_heads 100000": (
            train("--set", "n_heads=100000", "--set", "p=24", "--set", "d_model=128"),
            "GiB for its largest tensors (limit 16 GiB): lower p, n_heads",
        ),
        "non-UTF-8 TOML": (train("--config", str(tmp / "latin1.toml")), "is not UTF-8 text (byte 0xe9 at offset"),
        "truncated checkpoint": (
            train_argv(tmp / "trunc.h5", 40, "--resume"),
            "checkpoint " + str(tmp / "trunc.h5.ckpt") + " is damaged or truncated (PyTorch cannot load it: ",
        ),
        "--out a folder": (train_argv(tmp / "folder.h5", 20, "--force"), "is a folder; --out names the run file"),
        "checkpoint path a folder": (
            train_argv(tmp / "ckdir.h5", 20),
            f"{tmp / 'ckdir.h5.ckpt'} is a folder where {tmp / 'ckdir.h5'}'s checkpoint goes; move it",
        ),
        "formats": (movie + ["--formats", "mp4,avi"], "unknown format avi"),
        "induction fps 0": (
            ["induction", "report", ind, "--out", str(tmp / "out"), "--fps", "0", "--no-progress"],
            "--fps must be a number in (0, 120], got 0.0",
        ),
        "read-only folder": (
            ["ov-coherent", "report", ov, "--out", str(tmp / "ro"), "--no-progress"],
            "cannot write to output folder",
        ),
        "frequency outside C_n": (movie + ["--panels", "ov:100,0"], "frequencies of C_5 are 0..4"),
        # the same classes, elsewhere
        "frequency -n": (movie + ["--panels", "qk:0,-5"], "frequencies of C_5 are 0..4"),
        "figures frequency": (
            ["figures", orbit, "--out", str(tmp / "out"), "--panels", "qk:7,0", "--no-progress"],
            "frequencies of C_5 are 0..4",
        ),
        "crf": (movie + ["--crf", "99"], "--crf must be in 0..51"),
        "fps not a number": (movie + ["--fps", "fast"], "argument --fps: invalid float value: 'fast'"),
        "panel-px not an int": (movie + ["--panel-px", "1e5"], "argument --panel-px: invalid int value: '1e5'"),
        "tol nan": (["orbits", "check", orbit, "--tol", "nan"], "--tol must be in (0, 1)"),
        "figures formats": (
            ["figures", orbit, "--out", str(tmp / "out"), "--formats", "gif"],
            "--formats must be png, svg or png,svg",
        ),
        "sequences 0": (
            ["induction", "report", ind, "--out", str(tmp / "out"), "--sequences", "0"],
            "--sequences must be in 1..1000000",
        ),
        "sequences 10**9": (
            ["induction", "report", ind, "--out", str(tmp / "out"), "--sequences", "1000000000"],
            "--sequences must be in 1..1000000",
        ),
        "ov trail": (["ov-coherent", "report", ov, "--out", str(tmp / "out"), "--trail", "-1"], "--trail must be >= 0"),
        "ov fps inf": (["ov-coherent", "report", ov, "--out", str(tmp / "out"), "--fps", "inf"], "--fps must be"),
        "threads 0": (train("--threads", "0"), "--threads must be in 1..256"),
        "threads 10**6": (train("--threads", "1000000"), "--threads must be in 1..256"),
        "checkpoint-every -1": (
            train("--checkpoint-every", "-1"),
            "--checkpoint-every must be a number of seconds >= 0",
        ),
        "checkpoint-every inf": (train("--checkpoint-every", "inf"), "--checkpoint-every must be a number of seconds"),
        "seed -1": (train("--set", "seed=-1"), "seed must be in 0..2**62-1"),
        "p 300": (train("--set", "p=300"), "lower p, n_heads"),
        "late_every 0": (train("--set", "late_every=0"), "late_every must be in 1..100,000,000"),
        "snapshots 10**7": (
            train("--set", "epochs=10000000", "--set", "late_every=1"),
            "this schedule writes about 9,999,975 snapshots (limit 1,000,000)",
        ),
        "lr inf": (train("--set", "lr=inf"), "lr must be a finite number"),
        "weight_decay -1": (train("--set", "weight_decay=-1"), "weight_decay must be >= 0, got -1.0"),
        "induction pos_base 1": (
            ["train", "induction-1l", "--out", str(tmp / "new.h5"), "--set", "pos_base=1"],
            "pos_base must be > 1, got 1.0",
        ),
        "induction batch": (
            ["train", "induction-1l", "--out", str(tmp / "new.h5"), "--set", "batch_size=100000000"],
            "lower batch_size",
        ),
        "ov-coherent seq_len": (
            ["train", "ov-coherent", "--out", str(tmp / "new.h5"), "--set", "seq_len=100000000"],
            "lower batch, seq_len",
        ),
        "TOML folder": (train("--config", str(tmp)), "cannot read config file"),
        "resume and force": (train("--resume", "--force"), "--resume and --force exclude each other"),
        "reuse and force": (
            train("--reuse", "--force"),
            "--reuse chooses by itself whether to keep, continue or replace the run: give it without --force",
        ),
        "reuse and resume": (train("--reuse", "--resume", "--force"), "give it without --force or --resume"),
        "existing non-run file": (train_argv(tmp / "exists.h5", 20), "exists and is not a readable run file"),
        "recover missing": (["recover", str(tmp / "nope.h5")], "does not exist"),
        "recover onto a run": (["recover", orbit, "--out", str(runs / "ind.h5")], "exists; pass --force to replace it"),
        "recover into a folder": (["recover", orbit, "--out", str(tmp / "folder.h5")], "is a folder"),
        "recover onto its checkpoint": (
            ["recover", orbit, "--out", orbit + ".ckpt", "--force"],
            f"--out {orbit}.ckpt is {orbit}'s checkpoint file; name the copy e.g. orbits.clean.h5",
        ),
        "recover onto its lock": (
            ["recover", orbit, "--out", orbit + ".lock", "--force"],
            f"--out {orbit}.lock is {orbit}'s lock file",
        ),
        "recover into /proc": (
            ["recover", orbit, "--out", "/proc/x.h5"],
            "cannot write to output folder /proc: it is read-only, not yours or not on a disk",
        ),
        # one wording for output folders in every command (disk.check_folder)
        "train under a file": (
            train_argv(tmp / "exists.h5" / "x.h5", 20),
            f"output folder {tmp / 'exists.h5'} is a file; remove it or choose another --out",
        ),
        "view into a device": (
            ["view", orbit, "--out", "/dev/null"],
            "output folder /dev/null is a character device; choose another --out",
        ),
        "train into a missing folder": (
            train_argv(tmp / "nowhere" / "x.h5", 20),
            f"output folder {tmp / 'nowhere'} does not exist; create it first (mkdir -p",
        ),
        "recover into a missing folder": (
            ["recover", orbit, "--out", str(tmp / "nowhere" / "x.h5")],
            f"output folder {tmp / 'nowhere'} does not exist",
        ),
        "sweep under a file": (
            ["sweep", "orbits", "--out", str(tmp / "exists.h5" / "sw"), "--seeds", "0"],
            f"cannot create output folder {tmp / 'exists.h5' / 'sw'}: {tmp / 'exists.h5'} is a file",
        ),
        "report under a file": (
            ["ov-coherent", "report", ov, "--out", str(tmp / "exists.h5" / "out"), "--no-progress"],
            f"cannot create output folder {tmp / 'exists.h5' / 'out'}: {tmp / 'exists.h5'} is a file",
        ),
        "report into /proc": (
            ["ov-coherent", "report", ov, "--out", "/proc/out", "--no-progress"],
            "cannot create output folder /proc/out: /proc is not a writable folder on a disk",
        ),
        "unknown command": (["orbitz"], "invalid choice: 'orbitz'"),
        "empty --fork-from": (
            ["sweep", "orbits", "--out", str(tmp / "sw"), "--seeds", "0", "--fork-from", ""],
            "argument --fork-from: an empty path",
        ),
        "empty run path": (["orbits", "check", " "], "argument RUN: an empty path"),
    }


CASES = [
    "fps nan",
    "fps inf",
    "fps 0",
    "hold nan",
    "hold -1",
    "trail nan",
    "trail -5",
    "panel-px 100000",
    "panel-px 8",
    "html alone",
    "ov html without a movie",
    "induction html without a movie",
    "checkpoint-every nan",
    "epochs 10**12",
    "n_heads 100000",
    "non-UTF-8 TOML",
    "truncated checkpoint",
    "--out a folder",
    "formats",
    "induction fps 0",
    "read-only folder",
    "frequency outside C_n",
    "frequency -n",
    "figures frequency",
    "crf",
    "fps not a number",
    "panel-px not an int",
    "tol nan",
    "figures formats",
    "sequences 0",
    "sequences 10**9",
    "ov trail",
    "ov fps inf",
    "threads 0",
    "threads 10**6",
    "checkpoint-every -1",
    "checkpoint-every inf",
    "seed -1",
    "p 300",
    "late_every 0",
    "snapshots 10**7",
    "lr inf",
    "weight_decay -1",
    "induction pos_base 1",
    "induction batch",
    "ov-coherent seq_len",
    "TOML folder",
    "resume and force",
    "reuse and force",
    "reuse and resume",
    "existing non-run file",
    "recover missing",
    "recover onto a run",
    "recover into a folder",
    "recover onto its checkpoint",
    "recover onto its lock",
    "checkpoint path a folder",
    "recover into /proc",
    "train under a file",
    "view into a device",
    "train into a missing folder",
    "recover into a missing folder",
    "sweep under a file",
    "report under a file",
    "report into /proc",
    "unknown command",
    "empty --fork-from",
    "empty run path",
    "gif fps 100",
]


@injects("bad-input")
@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2_and_creates_nothing(case, tmp_path, runs, capsys):
    cases = _bad_inputs(tmp_path, runs)
    assert sorted(cases) == sorted(CASES)
    argv, message = cases[case]
    if case == "read-only folder":
        _ro_folder(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} | {p: p.stat().st_mtime_ns for p in runs.rglob("*")}
    try:
        with (
            pytest.raises(SystemExit)
            if case
            in ("fps not a number", "panel-px not an int", "unknown command", "empty --fork-from", "empty run path")
            else contextlib.nullcontext() as exited
        ):
            code = main(argv)
        code = exited.value.code if exited is not None else code
        assert code == 2
        one_line_error(capsys.readouterr().err, message)
        after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} | {
            p: p.stat().st_mtime_ns for p in runs.rglob("*")
        }
        assert after == before  # nothing created, nothing changed
    finally:
        if (tmp_path / "ro").is_mount():
            subprocess.run(["umount", "-l", str(tmp_path / "ro")])


@injects("bad-input")
@pytest.mark.slow
def test_bad_input_in_a_fresh_process_has_no_traceback(tmp_path):
    """The same from the shell, for one case of each kind (usage, config, file)."""
    for argv in (
        ["movie", "x.h5", "--out", "o", "--fps", "fast"],
        ["train", "orbits", "--out", str(tmp_path / "r.h5"), "--set", "epochs=1000000000000"],
        ["orbits", "check", str(tmp_path / "nope.h5")],
    ):
        proc = headmovies(*argv)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2
        one_line_error(err)
    assert listing(tmp_path) == []


def test_the_snapshot_count_bound_holds_for_every_schedule():
    """The bound `validate` checks before any schedule is built is never below the real count."""
    import itertools

    from headmovies.train.config import snapshot_count
    from headmovies.train.schedule import snapshot_epochs

    for args in itertools.product(
        [0, 1, 7, 100, 4000, 4030, 10000], [1, 3, 25], [0, 5, 4000], [1, 7, 100], [False, True]
    ):
        assert len(snapshot_epochs(*args)) <= snapshot_count(*args) <= len(snapshot_epochs(*args)) + 65, args

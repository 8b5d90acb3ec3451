"""Faults met by a new user (docs/run-file.md, "Faults"), each injected for real: a disk that
stays full (strace fault injection and a preloaded shim), non-finite weights inside a run,
damaged bytes caught by the per-chunk checksums, a run file held open by another HDF5 process,
a SIGKILLed sweep, an unreachable Ray address, a GIF too fast for browsers; and the nits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import faults
import h5py
import numpy as np
import pytest
from faults import injects
from test_faults import ENV, ROOT, TINY, assert_rows_match, one_line_error, read_run, train_argv

from headmovies import runfile
from headmovies.cli import main
from headmovies.errors import UserError, plural
from headmovies.render.core.movie_options import GIF_MAX_FPS, check_gif_fps
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.runfile.reader import Run

from equivariant import write_run

SHIM = Path(faults.__file__).with_name("enospc_shim.c")  # beside the helpers, in tests/
EPOCHS = 400  # TINY's schedule: snapshots at 0, 10, 20, 30, then every 20 epochs: 22 snapshots


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """A finished tiny run (the reference a resumed run must equal) and its records."""
    path = tmp_path_factory.mktemp("ref") / "ref.h5"
    assert main(train_argv(path, EPOCHS)) == 0
    return path, read_run(path)


def _train(out: Path, *prefix: str, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [*prefix, sys.executable, "-m", "headmovies", *train_argv(out, EPOCHS)]
    return subprocess.run(argv, cwd=ROOT, env=env or ENV, capture_output=True, text=True, timeout=300)


def _check_stays_full(proc: subprocess.CompletedProcess, out: Path, ref) -> None:
    """One line and exit 2; the file holds exactly the complete snapshots the line names (none:
    no file), each equal to the reference's; `--resume` then finishes the run bit for bit."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    line = one_line_error(proc.stderr, "disk full")
    assert "Segmentation" not in proc.stderr and not list(out.parent.glob("*.partial"))
    if "nothing was written to" in line:
        assert not out.exists()
        return
    assert f"{out} holds " in line and "--resume" in line, line
    if "complete snapshot" in line:  # the snapshot write failed: the line names what is kept
        kept = int(line.split(f"{out} holds ")[1].split(" complete snapshot")[0])
        assert assert_rows_match(out, ref) == kept
    else:  # the checkpoint write failed: every snapshot through it is kept
        assert assert_rows_match(out, ref) >= 1
    assert main([*train_argv(out, EPOCHS), "--resume"]) == 0
    np.testing.assert_array_equal(read_run(out)[0], ref[0])
    assert assert_rows_match(out, ref) == len(ref[0])


@injects("disk-stays-full")
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed (apt-get install strace)")
@pytest.mark.parametrize("after", [120, 300])
def test_a_disk_that_stays_full_under_strace_is_one_line_not_a_segfault(after, tmp_path, ref, capsys):
    """Every pwrite64 after the N-th fails with ENOSPC (strace's fault
    injection); the writer closed the failed file a second time and HDF5 segfaulted."""
    out = tmp_path / "run.h5"
    inject = ["strace", "-f", "-o", os.devnull, "-e", "trace=pwrite64"]
    proc = _train(out, *inject, "-e", f"inject=pwrite64:error=ENOSPC:when={after}+")
    if "PTRACE" in proc.stderr or "ptrace" in proc.stderr:
        pytest.skip(f"strace cannot trace here: {proc.stderr.splitlines()[0]}")
    _check_stays_full(proc, out, ref[1])


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the ENOSPC shim cannot be built")
    lib = tmp_path_factory.mktemp("shim") / "enospc_shim.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(SHIM), "-ldl"], check=True)
    return lib


@injects("disk-stays-full")
@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD shim: Linux")
@pytest.mark.parametrize("after", [30, 100, 200, 300])
def test_a_disk_that_stays_full_under_a_preloaded_shim_keeps_whole_snapshots(after, tmp_path, ref, shim):
    """The same without strace: tests/enospc_shim.c fails every write()/pwrite() to a regular file
    after the N-th, so the first snapshot, a later one, or a checkpoint meets the full disk."""
    out = tmp_path / "run.h5"
    env = {**ENV, "LD_PRELOAD": str(shim), "ENOSPC_SHIM_AFTER": str(after), "PYTHONDONTWRITEBYTECODE": "1"}
    _check_stays_full(_train(out, env=env), out, ref[1])


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def _commands(run: Path, out: Path) -> dict[str, list[str]]:
    return {
        "movie": ["movie", str(run), "--out", str(out / "m"), "--formats", "png", "--no-progress"],
        "figures": ["figures", str(run), "--out", str(out / "f"), "--no-progress"],
        "view": ["view", str(run), "--out", str(out / "v")],
    }


@injects("nonfinite-inside")
@pytest.mark.slow
@pytest.mark.parametrize("name, value", [("W_Q", np.nan), ("W_O", np.inf)])
def test_non_finite_weights_inside_a_run_stop_every_renderer_naming_epoch_and_dataset(
    name, value, tmp_path, ref, capsys
):
    run = _copy(ref[0], tmp_path / "run.h5")
    with h5py.File(run, "r+") as f:  # snapshot 2 (epoch 20) of 22; the later ones stay finite
        row = f["snapshots"][name][2]
        row.flat[3] = value
        f["snapshots"][name][2] = row
    for command, argv in _commands(run, tmp_path / "out").items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert main(argv) == 2, command
        line = one_line_error(capsys.readouterr().err, "the snapshot at epoch 20", f"/snapshots/{name}", "non-finite")
        assert "RuntimeWarning" not in line and not [w for w in caught if issubclass(w.category, RuntimeWarning)]
        assert not list((tmp_path / "out").rglob("*")), command  # no output file, no empty output folder


def _damage(path: Path, name: str, t: int) -> None:
    """Random bytes over the stored data of chunk t (snapshot t) of /snapshots/name."""
    with h5py.File(path, "r") as f:
        ds = f["snapshots"][name]
        assert ds.fletcher32  # the writer's checksums
        info = ds.id.get_chunk_info_by_coord((t,) + (0,) * (ds.ndim - 1))
    rng = np.random.default_rng(0)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset)
        old = fh.read(info.size - 4)  # the chunk's data; its last 4 bytes hold the checksum
        new = rng.bytes(len(old))
        assert new != old
        fh.seek(info.byte_offset)
        fh.write(new)


@injects("damaged-bytes")
@pytest.mark.slow
def test_damaged_bytes_fail_their_checksum_in_every_command_naming_dataset_and_epoch(tmp_path, ref, capsys):
    run = _copy(ref[0], tmp_path / "run.h5")
    _damage(run, "W_K", 2)
    epoch20 = f"{run} is damaged: /snapshots/W_K of the snapshot at epoch 20 fails its checksum"
    for command, argv in _commands(run, tmp_path / "out").items():
        assert main(argv) == 2, command
        one_line_error(capsys.readouterr().err, epoch20)
        assert not list((tmp_path / "out").rglob("*")), command
    with Run(run) as r, pytest.raises(UserError, match="fails its checksum"):
        r.weights(2)
    with Run(run) as r:  # the other snapshots read
        np.testing.assert_array_equal(r.weights(3)["W_K"], ref[1][1]["W_K"][3])
    # copies: recover, and --resume (which copies the run): one line, nothing written
    assert main(["recover", str(run), "--out", str(tmp_path / "clean.h5")]) == 2
    one_line_error(capsys.readouterr().err, f"{run} is damaged: /snapshots/W_K fails its checksum")
    assert not list(tmp_path.glob("clean.h5*"))
    _copy(checkpoint_path(ref[0]), checkpoint_path(run))
    before = run.read_bytes()
    assert main([*train_argv(run, EPOCHS + 20), "--resume"]) == 2
    one_line_error(capsys.readouterr().err, "fails its checksum")
    assert run.read_bytes() == before


def test_old_run_files_without_checksums_still_read(tmp_path):
    W = {k: np.full((2, 3, 4), float(i), np.float32) for i, k in enumerate(("W_Q", "W_K"))}
    old = write_run(tmp_path / "old.h5", [0, 10], [W, W])
    with h5py.File(old, "r") as f:
        assert not f["snapshots/W_Q"].fletcher32
    with Run(old) as r:
        assert r.weights(1)["W_K"][0, 0, 0] == 1.0 and list(r.epochs) == [0, 10]


@injects("damaged-bytes")
@pytest.mark.slow
def test_the_census_names_a_damaged_run_and_leaves_it_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sets = sum((["--set", f"{k}={v}"] for k, v in {**TINY, "epochs": 60}.items() if k != "seed"), [])
    argv = ["sweep", "orbits", "--out", "sw", "--seeds", "0-1", "--workers", "1", "--no-progress", *sets]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("sw: 2 runs done") and str(tmp_path) not in out  # the path as given
    _damage(Path("sw/seed1.h5"), "W_Q", 1)
    assert main(["orbits", "census", "sw", "--out", "census", "--no-progress", "--formats", "png"]) == 1
    err = capsys.readouterr().err
    assert "census: sw/seed1.h5 is damaged: /snapshots/W_Q of the snapshot at epoch 10 fails its checksum" in err
    assert "(left out)" in err and "Traceback" not in err and "--force" not in err
    rows = [line for line in Path("census/census.jsonl").read_text().splitlines() if line]
    assert len(rows) == 1 and '"seed":0,' in rows[0]


HOLDER = "import h5py, sys; f = h5py.File(sys.argv[1], 'a'); print('open', flush=True); sys.stdin.readline(); f.close()"


@injects("held-open")
@pytest.mark.slow
def test_a_run_file_held_open_by_another_process_is_not_called_corrupt(tmp_path, ref, capsys):
    run = _copy(ref[0], tmp_path / "run.h5")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        held = f"run file {run} is open for writing in another process (HDF5 file lock); wait for it or stop it"
        for argv in (
            ["orbits", "check", str(run)],
            ["recover", str(run)],
            ["recover", str(run), "--out", str(tmp_path / "c.h5")],
            [*train_argv(run, EPOCHS), "--resume"],
        ):
            assert main(argv) == 2, argv
            line = one_line_error(capsys.readouterr().err, held)
            assert "corrupt" not in line and "--force" not in line
        nolock = {**ENV, "HDF5_USE_FILE_LOCKING": "FALSE"}  # no lock: HDF5 sees the writer's flag (read at start)
        for argv in (["orbits", "check", str(run)], ["recover", str(run)]):
            proc = subprocess.run(
                [sys.executable, "-m", "headmovies", *argv], env=nolock, capture_output=True, text=True, timeout=120
            )
            assert proc.returncode == 2, argv
            line = one_line_error(proc.stderr, f"run file {run} is open for writing in another process")
            assert "corrupt" not in line and "--force" not in line and "h5clear -s" in line
        assert not list(tmp_path.glob("c.h5*"))
    finally:
        holder.communicate("close\n", timeout=30)
    assert holder.returncode == 0
    np.testing.assert_array_equal(read_run(run)[1]["W_Q"], ref[1][1]["W_Q"])  # untouched


def _children(pid: int) -> set[int]:
    """PIDs whose parent is `pid` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@injects("sweep-killed")
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_a_killed_sweep_takes_its_workers_and_resource_tracker_along(tmp_path):
    sets = sum((["--set", f"{k}={v}"] for k, v in {**TINY, "epochs": 50_000}.items() if k != "seed"), [])
    argv = ["sweep", "orbits", "--out", str(tmp_path / "sw"), "--seeds", "0-3", "--workers", "2", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "headmovies", *argv, *sets], cwd=ROOT, env=ENV)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "sw").glob("seed*.h5")) and time.monotonic() < deadline:  # a job trains
        time.sleep(0.2)
    assert proc.poll() is None and list((tmp_path / "sw").glob("seed*.h5"))
    children = _children(proc.pid)
    assert len(children) >= 3  # two workers and the resource tracker
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 15  # a worker's grace to close its run at a snapshot is 5 s
    while any(_alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [c for c in children if _alive(c)] == []
    for path in (tmp_path / "sw").glob("seed*.h5"):  # whole and readable
        with runfile.open_for_reading(path) as f:
            assert runfile.snapshot_count(f) >= 1


@injects("ray-unreachable")
@pytest.mark.ray
@pytest.mark.parametrize("how", ["--address", "RAY_ADDRESS"])
def test_an_unreachable_ray_address_is_one_line_within_seconds(how, tmp_path, capsys, monkeypatch):
    """Loopback only: nothing listens on 127.0.0.1:1. Ray itself retried for 20 s and more,
    printing a warning every few seconds (RAY_ADDRESS was not checked before)."""
    extra = ["--address", "127.0.0.1:1"] if how == "--address" else []
    if how == "RAY_ADDRESS":
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    t0 = time.monotonic()
    out = tmp_path / "sw"
    assert main(["sweep", "orbits", "--out", str(out), "--no-progress", "--backend", "ray", *extra]) == 2
    assert time.monotonic() - t0 < 15
    one_line_error(capsys.readouterr().err, "cannot reach a Ray cluster at 127.0.0.1:1", f"fix {how}")
    assert not out.exists()


@injects("gif-fps")
def test_a_gif_faster_than_50_fps_is_refused_and_other_formats_are_not_limited(tmp_path, capsys):
    run = write_run(tmp_path / "r.h5", [0], [{k: np.zeros((2, 3, 4), np.float32) for k in ("W_Q", "W_K")}])
    out = tmp_path / "m"
    assert main(["movie", str(run), "--out", str(out), "--fps", "100", "--no-progress"]) == 2
    one_line_error(capsys.readouterr().err, "--fps 100 is too fast for a GIF", "--fps 50 or less")
    assert not out.exists()
    check_gif_fps(("gif", "mp4"), GIF_MAX_FPS)  # 2/100 s per frame: played as asked
    check_gif_fps(("mp4", "webm"), 100.0)
    from headmovies.render.core.encode import encode

    with pytest.raises(UserError, match="fps 60 is too fast for a GIF"):
        encode(iter([]), out, "x", fps=60.0, formats=("gif",))
    assert not out.exists()


def test_nits_plural_and_symlink_loop(tmp_path, capsys):
    assert [plural(n, "snapshot") for n in (0, 1, 2, 1024)] == [
        "0 snapshots",
        "1 snapshot",
        "2 snapshots",
        "1,024 snapshots",
    ]
    loop = tmp_path / "loop.h5"
    loop.symlink_to(loop)
    assert main(["orbits", "check", str(loop)]) == 2
    one_line_error(capsys.readouterr().err, f"run file {loop} is a symlink loop")
    dangling = tmp_path / "dangling.h5"
    dangling.symlink_to(tmp_path / "gone.h5")
    assert main(["orbits", "check", str(dangling)]) == 2
    one_line_error(capsys.readouterr().err, f"run file {dangling} is a broken symlink (to {tmp_path / 'gone.h5'})")

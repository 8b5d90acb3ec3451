"""Forks (docs/sweeps.md, "Forks"): a run started from another run's snapshot at the start of
its second phase equals the run trained from scratch bit for bit; sweeps fork where a source
is there and train from scratch where not; bad sources are refused before anything is written."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from headmovies import runfile
from headmovies.cli import main as cli_main
from headmovies.errors import ConfigError, UserError
from headmovies.sweeps.sweep import sweep
from headmovies.sweeps.sweep_rows import ROWS_FILE, read_sweep_rows
from headmovies.train import config, loop
from headmovies.train.fork import ForkTooEarly
from headmovies.train.orbits.config import OrbitConfig

from test_sweep import SWEEP_SETS, assert_same_run_files

# Second phase from epoch 120 of 200; the source has neither addition, the fork both (strong
# enough to move the weights visibly in 80 epochs).
PHASES = {**SWEEP_SETS, "eq_weight": "10", "refine_start": "120", "refine_ramp": "30", "refine_eq_weight": "10"}
SEED_OBJECTIVE = {"refine_prune": "0", "refine_ov_bias_weight": "0"}
ADDITIONS = {"refine_prune": "0.99", "refine_ov_bias_weight": "1"}


def cfg(seed: int = 0, **sets) -> OrbitConfig:
    return config.resolve(OrbitConfig, sets={**PHASES, "seed": str(seed), **sets})


def weights_at(path, epoch: int) -> dict:
    with runfile.open_for_reading(path) as f:
        i = int(np.flatnonzero(f["snapshots/epoch"][()] == epoch)[0])
        return {k: f["snapshots"][k][i] for k in runfile.weight_names(f)}


@pytest.mark.slow
def test_a_fork_equals_the_run_from_scratch(tmp_path):
    src, scratch, fork = tmp_path / "src.h5", tmp_path / "scratch.h5", tmp_path / "fork.h5"
    loop.train("orbits", cfg(**SEED_OBJECTIVE), src, progress=False)
    loop.train("orbits", cfg(**ADDITIONS), scratch, progress=False)
    res = loop.train("orbits", cfg(**ADDITIONS), fork, progress=False, fork_from=src)
    assert res.epochs == 200
    assert_same_run_files(fork, scratch)
    with h5py.File(fork, "r") as f:
        assert json.loads(f.attrs["forked_from"]) == {"run": "src.h5", "epoch": 120}
        assert json.loads(f.attrs["config"]) == config.config_dict(cfg(**ADDITIONS)) and runfile.is_complete(f)
    # the same weights up to the fork, others after it: the additions act only from there
    for k, v in weights_at(src, 120).items():
        np.testing.assert_array_equal(v, weights_at(fork, 120)[k])
    W_V_src, W_V_fork = weights_at(src, 200)["W_V"], weights_at(fork, 200)["W_V"]
    assert not np.array_equal(W_V_src, W_V_fork)
    assert (np.abs(W_V_fork).reshape(3, -1).max(1) == 0).sum() == 2  # refine_prune=0.99 kept one head
    assert (np.abs(W_V_src).reshape(3, -1).max(1) > 0).all()


@pytest.mark.slow
def test_a_fork_stopped_early_resumes_bit_for_bit(tmp_path):
    src, scratch, fork = tmp_path / "src.h5", tmp_path / "scratch.h5", tmp_path / "fork.h5"
    loop.train("orbits", cfg(**SEED_OBJECTIVE), src, progress=False)
    loop.train("orbits", cfg(**ADDITIONS), scratch, progress=False)
    loop.train("orbits", cfg(**ADDITIONS), fork, progress=False, fork_from=src, stop_at=160)
    with runfile.open_for_reading(fork) as f:
        assert list(f["snapshots/epoch"][-2:]) == [120, 160] and not runfile.is_complete(f)
    loop.train("orbits", cfg(**ADDITIONS), fork, progress=False, resume=True)
    assert_same_run_files(fork, scratch)


@pytest.mark.slow
def test_bad_sources_are_refused_before_anything_is_written(tmp_path):
    src, out = tmp_path / "src.h5", tmp_path / "out.h5"
    loop.train("orbits", cfg(**SEED_OBJECTIVE), src, progress=False, stop_at=80)  # not yet at the fork
    with pytest.raises(
        ForkTooEarly,
        match=r"no snapshot at epoch 120, where this run forks \(it ends at "
        r"epoch 80\)",
    ):
        loop.train("orbits", cfg(), out, progress=False, fork_from=src)
    loop.train("orbits", cfg(**SEED_OBJECTIVE), src, progress=False, resume=True)
    with pytest.raises(ConfigError, match=r"differs in what acts before epoch 120 \(lr: 0.001 there, 0.01 here\)"):
        loop.train("orbits", cfg(lr="0.01"), out, progress=False, fork_from=src)
    with pytest.raises(ConfigError, match=r"seed: 0 there, 1 here"):
        loop.train("orbits", cfg(seed=1), out, progress=False, fork_from=src)
    with pytest.raises(UserError, match="first-phase sequence term"):
        loop.train("orbits", cfg(eq_seq_lens="3"), out, progress=False, fork_from=src)
    with pytest.raises(UserError, match="only a run with a second phase can fork"):
        loop.train("orbits", cfg(refine_start="0"), out, progress=False, fork_from=src)
    with pytest.raises(UserError, match="--stop-at 120 is not after the fork at epoch 120"):
        loop.train("orbits", cfg(), out, progress=False, fork_from=src, stop_at=120)
    with pytest.raises(
        UserError,
        match=r"would fork at epoch 100, which is not a snapshot epoch \(snapshots at 80 "
        r"and 120\)",
    ):
        loop.train("orbits", cfg(refine_start="100"), out, progress=False, fork_from=src)
    with pytest.raises(UserError, match=r"cannot fork from .*nothere\.h5: no such file"):
        loop.train("orbits", cfg(), out, progress=False, fork_from=tmp_path / "nothere.h5")
    (tmp_path / "junk.h5").write_text("not HDF5")
    with pytest.raises(UserError, match=r"cannot fork from .*junk.h5: .* is not a readable HDF5 run file[^;]*$"):
        loop.train("orbits", cfg(), out, progress=False, fork_from=tmp_path / "junk.h5")
    (tmp_path / "junk.h5").unlink()
    with pytest.raises(UserError, match="give one of them"):
        loop.train("orbits", cfg(), out, progress=False, fork_from=src, resume=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.h5", "src.h5.ckpt"]
    # an existing run is kept unless --force; a run never forks from itself
    loop.train("orbits", cfg(), out, progress=False)
    with pytest.raises(UserError, match=r"out\.h5 exists; pass --force to replace it with the fork"):
        loop.train("orbits", cfg(), out, progress=False, fork_from=src)
    with pytest.raises(UserError, match="--fork-from is the --out file"):
        loop.train("orbits", cfg(), out, progress=False, fork_from=out, force=True)
    # the command: one line, exit 2
    args = ["train", "orbits", "--out", str(tmp_path / "cli.h5"), "--fork-from", str(src), "--no-progress"]
    sets = [a for k, v in {**PHASES, "lr": "0.01"}.items() for a in ("--set", f"{k}={v}")]
    assert cli_main(args + sets) == 2 and not (tmp_path / "cli.h5").exists()


@pytest.mark.slow
def test_a_source_extended_from_fewer_epochs_is_refused(tmp_path):
    """A source first trained to 100 epochs ran its first phase's cosine to 100, not to
    refine_start = 120: its stored config (epochs=200 after --resume) hides that, the recorded
    extension and its snapshot at 100 do not."""
    src = tmp_path / "src.h5"
    loop.train("orbits", cfg(epochs="100", **SEED_OBJECTIVE), src, progress=False)
    loop.train("orbits", cfg(**SEED_OBJECTIVE), src, progress=False, resume=True)
    with h5py.File(src, "r") as f:
        assert json.loads(f.attrs["extensions"]) == [{"at": 100, "epochs_before": 100}]
    refused = "first trained to fewer epochs than 120 and then extended"
    with pytest.raises(UserError, match=refused):
        loop.train("orbits", cfg(), tmp_path / "fork.h5", progress=False, fork_from=src)
    with h5py.File(src, "r+") as f:  # a file from before extensions were recorded
        del f.attrs["extensions"]
    with pytest.raises(UserError, match=refused):
        loop.train("orbits", cfg(), tmp_path / "fork.h5", progress=False, fork_from=src)
    assert not (tmp_path / "fork.h5").exists()
    # a source trained to fewer epochs than the fork epoch, not extended
    short = tmp_path / "s100.h5"
    loop.train("orbits", cfg(epochs="100", **SEED_OBJECTIVE), short, progress=False)
    with pytest.raises(UserError, match="trained to 100 epochs, fewer than the fork epoch 120"):
        loop.train("orbits", cfg(), tmp_path / "fork.h5", progress=False, fork_from=short)


@pytest.mark.slow
def test_a_source_extended_after_the_fork_epoch_forks_and_its_extensions_stay_behind(tmp_path):
    src, scratch, fork = tmp_path / "src.h5", tmp_path / "scratch.h5", tmp_path / "fork.h5"
    loop.train("orbits", cfg(epochs="160", **SEED_OBJECTIVE), src, progress=False)
    loop.train("orbits", cfg(**SEED_OBJECTIVE), src, progress=False, resume=True)
    with h5py.File(src, "r") as f:
        assert json.loads(f.attrs["extensions"]) == [{"at": 160, "epochs_before": 160}]
    loop.train("orbits", cfg(**ADDITIONS), fork, progress=False, fork_from=src)
    loop.train("orbits", cfg(**ADDITIONS), scratch, progress=False)
    assert_same_run_files(fork, scratch)
    with h5py.File(fork, "r") as f:
        assert "extensions" not in f.attrs


@pytest.mark.slow
def test_a_sweep_forks_where_it_can(tmp_path):
    """Sources for seeds 0 and 1 (seed 1 only through epoch 80): seed 0 forks, seeds 1 and 2
    train from scratch; all three equal a sweep trained from scratch."""
    common = dict(PHASES.items())
    sweep("orbits", tmp_path / "src", seeds=[0], sets={**common, **SEED_OBJECTIVE}, workers=1, progress=False)
    sweep(
        "orbits", tmp_path / "src", seeds=[1], sets={**common, **SEED_OBJECTIVE}, workers=1, progress=False, stop_at=80
    )
    res = sweep(
        "orbits",
        tmp_path / "fork",
        seeds=[0, 1, 2],
        sets={**common, **ADDITIONS},
        workers=1,
        progress=False,
        fork_from=tmp_path / "src",
    )
    assert (res.done, res.failed, res.forked) == (3, 0, 1)
    rows = {r["run"]: r for r in read_sweep_rows(tmp_path / "fork" / ROWS_FILE)}
    assert {k: r["forked_from"] for k, r in rows.items()} == {
        "seed0": "../src/seed0.h5@120",
        "seed1": None,
        "seed2": None,
    }
    md = (tmp_path / "fork" / "summary.md").read_text()
    assert md.count("(forked at epoch 120)") == 1 and "cover only the epochs after its fork" in md
    sweep("orbits", tmp_path / "scratch", seeds=[0, 1, 2], sets={**common, **ADDITIONS}, workers=1, progress=False)
    for seed in (0, 1, 2):
        assert_same_run_files(tmp_path / "fork" / f"seed{seed}.h5", tmp_path / "scratch" / f"seed{seed}.h5")
    # a source whose first phase differs is refused up front
    with pytest.raises(ConfigError, match="differs in what acts before epoch 120"):
        sweep(
            "orbits",
            tmp_path / "other",
            seeds=[0],
            sets={**common, **ADDITIONS, "eq_weight": "1"},
            workers=1,
            progress=False,
            fork_from=tmp_path / "src",
        )
    assert not (tmp_path / "other").exists()
    with pytest.raises(UserError, match="is not a folder"):
        sweep(
            "orbits",
            tmp_path / "other",
            seeds=[0],
            sets=common,
            workers=1,
            progress=False,
            fork_from=tmp_path / "nothere",
        )


@pytest.mark.slow
def test_a_sweep_over_second_phase_keys_forks_from_the_seeds_runs(tmp_path, capsys):
    """A grid over refine_prune names its runs seed0-refine_prune0.99 etc.; they fork from the
    source sweep's seed0 (same seed, first phase alike). A forked run cut short and resumed keeps
    `forked_from` in its row."""
    sweep("orbits", tmp_path / "src", seeds=[0], sets={**PHASES, **SEED_OBJECTIVE}, workers=1, progress=False)
    sets = {**PHASES, "refine_ov_bias_weight": "0"}
    grid = [("refine_prune", ["0.25", "0.99"])]
    res = sweep(
        "orbits",
        tmp_path / "prune",
        seeds=[0],
        grid=grid,
        sets=sets,
        workers=1,
        progress=False,
        fork_from=tmp_path / "src",
        stop_at=160,
    )
    assert (res.done, res.forked) == (2, 2)
    res = sweep(
        "orbits",
        tmp_path / "prune",
        seeds=[0],
        grid=grid,
        sets=sets,
        workers=1,
        progress=False,
        fork_from=tmp_path / "src",
    )
    rows = read_sweep_rows(tmp_path / "prune" / ROWS_FILE)[-2:]
    assert [(r["run"], r["action"], r["forked_from"]) for r in rows] == [
        ("seed0-refine_prune0.25", "resume", "../src/seed0.h5@120"),
        ("seed0-refine_prune0.99", "resume", "../src/seed0.h5@120"),
    ]
    sweep("orbits", tmp_path / "scratch", seeds=[0], grid=grid, sets=sets, workers=1, progress=False)
    for name in ("seed0-refine_prune0.25", "seed0-refine_prune0.99"):
        assert_same_run_files(tmp_path / "prune" / f"{name}.h5", tmp_path / "scratch" / f"{name}.h5")
    # no source at all: a warning, and the runs train from scratch
    capsys.readouterr()
    res = sweep(
        "orbits", tmp_path / "lone", seeds=[5], sets=sets, workers=1, progress=False, fork_from=tmp_path / "src"
    )
    assert (res.done, res.forked) == (1, 0)
    assert "warning: no new run can fork" in capsys.readouterr().err
    with pytest.raises(UserError, match="--stop-at 80 is not after the fork at epoch 120"):
        sweep(
            "orbits",
            tmp_path / "early",
            seeds=[0],
            sets=sets,
            workers=1,
            progress=False,
            fork_from=tmp_path / "src",
            stop_at=80,
        )


@pytest.mark.ray
def test_a_ray_sweep_forks_from_a_relative_source_folder(tmp_path, monkeypatch):
    """Ray workers need not share the driver's working directory: the plan carries the source as
    an absolute path. The fork equals the local one bit for bit."""
    monkeypatch.chdir(tmp_path)
    sweep("orbits", "src", seeds=[0], sets={**PHASES, **SEED_OBJECTIVE}, workers=1, progress=False)
    sweep("orbits", "local", seeds=[0], sets={**PHASES, **ADDITIONS}, workers=1, progress=False, fork_from="src")
    res = sweep(
        "orbits",
        "ray",
        seeds=[0],
        sets={**PHASES, **ADDITIONS},
        backend="ray",
        workers=1,
        progress=False,
        fork_from="src",
    )
    assert (res.done, res.failed, res.forked) == (1, 0, 1)
    assert read_sweep_rows(tmp_path / "ray" / ROWS_FILE)[0]["forked_from"] == "../src/seed0.h5@120"
    assert_same_run_files(tmp_path / "ray" / "seed0.h5", tmp_path / "local" / "seed0.h5")

"""Sweeps (docs/sweeps.md): the batched orbit trainer against single runs, the batch loop's run
files, the sweep on local processes and on a real local Ray instance, resuming, the table and
census, and bad input."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from conftest import sigint_as_at_a_terminal

import headmovies
from headmovies import runfile
from headmovies.cli import main as cli_main
from headmovies.errors import RunFileError, UserError
from headmovies.render.orbits import summary as orbits_summary
from headmovies.render.orbits.check_run import run_report
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.runfile.reader import Run
from headmovies.sweeps import plan as sweep_plan
from headmovies.sweeps import sweep_outcomes
from headmovies.sweeps.folder import SETTINGS_FILE
from headmovies.sweeps.sweep import sweep
from headmovies.sweeps.sweep_rows import ROWS_FILE, latest, read_sweep_rows
from headmovies.train import config, loop
from headmovies.train.batch_loop import train_batch
from headmovies.train.orbits.batch import OrbitBatch, batch_key, max_batch
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.task import OrbitTask

from equivariant import equivariant_run

ROOT = Path(headmovies.__file__).resolve().parents[1]  # the repository
TINY = {
    "p": "5",
    "n_heads": "3",
    "d_model": "8",
    "d_head": "2",
    "early_every": "10",
    "switch_epoch": "40",
    "late_every": "40",
    "split": "random",
}
SWEEP_SETS = {**TINY, "epochs": "200", "eq_start": "20", "eq_ramp": "50"}
SWEEP_GRID = [("eq_weight", ["1", "10"])]
VOLATILE = ("seconds", "host")  # the only row fields that may differ between backends


def cfg_of(**kw) -> OrbitConfig:
    return config.resolve(OrbitConfig, sets={**TINY, **{k: str(v) for k, v in kw.items()}})


def single_run(cfg: OrbitConfig) -> OrbitTask:
    torch.manual_seed(cfg.seed)
    task = OrbitTask(cfg)
    for epoch in range(1, cfg.epochs + 1):
        task.step(epoch)
    return task


def assert_same_run_files(a: Path, b: Path) -> None:
    """Every snapshot, metric and split dataset equal bit for bit."""
    with runfile.open_for_reading(a) as fa, runfile.open_for_reading(b) as fb:
        for group in (runfile.SNAPSHOTS, runfile.METRICS, runfile.SPLIT):
            assert sorted(fa[group]) == sorted(fb[group])
            for name in fa[group]:
                np.testing.assert_array_equal(fa[group][name][()], fb[group][name][()], err_msg=f"{group}/{name}")
        assert runfile.is_complete(fa) and runfile.is_complete(fb)


def rows_by_run(out: Path) -> dict[str, dict]:
    rows = read_sweep_rows(out / ROWS_FILE)
    return {r["run"]: {k: v for k, v in r.items() if k not in VOLATILE} for r in rows}


# --- the batched orbit trainer ----------------------------------------------------------------------

TWO_PHASE = dict(
    epochs=40,
    refine_start=20,
    eq_start=5,
    eq_ramp=10,
    refine_ramp=10,
    eq_seq_lens="3,4",
    refine_seq_lens="5",
    eq_seq_batch=4,
)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.slow
def test_batched_instances_equal_their_single_runs_bit_for_bit(residual):
    """Three instances differing in seed, init, split, every loss weight and ramp, and pruning,
    over a two-phase run with the sequence term: each equals its own single run bit for bit
    (weights, AdamW state, generator). B = 1 too."""
    per_instance = [
        dict(seed=0, eq_weight=1, eq_start=0, refine_prune=0, ov_bias_weight=0, init_scale=1, split="random"),
        dict(seed=1, eq_weight=10, eq_start=5, refine_prune=0.25, ov_bias_weight=0.01, init_scale=0.5, split="orbit"),
        dict(seed=7, eq_weight=3, eq_start=15, refine_prune=0.5, ov_bias_weight=0.1, init_scale=2, train_frac=0.5),
    ]
    cfgs = [cfg_of(**{**TWO_PHASE, **kw, "residual": residual}) for kw in per_instance]
    singles = [single_run(cfg) for cfg in cfgs]
    for group in ([0, 1, 2], [1]):
        batch = OrbitBatch([cfgs[i] for i in group])
        for epoch in range(1, cfgs[0].epochs + 1):
            batch.step(epoch)
        for i, k in enumerate(group):
            single, view = singles[k], batch.sync(i)
            for name, w in single.model.state_dict().items():
                assert torch.equal(w, view.model.state_dict()[name]), (cfgs[k].seed, name)
            assert str(single.optimizer.state_dict()) == str(view.optimizer.state_dict())
            assert torch.equal(single.generator.get_state(), view.generator.get_state())
            assert single.evaluate() == view.evaluate(), cfgs[k]


def test_batch_key_and_size():
    """Instances may differ in loss weights and seeds, not in shapes or the optimizer's schedule;
    the default 32 heads of C_24 are too large for batching to pay on a CPU."""
    assert batch_key(cfg_of(seed=1, eq_weight=3)) == batch_key(cfg_of(seed=2, eq_weight=30))
    assert batch_key(cfg_of(lr=1e-3)) != batch_key(cfg_of(lr=3e-4))
    assert batch_key(cfg_of(n_heads=3)) != batch_key(cfg_of(n_heads=4))
    with pytest.raises(ValueError, match="a batch needs one or more configs that agree on"):
        OrbitBatch([cfg_of(lr=1e-3), cfg_of(lr=3e-4)])
    assert max_batch(OrbitConfig()) == 1
    assert max_batch(cfg_of(p=12, n_heads=8)) == 2**18 // (8 * 12**3) == 18
    assert max_batch(cfg_of(p=8, n_heads=4)) == 32


@pytest.mark.slow
def test_batch_loop_writes_the_run_files_and_checkpoints_of_single_runs(tmp_path):
    """train_batch's run files equal loop.train's bit for bit (snapshots, metrics, split) and so do
    their checkpoints (model, AdamW state, generator, global RNG): each resumes as a single run."""
    cfgs = [cfg_of(seed=s, epochs=40, eq_start=0, eq_seq_lens="3") for s in (0, 1)]
    results = train_batch("orbits", cfgs, [tmp_path / f"b{s}.h5" for s in (0, 1)])
    assert [r.epochs for r in results] == [40, 40]
    for s, cfg in zip((0, 1), cfgs):
        loop.train("orbits", cfg, tmp_path / f"s{s}.h5", progress=False)
        assert_same_run_files(tmp_path / f"b{s}.h5", tmp_path / f"s{s}.h5")
        a, b = (torch.load(checkpoint_path(tmp_path / f"{k}{s}.h5"), weights_only=False) for k in "bs")
        assert a["epoch"] == b["epoch"] == 40 and a["config"] == b["config"]
        assert torch.equal(a["torch_rng"], b["torch_rng"])
        assert torch.equal(a["task"]["generator"], b["task"]["generator"])
        assert all(torch.equal(a["task"]["model"][k], b["task"]["model"][k]) for k in b["task"]["model"])
        assert str(a["task"]["optimizer"]) == str(b["task"]["optimizer"])
    with h5py.File(tmp_path / "b0.h5", "r") as f:
        assert f.attrs["experiment"] == "orbits" and json.loads(f.attrs["config"])["seed"] == 0


def test_a_diverging_instance_stops_alone(tmp_path):
    cfgs = [cfg_of(seed=0, epochs=30), cfg_of(seed=0, epochs=30, ov_bias_weight=1e308)]
    ok, bad = train_batch("orbits", cfgs, [tmp_path / "ok.h5", tmp_path / "bad.h5"])
    assert isinstance(bad, UserError) and str(bad).startswith("training diverged by epoch 10 (")
    assert ok.metrics["train_acc"] > 0
    loop.train("orbits", cfgs[0], tmp_path / "single.h5", progress=False)
    assert_same_run_files(tmp_path / "ok.h5", tmp_path / "single.h5")
    with runfile.open_for_reading(tmp_path / "bad.h5") as f:
        assert list(f["snapshots/epoch"][()]) == [0, 10] and not runfile.is_complete(f)


# --- plan, names, parsing --------------------------------------------------------------------------


def test_seeds_grid_and_run_names():
    assert sweep_plan.parse_seeds("0-3,10") == [0, 1, 2, 3, 10]
    assert sweep_plan.parse_seeds("5") == [5] and sweep_plan.parse_seeds("3,1,3") == [1, 3]
    assert sweep_plan.parse_grid(["eq_weight=1,10", "eq_seq_lens=3;2,4"]) == [
        ("eq_weight", ["1", "10"]),
        ("eq_seq_lens", ["3", "2,4"]),
    ]
    assert sweep_plan.run_name(3, {"eq_weight": 10.0}) == "seed3-eq_weight10"
    assert (
        sweep_plan.run_name(0, {"lr": 0.0003, "split": "orbit", "residual": True, "eq_seq_lens": "2,4"})
        == "seed0-lr0.0003-splitorbit-residualtrue-eq_seq_lens2_4"
    )
    assert sweep_plan.run_name(1, {}) == "seed1"


def test_plan_and_jobs(tmp_path):
    plan = sweep_plan.make_plan(
        "orbits", tmp_path / "sw", [0, 1, 2], [("eq_weight", ["1", "10"])], {"p": "5", "n_heads": "3", "d_model": "8"}
    )
    assert [r.name for r in plan.runs] == [f"seed{s}-eq_weight{w}" for w in (1, 10) for s in (0, 1, 2)]
    assert {r.action for r in plan.runs} == {"new"} and plan.settings == {"p": 5, "n_heads": 3, "d_model": 8}
    assert plan.runs[4].cfg.eq_weight == 10.0 and plan.runs[4].cfg.seed == 1
    assert not (tmp_path / "sw").exists()  # planning creates nothing
    jobs = sweep_plan.make_jobs(plan, workers=2)  # 6 batchable runs over 2 workers: 2 x 3
    assert [len(j.runs) for j in jobs] == [3, 3] and all(j.batched for j in jobs)
    assert [len(j.runs) for j in sweep_plan.make_jobs(plan, workers=2, batch=2)] == [2, 2, 2]
    assert [len(j.runs) for j in sweep_plan.make_jobs(plan, workers=8, batch=1)] == [1] * 6
    big = sweep_plan.make_plan("orbits", tmp_path / "sw", [0, 1], [], {})  # the default model: one run per job
    assert [j.batched for j in sweep_plan.make_jobs(big, workers=1)] == [False, False]
    # a lever that batched training does not implement: every run alone, even with --batch
    lever = sweep_plan.make_plan(
        "orbits", tmp_path / "sw", [0, 1, 2], [], {"p": "5", "n_heads": "3", "frozen_embed": "true", "d_model": "10"}
    )
    assert [(len(j.runs), j.batched) for j in sweep_plan.make_jobs(lever, workers=1, batch=3)] == [(1, False)] * 3
    # one it does (score_scale, qk_decay): batched
    lever = sweep_plan.make_plan(
        "orbits", tmp_path / "sw", [0, 1, 2], [], {"p": "5", "n_heads": "3", "qk_decay": "false", "score_scale": "2"}
    )
    assert [(len(j.runs), j.batched) for j in sweep_plan.make_jobs(lever, workers=1, batch=3)] == [(3, True)]


# --- the sweep -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")  # trains a sweep: every test that uses it is marked slow
def local_sweep(tmp_path_factory):
    """2 seeds x eq_weight 1, 10 on 2 local worker processes (batches of 2)."""
    out = tmp_path_factory.mktemp("sweep") / "local"
    res = sweep("orbits", out, seeds=[0, 1], grid=SWEEP_GRID, sets=SWEEP_SETS, workers=2, progress=False)
    return out, res


@pytest.mark.slow
def test_local_sweep_rows_files_and_report(local_sweep):
    out, res = local_sweep
    assert (res.done, res.failed, res.skipped) == (4, 0, 0)
    rows = read_sweep_rows(out / ROWS_FILE)
    assert sorted(r["run"] for r in rows) == [
        "seed0-eq_weight1",
        "seed0-eq_weight10",
        "seed1-eq_weight1",
        "seed1-eq_weight10",
    ]
    for row in rows:
        assert row["status"] == "done" and row["error"] is None and row["batch"] == 2 and row["action"] == "new"
        assert row["config"]["eq_weight"] == row["grid"]["eq_weight"] and row["config"]["seed"] == row["seed"]
        with Run(out / row["file"]) as run:  # an ordinary run file: the orbit check reads it
            assert run.complete and int(run.epochs[-1]) == 200
            assert row["metrics"] == {k: float(v[-1]) for k, v in run.metrics().items() if k != "epoch"}
            report = run_report(run)
            assert row["summary"]["nontrivial"] == [o.size for o in report.orbits if o.size > 1]
            assert row["summary"] == json.loads(json.dumps(orbits_summary.sweep_summary(run)))
    assert json.loads((out / SETTINGS_FILE).read_text()) == {
        "experiment": "orbits",
        "settings": {k: config.resolve(OrbitConfig, sets=SWEEP_SETS).__dict__[k] for k in SWEEP_SETS},
    }
    md = (out / "summary.md").read_text()
    assert "| eq_weight=1 | 0–1 | 2 | 0 |" in md and "| eq_weight=10 | 0–1 | 2 | 0 |" in md
    assert (out / "census.png").stat().st_size > 5000 and (out / "census.svg").exists()


@pytest.mark.slow
def test_rerun_skips_complete_runs_and_a_bigger_grid_adds_only_new_runs(local_sweep, tmp_path):
    out, _ = local_sweep
    again = sweep("orbits", out, seeds=[0, 1], grid=SWEEP_GRID, sets=SWEEP_SETS, workers=2, progress=False)
    assert (again.done, again.failed, again.skipped) == (0, 0, 4)
    assert len(read_sweep_rows(out / ROWS_FILE)) == 4
    # A complete run without a row (killed between training and recording) is recorded, not retrained.
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("seed0-eq_weight1.h5", SETTINGS_FILE):
        (copy / name).write_bytes((out / name).read_bytes())
    mtime = (copy / "seed0-eq_weight1.h5").stat().st_mtime_ns
    plan = sweep_plan.make_plan("orbits", copy, [0], [("eq_weight", ["1"])], SWEEP_SETS)
    assert [r.action for r in plan.runs] == ["record"]
    # A bigger grid: the 2 new runs only, one of them diverging (recorded, the sweep goes on).
    grown = sweep(
        "orbits", out, seeds=[0], grid=[("eq_weight", ["1", "10", "1e308"])], sets=SWEEP_SETS, workers=1, progress=False
    )
    assert (grown.done, grown.failed, grown.skipped) == (0, 1, 2)
    rows = read_sweep_rows(out / ROWS_FILE)
    assert len(rows) == 5 and rows[-1]["run"] == "seed0-eq_weight1e+308"
    assert rows[-1]["status"] == "failed" and rows[-1]["error"].startswith("training diverged by epoch 30 (")
    assert "\n" not in rows[-1]["error"] and rows[-1]["metrics"] is None
    sweep("orbits", copy, seeds=[0], grid=[("eq_weight", ["1"])], sets=SWEEP_SETS, workers=1, progress=False)
    assert (copy / "seed0-eq_weight1.h5").stat().st_mtime_ns == mtime
    assert [r["action"] for r in read_sweep_rows(copy / ROWS_FILE)] == ["record"]
    assert "| eq_weight=1e+308 | 0 | 0 | 1 | — |" in (out / "summary.md").read_text()


def _wait_for_snapshots(path: Path, count: int, proc, timeout: float = 60) -> None:
    end = time.time() + timeout
    while time.time() < end and proc.poll() is None:
        try:
            with runfile.open_for_reading(path) as f:
                if f[runfile.SNAPSHOTS][runfile.EPOCH].shape[0] >= count:
                    return
        except RunFileError:
            pass
        time.sleep(0.02)
    raise AssertionError("no snapshots appeared")


@pytest.mark.slow
def test_a_killed_run_is_resumed_and_ends_equal_to_an_uninterrupted_one(tmp_path):
    """A run killed mid-way (SIGKILL) in the sweep's folder: the rerun resumes it from its
    checkpoint, and it ends equal, bit for bit, to the same run trained in one go."""
    out = tmp_path / "sw"
    out.mkdir()
    sets = {**SWEEP_SETS, "epochs": "300"}
    run = out / "seed1-eq_weight10.h5"
    argv = [
        sys.executable,
        "-m",
        "headmovies",
        "train",
        "orbits",
        "--out",
        str(run),
        "--checkpoint-every",
        "0",
        "--no-progress",
    ] + [a for k, v in {**sets, "seed": "1", "eq_weight": "10"}.items() for a in ("--set", f"{k}={v}")]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_snapshots(run, 3, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    plan = sweep_plan.make_plan("orbits", out, [1], [("eq_weight", ["10"])], sets)
    assert plan.runs[0].action == "resume"
    res = sweep("orbits", out, seeds=[1], grid=[("eq_weight", ["10"])], sets=sets, workers=1, progress=False)
    assert res.done == 1 and read_sweep_rows(out / ROWS_FILE)[0]["action"] == "resume"
    loop.train("orbits", plan.runs[0].cfg, tmp_path / "whole.h5", progress=False)
    assert_same_run_files(run, tmp_path / "whole.h5")


@pytest.mark.slow
def test_ctrl_c_stops_a_batched_sweep_between_epochs_and_the_rerun_resumes(tmp_path):
    """SIGINT (Ctrl-C) to a sweep training two runs as one batch in its own process: it exits
    130 within seconds, both runs stop at a snapshot with its checkpoint, and the same command
    resumes both."""
    out = tmp_path / "sw"
    sets = {**SWEEP_SETS, "epochs": "100000"}
    argv = [
        sys.executable,
        "-m",
        "headmovies",
        "sweep",
        "orbits",
        "--out",
        str(out),
        "--seeds",
        "0-1",
        "--workers",
        "1",
        "--no-progress",
    ] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=sigint_as_at_a_terminal,
    )
    try:
        for seed in (0, 1):
            _wait_for_snapshots(out / f"seed{seed}.h5", 4, proc)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(timeout=20) == 130, proc.stderr.read()
        finally:
            proc.kill()
    plan = sweep_plan.make_plan("orbits", out, [0, 1], [], sets)
    assert [r.action for r in plan.runs] == ["resume", "resume"]
    for seed in (0, 1):
        with runfile.open_for_reading(out / f"seed{seed}.h5") as f:
            epochs = f["snapshots/epoch"][:]
        assert len(epochs) >= 4  # stopped at a snapshot, with its checkpoint: nothing to retrain
        assert torch.load(checkpoint_path(out / f"seed{seed}.h5"), weights_only=False)["epoch"] == epochs[-1]


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_stops_a_two_worker_sweep_without_tracebacks(tmp_path):
    """Ctrl-C in a terminal reaches the whole process group: the sweep and its spawned workers.
    Each worker stops its run at a snapshot; none prints a traceback (a worker waiting for a job
    ignores Ctrl-C, the parent stops it)."""
    out = tmp_path / "sw"
    sets = {**SWEEP_SETS, "epochs": "100000"}
    argv = [
        sys.executable,
        "-m",
        "headmovies",
        "sweep",
        "orbits",
        "--out",
        str(out),
        "--seeds",
        "0-1",
        "--workers",
        "2",
        "--batch",
        "1",
        "--no-progress",
    ] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=sigint_as_at_a_terminal,
    )
    try:
        for seed in (0, 1):
            _wait_for_snapshots(out / f"seed{seed}.h5", 3, proc)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            err = proc.communicate(timeout=30)[1]
        finally:
            proc.kill()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "interrupted: no run finished; rerun the same command to resume"
    assert err.count("stopping after the snapshot at epoch") == 2


@pytest.mark.ray
def test_ray_sweep_equals_the_local_one(local_sweep, tmp_path):
    """The same sweep as Ray tasks on a real local Ray instance: the same rows (but wall time and
    host) and the same weights, bit for bit."""
    import ray

    out = tmp_path / "ray"
    res = sweep("orbits", out, seeds=[0, 1], grid=SWEEP_GRID, sets=SWEEP_SETS, backend="ray", workers=2, progress=False)
    assert (res.done, res.failed) == (4, 0) and not ray.is_initialized()
    local = rows_by_run(local_sweep[0])
    assert rows_by_run(out) == {k: v for k, v in local.items() if k in rows_by_run(out)} and len(local) >= 4
    for name in rows_by_run(out):
        assert_same_run_files(out / f"{name}.h5", local_sweep[0] / f"{name}.h5")


# --- table and census ------------------------------------------------------------------------------


def _row(run, seed, grid, outcome=None, acc=None, error=None):
    return {
        "run": run,
        "seed": seed,
        "grid": grid,
        "status": "failed" if error else "done",
        "error": error,
        "metrics": None if error else {"train_acc": acc},
        "summary": None if error else {"outcome": outcome},
        "seconds": 4.0,
        "batch": 2,
    }


def test_summary_and_census_count_outcomes_per_config():
    rows = [
        _row("a0", 0, {"eq_weight": 1.0}, "none", 0.5),
        _row("a1", 1, {"eq_weight": 1.0}, "4+2", 1.0),
        _row("a2", 2, {"eq_weight": 1.0}, error="boom"),
        _row("b0", 0, {"eq_weight": 10.0}, "none", 0.25),
        _row("b1", 1, {"eq_weight": 10.0}, "none", 0.75),
        _row("a2", 2, {"eq_weight": 1.0}, "none", 0.0),
    ]
    last = latest(rows)
    assert [r["run"] for r in last] == ["a0", "a1", "a2", "b0", "b1"] and last[2]["status"] == "done"
    md = sweep_outcomes.summary_markdown(rows, "orbits", "orbit structure", {"epochs": 2000})
    assert "| eq_weight=1 | 0–2 | 3 | 0 | none ×2, 4+2 ×1 | 50.0% [0.0%, 100.0%] | 2 |" in md
    assert "| eq_weight=10 | 0–1 | 2 | 0 | none ×2 | 50.0% [25.0%, 75.0%] | 2 |" in md
    assert "Fixed settings: epochs=2000" in md
    fig = sweep_outcomes.outcome_figure(rows[:5], "orbits", "orbit structure")
    ax = fig.axes[0]
    widths = {(c.get_label(), round(p.get_y() + p.get_height() / 2)): p.get_width() for c in ax.containers for p in c}
    # bars from the top: eq_weight=1 at y = 1, eq_weight=10 at y = 0
    assert widths == {("none", 1): 1, ("none", 0): 2, ("4+2", 1): 1, ("4+2", 0): 0, ("failed", 1): 1, ("failed", 0): 0}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["eq_weight=1", "eq_weight=10"]
    assert sweep_outcomes.seeds_text([0, 1, 2, 3, 7, 9, 10]) == "0–3, 7, 9–10"


def test_orbit_sweep_summary_of_a_known_layer(tmp_path):
    """An exactly equivariant layer with orbits of 12 and 4 heads and 2 heads in none."""
    path = equivariant_run(tmp_path / "eq.h5", [0, 100, 200], orbit_sizes=(12, 4), extra_heads=2)
    with Run(path) as run:
        s = orbits_summary.sweep_summary(run)
    assert s["outcome"] == "12+4" and s["nontrivial"] == [12, 4] and s["epoch"] == 200
    assert s["n_dead"] == 0 and sum(s["groups"].values()) == 18 and all(isinstance(k, str) for k in s["groups"])
    # the 12-orbit sits at w = 8 (order 3: four triangles), the 4-orbit at w = 12 (two pairs), both exact
    assert orbits_summary.spectrum_detail(s) == "ω = 8, 12 heads: < 1e-6; ω = 12, 4 heads: < 1e-6"


def test_the_orbit_sweep_table_gives_each_run_s_largest_frequency_groups():
    brief = [
        {"omega": 6, "heads": 4, "low": 0.00093, "high": None},
        {"omega": 2, "heads": 12, "low": 0.018, "high": 0.74},
        {"omega": 9, "heads": 12, "low": 0.012, "high": None},  # no finite k >= 4 part: left out
        {"omega": 5, "heads": 3, "low": 0.5, "high": 0.25},
    ]
    detail = orbits_summary.spectrum_detail
    assert (
        detail({"spectrum": brief}) == "ω = 2, 12 heads: 0.018 / 0.74; ω = 9, 12 heads: 0.012; ω = 6, 4 heads: 0.00093"
    )
    assert detail({"spectrum": []}) == "no group of 2 or more heads" and detail({"outcome": "none"}) == ""
    rows = [_row("a0", 0, {}, "none", 0.5), _row("a1", 1, {}, error="boom")]
    rows[0]["summary"]["spectrum"] = brief[:1]
    md = sweep_outcomes.summary_markdown(rows, "orbits", "orbit structure", {}, detail, orbits_summary.SWEEP_DETAIL)
    assert "| run | seed | status | outcome | largest frequency groups | train_acc |" in md
    assert "| a0 | 0 | done | none | ω = 6, 4 heads: 0.00093 | 50.0% |" in md
    assert "| a1 | 1 | failed | failed |  | — | 4.0 | 2 | boom |" in md
    assert "Largest frequency groups: the three largest frequency groups of 2 or more heads" in md
    assert "largest frequency groups" not in sweep_outcomes.summary_markdown(rows, "orbits", "orbit structure", {})
    # a row stopped early (--stop-at) gives its groups; a row written before 'spectrum' an empty cell;
    # a '|' in an error message is escaped, so the row keeps its 9 cells
    rows += [_row("a2", 2, {}, "4", 0.25), _row("a3", 3, {}, "none", 0.75), _row("a4", 4, {}, error="bad a|b")]
    rows[2]["status"], rows[2]["summary"]["spectrum"] = "stopped", brief[1:2]
    md = sweep_outcomes.summary_markdown(rows, "orbits", "orbit structure", {}, detail, orbits_summary.SWEEP_DETAIL)
    assert "| a2 | 2 | stopped | 4 | ω = 2, 12 heads: 0.018 / 0.74 | 25.0% |" in md
    assert "| a3 | 3 | done | none |  | 75.0% |" in md
    assert "| a4 | 4 | failed | failed |  | — | 4.0 | 2 | bad a\\|b |" in md


# --- bad input -------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--grid", "eq_weight="], "error: --grid eq_weight has an empty value list"),
        (["--grid", "bogus=1,2"], "error: unknown config key 'bogus' in --grid"),
        (["--set", "bogus=1"], "error: unknown config key 'bogus'"),
        (["--seeds", "a-b"], "error: --seeds takes non-negative integers and ranges"),
        (["--seeds", "0-99999999999"], "error: --seeds 0-99999999999 asks for more than 1,000,000 seeds"),
        (["--seeds", "0,3,4611686018427387904"], "error: --seeds 0,3,4611686018427387904 asks for more than"),
        (
            ["--grid", "split=orbit,diagonal"],
            "error: split must be one of ('random', 'orbit'), got 'diagonal' (grid point split=diagonal)",
        ),
        (["--workers", "0"], "error: --workers must be >= 1, got 0"),
        pytest.param(
            ["--backend", "ray", "--address", "127.0.0.1:{port}"],
            "error: cannot reach a Ray cluster at 127.0.0.1:{port} (",
            marks=pytest.mark.ray,
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys, args, message):
    port = _closed_port()
    args = [a.format(port=port) for a in args]
    out = tmp_path / "sweep"
    assert cli_main(["sweep", "orbits", "--out", str(out), "--no-progress"] + args) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(port=port)) and err.count("\n") == 1
    assert not out.exists()


def test_ray_backend_without_ray_says_how_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # how Python marks a module as absent
    out = tmp_path / "sweep"
    assert cli_main(["sweep", "orbits", "--out", str(out), "--backend", "ray"]) == 2
    assert capsys.readouterr().err == "error: --backend ray needs Ray, an optional extra: pip install -e .[ray]\n"
    assert not out.exists()


@pytest.mark.slow
def test_a_folder_of_another_sweep_is_refused(local_sweep, capsys):
    out, _ = local_sweep
    before = sorted(os.listdir(out))
    assert cli_main(["sweep", "orbits", "--out", str(out), "--seeds", "0", "--set", "epochs=500"]) == 2
    err = capsys.readouterr().err
    assert "holds a sweep of orbits with other fixed settings (d_head=2 there, (unset) here, " in err
    assert "epochs=200 there, 500 here" in err and err.count("\n") == 1
    assert sorted(os.listdir(out)) == before


@pytest.mark.slow
def test_a_finished_run_of_another_config_is_never_replaced(local_sweep, tmp_path, capsys):
    """When the defaults change under a sweep (here: the sweep no longer fixes eq_ramp, so the
    default 2000 applies), a rerun refuses to retrain its finished runs and names the key."""
    out, _ = local_sweep
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "seed0-eq_weight1.h5").write_bytes((out / "seed0-eq_weight1.h5").read_bytes())
    sets = {k: v for k, v in SWEEP_SETS.items() if k != "eq_ramp"}
    before = (copy / "seed0-eq_weight1.h5").read_bytes()
    args = ["sweep", "orbits", "--out", str(copy), "--seeds", "0", "--grid", "eq_weight=1", "--no-progress"]
    assert cli_main(args + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "was trained with eq_ramp=50 (this sweep: 2000)" in err and "--set eq_ramp=50" in err
    assert (copy / "seed0-eq_weight1.h5").read_bytes() == before
    assert not (copy / ROWS_FILE).exists()


@pytest.mark.slow
def test_settings_that_name_an_old_default_continue_the_sweep(local_sweep, tmp_path):
    """A sweep started without --set eq_ramp=50 when 50 was the default (its sweep.json omits
    the key) continues under `--set eq_ramp=50`: the run files have exactly that config, so the
    runs are skipped and sweep.json now names the value; another value is still refused."""
    out, _ = local_sweep
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in out.iterdir():  # the four runs of SWEEP_GRID (an earlier test may have grown the sweep)
        if f.suffix in (".jsonl", ".json") or f.name in {f"seed{s}-eq_weight{w}.h5" for s in (0, 1) for w in (1, 10)}:
            (copy / f.name).write_bytes(f.read_bytes())
    old = {k: v for k, v in json.loads((out / SETTINGS_FILE).read_text())["settings"].items() if k != "eq_ramp"}
    (copy / SETTINGS_FILE).write_text(json.dumps({"experiment": "orbits", "settings": old}))
    sets = {k: v for k, v in SWEEP_SETS.items() if k != "eq_ramp"}
    again = sweep("orbits", copy, seeds=[0, 1], grid=SWEEP_GRID, sets=SWEEP_SETS, workers=1, progress=False)
    assert (again.done, again.failed, again.skipped) == (0, 0, 4)
    assert json.loads((copy / SETTINGS_FILE).read_text())["settings"]["eq_ramp"] == 50
    with pytest.raises(UserError, match=r"seed0-eq_weight1.h5 was trained with eq_ramp=50 \(this sweep: 60\)"):
        sweep_plan.make_plan("orbits", copy, [0], SWEEP_GRID, {**SWEEP_SETS, "eq_ramp": "60"})
    # a grid over the fixed key does not make the old runs (eq_ramp 50) runs of this sweep
    with pytest.raises(UserError, match=r"other fixed settings \(eq_ramp=50 there, \(unset\) here\)"):
        sweep_plan.make_plan("orbits", copy, [0], SWEEP_GRID + [("eq_ramp", ["60"])], sets)


@pytest.mark.parametrize(
    "experiment, sets",
    [
        ("induction-1l", {"epochs": "20", "early_every": "10", "batch_size": "16", "eval_size": "32"}),
        ("ov-coherent", {"epochs": "20", "seq_len": "6", "batch": "16", "early_every": "10"}),
    ],
)
@pytest.mark.slow
def test_other_experiments_sweep_with_their_own_summaries(tmp_path, experiment, sets):
    """Experiments without a batched trainer sweep one run per job; their rows carry the summary
    their render package computes from the run file (`summary.sweep_summary`)."""
    from headmovies.render.induction import analysis as ind
    from headmovies.render.induction import summary as ind_summary
    from headmovies.render.ov_coherent import analysis as ovc
    from headmovies.render.ov_coherent import summary as ovc_summary
    from headmovies.tasks.ov_coherent import WEIGHT_NAMES, task_cases

    res = sweep(experiment, tmp_path / "sw", seeds=[0], sets=sets, workers=1, progress=False)
    assert (res.done, res.failed) == (1, 0)
    for row in read_sweep_rows(tmp_path / "sw" / ROWS_FILE):
        with Run(tmp_path / "sw" / row["file"]) as run:
            if experiment == "ov-coherent":
                full = ovc.analyse(run.weights(-1, WEIGHT_NAMES), task_cases(6))
                assert row["summary"]["acc"] == full.acc and row["summary"]["opposite"] == full.opposite
                assert row["summary"]["outcome"] == ovc_summary.outcome(full)
            else:
                full = ind.analyse(run)
                assert row["summary"]["accuracy"] == full.accuracy
                assert row["summary"]["block_length_accuracy"] == full.block_length_accuracy
                assert row["summary"]["copying"] == {r["circuit"]: r["copying"] for r in full.copying}
                assert row["summary"]["outcome"] == ind_summary.outcome(full.accuracy, full.block_length_accuracy, 6)
    assert (tmp_path / "sw" / "census.png").exists()


def test_induction_and_ov_coherent_outcomes():
    from headmovies.render.induction.summary import outcome as ind_outcome
    from headmovies.render.ov_coherent.analysis import Analysis
    from headmovies.render.ov_coherent.summary import outcome as ovc_outcome

    def ov_result(acc, opposite, kendall_tau):
        return Analysis(acc, [], acc, True, 2, 1, [], opposite, kendall_tau, [], [], 1.0, 1.0)

    assert ind_outcome(1.0, {"4": 0.95, "5": 0.97, "6": 1.0, "7": 0.93, "8": 0.9}, 6) == "induction"
    assert ind_outcome(1.0, {"4": 0.09, "5": 0.1, "6": 1.0, "7": 0.09, "8": 0.1}, 6) == "trained length only"
    assert ind_outcome(0.2, {"4": 0.2, "5": 0.2, "6": 0.2, "7": 0.2, "8": 0.2}, 6) == "not learned"
    assert ovc_outcome(ov_result(1.0, True, -1.0)) == "opposite"
    assert ovc_outcome(ov_result(1.0, False, -0.4)) == "opposed (τ < 0)"
    assert ovc_outcome(ov_result(1.0, False, 0.0)) == "not opposed"
    assert ovc_outcome(ov_result(1.0, None, None)) == "solved"
    assert ovc_outcome(ov_result(0.875, True, -1.0)) == "not solved"


# --- an early screen: --stop-at, then continue the chosen runs ------------------------------------------


@pytest.mark.slow
def test_a_screen_stopped_early_continues_bit_for_bit(local_sweep, tmp_path, capsys):
    """`sweep --stop-at 120` trains each run's own schedule (epochs=200) through epoch 120 and
    records it as stopped; a rerun with --stop-at keeps it; a rerun without it continues the
    chosen seed, whose file then equals the uninterrupted run's bit for bit."""
    full, _ = local_sweep
    out = tmp_path / "screen"
    sets = {**SWEEP_SETS, "eq_weight": "10"}
    res = sweep("orbits", out, seeds=[0, 1], sets=sets, workers=1, progress=False, stop_at=120)
    assert (res.done, res.failed) == (2, 0)
    rows = read_sweep_rows(out / ROWS_FILE)
    assert [(r["run"], r["status"], r["summary"]["epoch"], r["batch"]) for r in rows] == [
        ("seed0", "stopped", 120, 1),
        ("seed1", "stopped", 120, 1),
    ]
    with Run(out / "seed0.h5") as run:
        assert not run.complete and int(run.epochs[-1]) == 120
    assert "2 runs: 0 done, 2 stopped early" in (out / "summary.md").read_text()
    again = sweep("orbits", out, seeds=[0, 1], sets=sets, workers=1, progress=False, stop_at=120)
    assert (again.done, again.skipped) == (0, 2)
    # an earlier --stop-at than the runs' is refused up front, nothing recorded
    with pytest.raises(UserError, match=r"seed0\.h5 was stopped at epoch 120, past --stop-at 80: rerun with"):
        sweep("orbits", out, seeds=[0, 1], sets=sets, workers=1, progress=False, stop_at=80)
    assert len(read_sweep_rows(out / ROWS_FILE)) == 2
    # a rows line cut short by a kill: the next row still gets a line of its own
    with open(out / ROWS_FILE, "a") as fh:
        fh.write('{"run": "seed7", "sta')
    # census: a screen alone lists its runs and draws nothing
    assert cli_main(["orbits", "census", str(out), "--out", str(tmp_path / "census"), "--no-progress"]) == 0
    md = (tmp_path / "census" / "census.md").read_text()
    assert "- **screen**: 2 runs stopped at epoch 120;" in md and not (tmp_path / "census" / "census.png").exists()
    # continue seed 0 only, with the command census.md gives
    line = next(ln.strip() for ln in md.splitlines() if ln.strip().startswith("headmovies sweep orbits --out"))
    args = line.replace("PATH/TO/screen", str(out)).replace("SEEDS", "0").split()[1:]
    assert cli_main(args + ["--workers", "1", "--no-progress"]) == 0
    assert len(read_sweep_rows(out / ROWS_FILE)) == 3
    last = read_sweep_rows(out / ROWS_FILE)[-1]
    assert (last["run"], last["status"], last["action"], last["summary"]["epoch"]) == ("seed0", "done", "resume", 200)
    assert_same_run_files(out / "seed0.h5", full / "seed0-eq_weight10.h5")


def test_stop_at_must_be_a_snapshot_epoch(tmp_path, capsys):
    out = tmp_path / "run.h5"
    sets = [x for k, v in SWEEP_SETS.items() for x in ("--set", f"{k}={v}")]
    assert cli_main(["train", "orbits", "--out", str(out), *sets, "--stop-at", "105", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "error: --stop-at 105 is not a snapshot epoch of this run; the snapshots around it are at epochs 80 and 120\n"
    )
    assert not out.exists()
    assert cli_main(["sweep", "orbits", "--out", str(tmp_path / "s"), *sets, "--stop-at", "300"]) == 2
    assert (
        capsys.readouterr().err == "error: --stop-at must be a snapshot epoch in 1..200 (the run's epochs), got 300\n"
    )
    assert not (tmp_path / "s").exists()
    no_epochs = [x for k, v in SWEEP_SETS.items() if k != "epochs" for x in ("--set", f"{k}={v}")]
    assert (
        cli_main(
            [
                "sweep",
                "orbits",
                "--out",
                str(tmp_path / "s"),
                *no_epochs,
                "--grid",
                "epochs=200,240",
                "--stop-at",
                "240",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.endswith("got 240 (grid point epochs=200)\n")


def test_progress_counts_epochs_from_the_run_files_before_a_run_ends(tmp_path):
    """The bar's total is the epochs the runs still train; it moves as a live run file grows
    (read from the file, not from finished rows), and a run counts in full when it ends."""
    from headmovies.runfile.writer import RunWriter
    from headmovies.sweeps.progress import EpochProgress

    plan = sweep_plan.make_plan("orbits", tmp_path / "sw", seeds=[0, 1], grid=[], sets={**TINY, "epochs": "200"})
    assert [r.action for r in plan.todo] == ["new", "new"]
    progress = EpochProgress(plan.todo)
    assert progress.total == 400 and progress.done == 0
    first = plan.todo[0]
    attrs = {"schema_version": runfile.SCHEMA_VERSION, "experiment": "orbits", "config": {"epochs": 200}, "seed": 0}
    attrs |= {"created": "2026-01-01T00:00:00", "versions": {}}
    w = {"W_Q": np.zeros((3, 8, 2), np.float32)}
    first.path.parent.mkdir(parents=True, exist_ok=True)
    writer = RunWriter.create(first.path, attrs, 0, w, {"eq_error": 0.1}, {"train": np.arange(3)})
    writer.publish()
    try:
        for epoch in (10, 20, 30):
            writer.append(epoch, w, {"eq_error": 0.1})
        progress.poll()  # the run is live: 30 of its 200 epochs
        assert progress.done == 30 and progress.newest[first.name] == 30
        writer.append(40, w, {"eq_error": 0.1})
        progress.poll()
        assert progress.done == 40
    finally:
        writer.close()
    progress.finished(first.name)
    progress.finished(plan.todo[1].name, ok=False)
    assert progress.done == 400 and progress.failed == 1


@pytest.mark.slow
def test_sweep_bar_moves_with_epochs_while_its_run_trains(tmp_path, capsys, monkeypatch):
    from headmovies.sweeps import progress as sweep_progress

    monkeypatch.setattr(sweep_progress, "POLL_S", 0.2)  # read the run file often: this run takes a few seconds
    sets = {**TINY, "epochs": "1200", "eq_start": "20", "eq_ramp": "50"}
    res = sweep("orbits", tmp_path / "sw", seeds=[0], grid=[], sets=sets, workers=1, progress=True)
    assert res.done == 1
    err = capsys.readouterr().err
    # an update while the run was training (before its row): some epochs counted, none finished
    moving = [line for line in err.replace("\r", "\n").splitlines() if "runs done 0" in line and "training" in line]
    assert moving, err[-2000:]
    assert "1.20k/1.20k" in err  # the total: 1 run x 1,200 epochs

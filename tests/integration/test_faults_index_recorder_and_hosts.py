"""Faults, round three (docs/run-file.md, "Faults"), each injected for real: damaged bytes in the
/snapshots/epoch chunk of a real run file, metric names HDF5 cannot hold and values out of
range, a real TransformerLens model changing under the Recorder, a non-finite first loss, a
closed Recorder, too large a group, real named pipes (mkfifo), TOML configs a new user writes,
requests to `orbits watch` naming another Host, and a killed HDF5 writer that did not use SWMR.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from faults import injects
from test_faults import ENV, ROOT, TINY, one_line_error, train_argv
from test_faults_files_and_workers import _damage, ref  # noqa: F401  (`ref`: the finished tiny run, a fixture)
from torch import nn

import headmovies
from headmovies.cli import main
from headmovies.errors import ConfigError, ModelError, RunFileError, UserError
from headmovies.runfile.checkpoint import checkpoint_path
from headmovies.runfile.reader import Run
from headmovies.runfile.writer import RunWriter

torch.set_num_threads(1)
EPOCHS = 400  # the `ref` run's: 23 snapshots


def _copy(src: Path, dst: Path, checkpoint: bool = True) -> Path:
    shutil.copyfile(src, dst)
    if checkpoint:
        shutil.copyfile(checkpoint_path(src), checkpoint_path(dst))
    return dst


def _readers(run: Path, out: Path) -> dict[str, list[str]]:
    return {
        "check": ["orbits", "check", str(run)],
        "movie": ["orbits", "movie", str(run), "--out", str(out / "m"), "--formats", "png", "--no-progress"],
        "figures": ["orbits", "figures", str(run), "--out", str(out / "f"), "--no-progress"],
        "view": ["orbits", "view", str(run), "--out", str(out / "v")],
        "movie (any run)": ["movie", str(run), "--out", str(out / "g"), "--formats", "png"],
    }


# --- 1. damaged bytes in /snapshots/epoch --------------------------------------------------------


@injects("damaged-epochs")
@pytest.mark.slow
def test_a_damaged_epoch_chunk_is_one_line_naming_dataset_snapshots_and_checksum_everywhere(tmp_path, ref, capsys):  # noqa: F811
    """The run's epochs (23) share one chunk: damaged, no snapshot's epoch can be read. Every
    reader, `recover` and `--resume` say so in one line; nothing is written or changed."""
    run = _copy(ref[0], tmp_path / "run.h5")
    _damage(run, "epoch", 0)
    n = len(ref[1][0])
    line = f"{run} is damaged: /snapshots/epoch of the snapshots 1..{n} (of {n}) fails its checksum"
    for command, argv in _readers(run, tmp_path / "out").items():
        assert main(argv) == 2, command
        one_line_error(capsys.readouterr().err, line, "no snapshot's epoch can be read")
        assert not list((tmp_path / "out").rglob("*")), command
    before = run.read_bytes()
    for argv in (["recover", str(run), "--out", str(tmp_path / "clean.h5")], ["recover", str(run)]):
        assert main(argv) == 2, argv
        one_line_error(capsys.readouterr().err, line, "none can be kept")
    assert not list(tmp_path.glob("clean.h5*"))
    assert main([*train_argv(run, EPOCHS + 20), "--resume"]) == 2
    one_line_error(capsys.readouterr().err, line)
    assert run.read_bytes() == before
    with pytest.raises(RunFileError, match=f"/snapshots/epoch of the snapshots 1..{n} .* fails its checksum"):
        Run(run)


def _long_run(path: Path, count: int = 1100) -> Path:
    """A real run file of `count` snapshots (two chunks of /snapshots/epoch: 1,024 epochs each),
    written by the trainers' RunWriter: snapshot t at epoch 10 t, W_Q filled with t."""
    attrs = {"schema_version": 1, "experiment": "recorded", "config": "{}", "seed": 0, "created": "-", "versions": "{}"}

    def w(t):
        return {"W_Q": np.full((2, 3, 4), t, np.float32), "W_K": np.full((2, 3, 4), -t, np.float32)}

    writer = RunWriter.create(path, attrs, 0, w(0), {"loss": 0.0}, {})
    writer.publish()
    for t in range(1, count):
        writer.append(10 * t, w(t), {"loss": float(t)})
    writer.close()
    return path


@injects("damaged-epochs")
@pytest.mark.slow
@pytest.mark.parametrize("chunk, kept", [(0, range(1024, 1100)), (1, range(1024))])
def test_recover_keeps_every_snapshot_whose_epoch_can_still_be_read(chunk, kept, tmp_path, capsys):
    src = _long_run(tmp_path / "long.h5")
    run = _copy(src, tmp_path / "run.h5", checkpoint=False)
    _damage(run, "epoch", chunk * 1024)
    lost = "1..1024" if chunk == 0 else "1025..1100"
    with pytest.raises(RunFileError, match=f"of the snapshots {lost} \\(of 1,100\\) fails its checksum"):
        Run(run)
    before = run.read_bytes()
    assert main(["recover", str(run)]) == 2  # in place would drop snapshots: only into a copy
    one_line_error(capsys.readouterr().err, f"recover {run} --out COPY.h5` keeps the other {len(kept):,} snapshots")
    assert run.read_bytes() == before
    assert main(["recover", str(run), "--out", str(tmp_path / "clean.h5")]) == 0
    err = capsys.readouterr().err
    assert f"the copy leaves out those {1100 - len(kept):,} snapshots" in err and "Traceback" not in err
    with Run(tmp_path / "clean.h5") as r:
        np.testing.assert_array_equal(r.epochs, 10 * np.arange(kept.start, kept.stop))
        for t in (0, len(kept) - 1):
            assert r.weights(t)["W_Q"][0, 0, 0] == kept[t] and r.weights(t)["W_K"][1, 2, 3] == -kept[t]
        assert len(r.metrics()["loss"]) == 1100 if chunk == 0 else 1024  # the metric records through the last kept


@injects("damaged-epochs")
@pytest.mark.slow
def test_resuming_a_recording_whose_epochs_are_damaged_is_one_line(tmp_path):
    path = tmp_path / "rec.h5"
    model = nn.MultiheadAttention(8, 2)
    with headmovies.Recorder(path, model, schedule=range(5)) as rec:
        for epoch in range(5):
            rec.step(epoch, train_loss=1.0 / (epoch + 1))
    _damage(path, "epoch", 0)
    before = path.read_bytes()
    with pytest.raises(RunFileError, match=r"/snapshots/epoch of the snapshots 1\.\.5 \(of 5\) fails its checksum"):
        headmovies.Recorder(path, model, resume=True)
    assert path.read_bytes() == before and not list(tmp_path.glob("*.lock"))


# --- 2, 3, 5, 6, 7: the Recorder's inputs --------------------------------------------------------


def _tl(d_vocab: int = 7):
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=1, d_model=8, d_head=4, n_heads=2, d_vocab=d_vocab, n_ctx=3, attn_only=True, seed=0
    )  # fmt: skip
    return HookedTransformer(cfg)


@injects("unsafe-metric-names")
def test_metric_names_hdf5_cannot_hold_are_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "run.h5"
    rec = headmovies.Recorder(path, nn.MultiheadAttention(8, 2), schedule=[0, 1, 2])
    rec.step(0, train_loss=1.0)
    for name in ("loss/train", "epoch", "", ".", "a\0b", " loss"):
        with pytest.raises(UserError, match="epoch" if name == "epoch" else "cannot name a dataset"):
            rec.log(**{name: 1.0})
        with pytest.raises(UserError):
            rec.step(1, **{name: 1.0})
    rec.step(1, train_loss=0.5)  # the Recorder goes on
    rec.close()
    with Run(path) as r:
        assert sorted(r.metrics()) == ["epoch", "train_loss"] and list(r.epochs) == [0, 1] and r.complete


@injects("unsafe-metric-names")
@pytest.mark.slow
def test_every_reader_survives_a_file_that_already_has_a_metric_name_with_a_slash(tmp_path, capsys):
    """An older Recorder wrote `log(**{"loss/heldout": x})` as a dataset in a nested group, and
    every command crashed on the group. Readers name it by its path; copies keep it."""
    path = tmp_path / "run.h5"
    p = 7
    with headmovies.Recorder(path, _tl(p), schedule=[0, 1, 2], group_order=p) as rec:
        for epoch in range(3):
            rec.step(epoch, train_loss=3.0 - epoch)
    with h5py.File(path, "r+") as f:  # what the older Recorder left: /metrics/loss/heldout [3]
        f["metrics"].create_dataset("loss/heldout", data=[2.5, 1.5, 0.5], maxshape=(None,), chunks=(1024,))
    with Run(path) as r:
        np.testing.assert_array_equal(r.metrics()["loss/heldout"], [2.5, 1.5, 0.5])
    out = tmp_path / "out"
    for argv in (
        ["figures", str(path), "--out", str(out / "f")],
        ["view", str(path), "--out", str(out / "v")],
        ["recover", str(path), "--out", str(tmp_path / "clean.h5")],
    ):
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    with Run(tmp_path / "clean.h5") as r:
        np.testing.assert_array_equal(r.metrics()["loss/heldout"], [2.5, 1.5, 0.5])
    with headmovies.Recorder(path, _tl(p), schedule=[0, 1, 2, 3], group_order=p, resume=True) as rec:
        rec.step(3, train_loss=0.1)  # the nested metric is not logged: NaN at the new snapshot
    with Run(path) as r:
        np.testing.assert_array_equal(r.metrics()["loss/heldout"], [2.5, 1.5, 0.5, np.nan])
        assert list(r.epochs) == [0, 1, 2, 3]


@injects("out-of-range")
def test_values_out_of_range_are_one_line_and_the_file_keeps_its_snapshots(tmp_path):
    path = tmp_path / "run.h5"
    rec = headmovies.Recorder(path, nn.MultiheadAttention(8, 2), schedule=lambda e: True)
    rec.step(0, train_loss=1.0)
    with pytest.raises(UserError, match=r"metric 'acc' is 1000000.*beyond the range of a float64"):
        rec.log(acc=10**400)
    for epoch in (10**30, 2**63, -1):
        with pytest.raises(UserError, match=r"epoch must be in 0\.\.2\*\*63-1"):
            rec.step(epoch)
        with pytest.raises(UserError, match=r"epoch must be in 0\.\.2\*\*63-1"):
            rec.write(epoch)
    rec.step(2**63 - 1, train_loss=0.5)  # the largest epoch an int64 holds
    rec.close()
    with Run(path) as r:
        assert list(r.epochs) == [0, 2**63 - 1] and r.complete
        np.testing.assert_array_equal(r.metrics()["train_loss"], [1.0, 0.5])


@injects("nonfinite-first-loss")
@pytest.mark.parametrize("loss", [float("nan"), float("inf")])
def test_a_non_finite_loss_at_the_first_snapshot_stops_and_the_run_is_not_complete(loss, tmp_path):
    path = tmp_path / "run.h5"
    model = nn.MultiheadAttention(8, 2)
    rec = headmovies.Recorder(path, model, schedule=[0, 1])
    with pytest.raises(UserError, match="training diverged by epoch 0 \\(train_loss not finite\\)"):
        rec.step(0, train_loss=loss)
    with pytest.raises(UserError, match="stopped after an error"):
        rec.step(1, train_loss=1.0)
    rec.close()
    with Run(path) as r:
        assert list(r.epochs) == [0] and not r.complete
    with headmovies.Recorder(path, model, schedule=[0, 1], resume=True) as rec:  # resumable
        rec.step(1, train_loss=1.0)
    with Run(path) as r:
        assert list(r.epochs) == [0, 1] and r.complete


@injects("closed-recorder")
def test_log_after_close_is_refused_like_step(tmp_path):
    path = tmp_path / "run.h5"
    rec = headmovies.Recorder(path, nn.MultiheadAttention(8, 2), schedule=[0])
    rec.step(0, train_loss=1.0)
    rec.close()
    for call in (lambda: rec.log(train_loss=0.5), lambda: rec.step(1, train_loss=0.5)):
        with pytest.raises(UserError, match=f"this Recorder of {path} is closed"):
            call()


@injects("group-too-large")
def test_a_group_order_larger_than_the_vocabulary_is_refused_at_construction(tmp_path):
    path = tmp_path / "run.h5"
    with pytest.raises(ConfigError, match="group_order=11 is more than the model's 7 token values"):
        headmovies.Recorder(path, _tl(7), group_order=11)
    with pytest.raises(ConfigError, match="group_order=9 is more than the model's 8 token values"):
        headmovies.Recorder(path, nn.MultiheadAttention(8, 2), group_order=9)  # no W_E: d_model stands in
    with pytest.raises(ConfigError, match="the first tokens=5 of them stored"):
        headmovies.Recorder(path, _tl(7), group_order=7, tokens=5)
    assert list(tmp_path.iterdir()) == []  # no file, no lock
    headmovies.Recorder(path, _tl(7), group_order=7).close()


# --- 4. a model that changes under the Recorder --------------------------------------------------


@injects("model-changes")
@pytest.mark.parametrize("change", ["larger W_E", "new attention module"])
def test_a_transformer_lens_model_that_changes_under_the_recorder_is_a_model_error(change, tmp_path):
    """A real HookedTransformer: its W_E replaced by a larger one (a grown vocabulary), or its
    attention module replaced by a fresh one. The next snapshot is a ModelError; the file keeps
    its snapshots, is not marked complete, and resumes with the model it recorded."""
    from transformer_lens.components import Attention

    path = tmp_path / "run.h5"
    model = _tl(7)
    rec = headmovies.Recorder(path, model, schedule=lambda e: True)
    rec.step(0, train_loss=1.0)
    rec.step(1, train_loss=0.9)
    original_W_E, original_attn = model.embed.W_E, model.blocks[0].attn
    if change == "larger W_E":
        model.embed.W_E = nn.Parameter(torch.randn(9, 8))
        message = r"its W_E is \[9, 8\], in the file \[7, 8\]"
    else:
        model.blocks[0].attn = Attention(model.cfg, "global", 0)
        message = r"HookedTransformer.blocks.0.attn was replaced by another module \(Attention\)"
    with pytest.raises(ModelError, match=message):
        rec.step(2, train_loss=0.8)
    with pytest.raises(UserError, match="stopped after an error"):
        rec.step(3, train_loss=0.7)
    with Run(path) as r:
        assert list(r.epochs) == [0, 1] and not r.complete
    model.embed.W_E, model.blocks[0].attn = original_W_E, original_attn
    # the stopped Recorder let go of the file: a new one resumes while the old is still referenced
    # (a notebook's earlier cell), and closing the old one afterwards changes nothing
    with headmovies.Recorder(path, model, schedule=lambda e: True, resume=True) as again:
        again.step(2, train_loss=0.8)
        rec.close()
    with pytest.raises(UserError, match="stopped after an error"):
        rec.log(train_loss=0.5)
    with Run(path) as r:
        assert list(r.epochs) == [0, 1, 2] and r.complete


# --- 8. named pipes -------------------------------------------------------------------------------


def _cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """A fresh process, so that a command that blocks on a FIFO fails the test instead of hanging it."""
    return subprocess.run(
        [sys.executable, "-m", "headmovies", *argv], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout
    )


@injects("fifo")
@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes: POSIX")
def test_a_named_pipe_as_run_file_out_or_config_is_one_line_before_it_is_opened(tmp_path, ref):  # noqa: F811
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)
    run = _copy(ref[0], tmp_path / "run.h5")
    sets = sum((["--set", f"{k}={v}"] for k, v in {**TINY, "epochs": 20}.items()), [])
    cases = {
        "orbits check": (["orbits", "check", str(fifo)], f"run file {fifo} is a named pipe (FIFO)"),
        "movie": (["movie", str(fifo), "--out", str(tmp_path / "m")], f"run file {fifo} is a named pipe (FIFO)"),
        "recover": (["recover", str(fifo)], f"run file {fifo} is a named pipe (FIFO)"),
        "recover --out": (["recover", str(run), "--out", str(fifo)], f"--out {fifo} is a named pipe (FIFO)"),
        "train --out": (["train", "orbits", "--out", str(fifo), *sets], f"--out {fifo} is a named pipe (FIFO)"),
        "train --force": (["train", "orbits", "--out", str(fifo), "--force", *sets], f"--out {fifo} is a named pipe"),
        "--basis": (
            ["movie", str(run), "--out", str(tmp_path / "b"), "--generic", "--basis", str(fifo)],
            f"the basis {fifo} is a named pipe (FIFO)",
        ),
        "--config": (
            ["train", "orbits", "--out", str(tmp_path / "new.h5"), "--config", str(fifo)],
            f"config file {fifo} is a named pipe (FIFO)",
        ),
    }
    for name, (argv, needle) in cases.items():
        try:
            proc = _cli(*argv)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name}: blocked on the named pipe")
        assert proc.returncode == 2, (name, proc.stderr[-500:])
        one_line_error(proc.stderr, needle, "not a regular file")
    assert fifo.exists() and not (tmp_path / "new.h5").exists() and not list(tmp_path.glob("*.partial"))
    assert not (tmp_path / "m").exists() and not (tmp_path / "b").exists()
    ckpt = tmp_path / "other.h5.ckpt"
    os.mkfifo(ckpt)
    with pytest.raises(UserError, match="is a named pipe"):
        headmovies.Recorder(fifo, nn.MultiheadAttention(8, 2))
    with pytest.raises(UserError, match=f"the checkpoint path of {tmp_path / 'other.h5'}, {ckpt} is a named pipe"):
        headmovies.Recorder(tmp_path / "other.h5", nn.MultiheadAttention(8, 2))


# --- 9. TOML configs ------------------------------------------------------------------------------


@injects("toml-config")
@pytest.mark.slow
def test_a_toml_config_with_a_huge_integer_is_one_line_and_a_byte_order_mark_is_accepted(tmp_path, capsys):
    huge = tmp_path / "huge.toml"
    huge.write_text(f"seed = {'9' * 5000}\n")
    out = tmp_path / "run.h5"
    assert main(["train", "orbits", "--out", str(out), "--config", str(huge)]) == 2
    one_line_error(capsys.readouterr().err, f"config file {huge} holds an integer of 5000 digits")
    assert not out.exists()
    bom = tmp_path / "bom.toml"
    bom.write_bytes("\ufeffseed = 3\n".encode())  # Notepad's UTF-8 with BOM
    assert main([*train_argv(out, 10, "--config", str(bom), cfg={k: v for k, v in TINY.items() if k != "seed"})]) == 0
    with Run(out) as r:
        assert r.seed == 3 and r.config["seed"] == 3


# --- 10. orbits watch and the Host header ---------------------------------------------------------


def _get(port: int, host: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", "/", skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@injects("foreign-host")
@pytest.mark.slow
def test_orbits_watch_answers_only_requests_for_its_own_address(ref):  # noqa: F811
    """DNS rebinding: a page of evil.example, its name pointed at 127.0.0.1, asks the viewer with
    `Host: evil.example:PORT`; real HTTP requests to the real server, which answers 403."""
    from headmovies.render.orbits.watch import Follower, serve

    follower = Follower(ref[0])
    server = serve(follower, port=0)
    try:
        port = server.server_address[1]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
            status, body = _get(port, host)
            assert status == 200 and b"<html" in body.lower(), host
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", "127.0.0.1", "", None):
            status, body = _get(port, host)
            assert status == 403 and b"<html" not in body.lower(), host
    finally:
        server.shutdown()
        server.server_close()
        follower.close()


# --- 11. a killed writer that did not use SWMR ------------------------------------------------------


@injects("killed-non-swmr")
@pytest.mark.slow
def test_a_killed_non_swmr_writer_is_named_as_found_with_file_locking_on(tmp_path, ref, capsys):  # noqa: F811
    run = _copy(ref[0], tmp_path / "run.h5")
    killed = (
        "import h5py, os, signal, sys; f = h5py.File(sys.argv[1], 'a'); f.flush(); os.kill(os.getpid(), signal.SIGKILL)"
    )
    env = {k: v for k, v in ENV.items() if k != "HDF5_USE_FILE_LOCKING"}  # HDF5's default: locking on
    proc = subprocess.run([sys.executable, "-c", killed, str(run)], env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    before = run.read_bytes()
    for argv in (["orbits", "check", str(run)], ["recover", str(run)]):
        assert main(argv) == 2
        line = one_line_error(
            capsys.readouterr().err, f"run file {run} was left open for writing by an HDF5 writer not in SWMR mode"
        )
        assert "file locking is off" not in line and "no process holds the file's lock" in line and "h5clear -s" in line
    assert run.read_bytes() == before

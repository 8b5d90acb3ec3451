"""The viewer's payload (`render/orbits/viewer.py`) and the live view's follower
(`render/orbits/watch.py`) on hand-built runs with known orbits and on real run files grown and
replaced by `RunWriter`, as a resumed writer does. The page itself is tested in Chromium:
tests/test_browser.py."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from headmovies.cli import main
from headmovies.render.core.circuits import centre_ov, centre_qk, circuit_factors, ov_circuit, qk_circuit
from headmovies.render.orbits.stream import panel_coordinates
from headmovies.render.orbits.viewer import (
    dequantise_rows,
    fourier_rows,
    make_viewer,
    pack,
    quantise_rows,
    row_scales,
    rows_to_factors,
    time_delta,
    unpack,
)
from headmovies.runfile.reader import Run
from headmovies.runfile.writer import RunWriter

from equivariant import NAMES, equivariant_run, equivariant_weights, write_run

EPOCHS = np.arange(0, 501, 25)  # 21 snapshots; exactly equivariant from the 20th (epoch 475)


@pytest.fixture(scope="module")
def eq_run(tmp_path_factory):
    return equivariant_run(tmp_path_factory.mktemp("run") / "eq.h5", EPOCHS, orbit_sizes=(12, 4), extra_heads=4)


def payload_of(html: str) -> dict:
    text = re.search(r'<script id="payload" type="application/json">(.*?)</script>', html, re.S).group(1)
    return json.loads(text.replace("<\\/", "</"))


def random_weights(seed=0, n=7, d_model=16, d_head=3, H=5, n_out=7):
    rng = np.random.default_rng(seed)
    return {
        "W_E": rng.standard_normal((n, d_model)),
        "W_Q": rng.standard_normal((H, d_model, d_head)),
        "W_K": rng.standard_normal((H, d_model, d_head)),
        "W_V": rng.standard_normal((H, d_model, d_head)),
        "W_O": rng.standard_normal((H, d_head, d_model)),
        "W_U": rng.standard_normal((d_model, n_out)),
    }


def test_factors_rebuild_the_centred_circuits():
    w = random_weights()
    F = circuit_factors(w)
    assert F.shape == (5, 4, 7, 3)
    M = centre_qk(qk_circuit(w["W_E"], w["W_Q"], w["W_K"]))
    R = centre_ov(ov_circuit(w["W_E"], w["W_V"], w["W_O"], w["W_U"]))
    assert np.allclose(F[:, 0] @ np.swapaxes(F[:, 1], -1, -2), M, atol=1e-12, rtol=0)
    assert np.allclose(F[:, 2] @ np.swapaxes(F[:, 3], -1, -2), R, atol=1e-12, rtol=0)


@pytest.mark.parametrize("n", [7, 24])
def test_fourier_rows_quantised_and_time_deltas(n):
    rng = np.random.default_rng(1)
    F = rng.standard_normal((6, 5, 4, n, 3)) * np.geomspace(1e-3, 10, 6)[:, None, None, None, None]
    F[2, 1, 3] = 0  # an all-zero factor: zero rows, code ZERO_CODE
    A = fourier_rows(F)
    assert A.shape == (6, 5, 4, n // 2 + 1, 3)
    assert np.allclose(A[..., 2, :], np.einsum("...ae,a->...e", F, np.exp(2j * np.pi * 2 * np.arange(n) / n)))
    assert np.allclose(rows_to_factors(A, n), F, atol=1e-12)
    q, code = quantise_rows(A)
    assert q.dtype == np.int8 and code.dtype == np.int16 and q.shape == (6, 5, 4, n // 2 + 1, 6)
    assert (row_scales(code)[2, 1, 3] == 0).all()
    step = row_scales(code)[..., None]
    back = dequantise_rows(q, code)
    assert np.all(np.abs(back.real - A.real) <= step / 2 * (1 + 1e-9))
    assert np.all(np.abs(back.imag - A.imag) <= step / 2 * (1 + 1e-9))
    # each row uses at least half of the 8 bits: its scale is the smallest power of 2^(1/8) that fits
    top = np.abs(np.concatenate([A.real, A.imag], -1)).max(-1)
    live = top > 0
    assert np.all(top[live] / row_scales(code)[live] > 127 / 2 ** (1 / 8) - 1e-9)
    # the page undoes the differences with running sums that wrap in an Int8Array / Int16Array
    for x in (q, code):
        assert np.array_equal(np.add.accumulate(time_delta(x), axis=0, dtype=x.dtype), x)
    arrays = {"a": np.arange(5, dtype=np.float32), "b": time_delta(q), "c": code, "d": np.array([[1, 0]], np.uint8)}
    out = unpack(pack(arrays))
    assert all(np.array_equal(out[k], v) and out[k].dtype == v.dtype for k, v in arrays.items())


def test_page_holds_the_movie_projection_the_orbits_and_their_dates(eq_run, tmp_path):
    result = make_viewer(eq_run, tmp_path)
    html = result.path.read_text()
    assert result.path == tmp_path / "viewer.html" and result.snapshots == len(EPOCHS)
    # self-contained: no external script, style, image or font
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html) and "@import" not in html
    p = payload_of(html)
    meta, (chunk,) = p["meta"], p["chunks"]
    assert p["live"] is None and chunk["epochs"] == EPOCHS.tolist() and chunk["start"] == 0
    assert (meta["n"], meta["m"], meta["n_heads"], meta["d_head"]) == (24, 2, 20, 4)
    arrays = unpack(chunk["arrays"])
    with Run(eq_run) as run:
        coords = np.array([c for _, c in panel_coordinates(run, result.panels)])  # [T, P, H]
        weights = [w for _, w in run.iter_weights(list(NAMES))]
    assert [(q["circuit"], q["u"], q["v"]) for q in meta["panels"]] == [(q.circuit, q.u, q.v) for q in result.panels]
    assert np.allclose(arrays["coords"][..., 0], coords.real, rtol=1e-6, atol=1e-6 * np.abs(coords).max())
    assert np.allclose(arrays["coords"][..., 1], coords.imag, rtol=1e-6, atol=1e-6 * np.abs(coords).max())
    # both orbits, verified from the snapshot the layer becomes equivariant (index 19), coloured as the movie
    orbits = [(o["size"], o["heads"], o["locked_in"], o["colour"], o["final"]) for o in meta["orbits"]]
    assert orbits == [
        (12, list(range(12)), int(EPOCHS[19]), "#1f77b4", True),
        (4, [12, 13, 14, 15], int(EPOCHS[19]), "#ff7f0e", True),
    ]
    assert all(not o for o in chunk["orbits"][:19]) and [k for k, _ in chunk["orbits"][-1]] == [
        ",".join(map(str, range(12))),
        "12,13,14,15",
    ]
    assert np.isnan(arrays["head_error"]).sum() == 0 and arrays["head_error"][-1, :16].max() < 1e-6
    assert not arrays["dead"].any()
    # the 8-bit rows rebuild each head's centred circuits within 1 % (Frobenius norm)
    rows = np.add.accumulate(arrays["rows"], axis=0, dtype=np.int8)
    codes = np.add.accumulate(arrays["codes"], axis=0, dtype=np.int16)
    F = rows_to_factors(dequantise_rows(rows, codes), 24)

    def norm(X):
        return np.linalg.norm(X, axis=(1, 2))

    for t in (0, 10, 20):
        w = weights[t]
        M = centre_qk(qk_circuit(w["W_E"], w["W_Q"], w["W_K"]))
        Mq = F[t, :, 0] @ np.swapaxes(F[t, :, 1], -1, -2)
        R = centre_ov(ov_circuit(w["W_E"], w["W_V"], w["W_O"], w["W_U"]))
        Rq = F[t, :, 2] @ np.swapaxes(F[t, :, 3], -1, -2)
        assert np.all(norm(Mq - M) <= 0.01 * norm(M)) and np.all(norm(Rq - R) <= 0.01 * norm(R))


def test_view_command_and_its_errors(eq_run, tmp_path, capsys):
    assert main(["view", str(eq_run), "--out", str(tmp_path / "v"), "--name", "eq"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "v" / "eq.html").is_file() and "21 snapshots" in out and "MB" in out
    plain = write_run(tmp_path / "plain.h5", [0], [{"W_E": np.zeros((24, 4))}], n=None)
    cases = [
        (["view", str(tmp_path / "missing.h5"), "--out", str(tmp_path / "x")], "does not exist"),
        (["view", str(plain), "--out", str(tmp_path / "x")], "no group data"),
        (["view", str(eq_run), "--out", str(tmp_path / "x"), "--panels", "qk:0"], "bad panel"),
        (["view", str(eq_run), "--out", str(tmp_path / "x"), "--name", "../eq"], "--name"),
        (
            ["view", str(eq_run), "--out", str(tmp_path / "v" / "eq.html")],
            "eq.html is a file; remove it or choose",
        ),
        (["orbits", "watch", str(eq_run), "--port", "70000"], "--port"),
        (["orbits", "watch", str(plain), "--port", "0"], "no group data"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


# --- the live view's follower, on a run file that grows and is replaced ----------------------


def snapshot(t: int, target: dict, start: dict, T: int) -> dict:
    w = min(1.0, t / max(1, T - 2))
    return {k: ((1 - w) * start[k] + w * target[k]).astype(np.float32) for k in NAMES}


@pytest.fixture
def growing(tmp_path):
    """(path, writer, weights(t)): a live run file with its first snapshot, written by RunWriter."""
    target = dict(zip(NAMES, equivariant_weights(24, 2, (12, 4), 32, 4, 0, 4)))
    rng = np.random.default_rng(1)
    start = {k: rng.standard_normal(v.shape) * 0.3 * np.abs(v).mean() for k, v in target.items()}
    start["W_E"], start["W_U"] = target["W_E"], target["W_U"]

    def weights(t):
        return snapshot(t, target, start, 12)

    path = tmp_path / "live.h5"
    attrs = {
        "schema_version": 1,
        "experiment": "orbits",
        "config": {"epochs": 110},
        "seed": 0,
        "created": "2026-01-01T00:00:00",
        "versions": {},
        "n": 24,
        "m": 2,
    }
    writer = RunWriter.create(path, attrs, 0, weights(0), {"eq_error": 0.1}, {"train": np.arange(3)})
    writer.publish()  # the run appears at its path
    yield path, writer, weights
    writer.close()


def test_follower_reads_new_snapshots_and_follows_a_resumed_writer(growing):
    from headmovies.render.orbits.watch import Follower

    path, writer, weights = growing
    for t in range(1, 4):
        writer.append(10 * t, weights(t), {"eq_error": 0.1})
    f = Follower(path, ["source"])  # fixed planes (test_follower_chooses_the_planes_again: default ones)
    try:
        assert f.data.count == 4 and f.poll() == 0
        writer.append(40, weights(4), {"eq_error": 0.1})
        writer.append(50, weights(5), {"eq_error": 0.1})
        assert f.poll() == 2 and f.status()["epoch"] == 50 and not f.status()["complete"]
        u = f.update(0, 4)
        assert [c["start"] for c in u["chunks"]] == [4] and u["chunks"][0]["epochs"] == [40, 50]
        assert u["meta"]["final_epoch"] == 110
        # the writer dies; a resumed writer copies the file up to its checkpoint (epoch 30) and renames
        # the copy into place, then writes epochs 40.. again, here not bit for bit (as off CPU):
        # the follower drops its epochs 40 and 50 and reads the new ones
        writer.close()
        resumed = RunWriter.reopen(path, 30)
        for t in range(4, 12):
            w = weights(t)
            resumed.append(10 * t, {**w, "W_Q": w["W_Q"] * np.float32(1.001)}, {"eq_error": 0.01})
        resumed.mark_complete()
        assert f.poll() == 8 and f.gen == 1 and f.cuts == {1: 4}
        assert "--resume" in f.status()["message"] and f.status()["complete"]
        # a page that saw epochs 0..50 (gen 0, 6 snapshots) is sent everything from snapshot 4 on
        u = f.update(0, 6)
        assert u["gen"] == 1 and u["chunks"][0]["start"] == 4
        epochs = [e for c in [f.data.chunks[0].data] + u["chunks"] for e in c["epochs"]]
        assert epochs[:4] + epochs[4:] == list(range(0, 120, 10)) and len(epochs) == 12
        # the orbits are verified from epoch 100 (the layer is exactly equivariant from t = 10)
        locks = {o["key"]: o["locked_in"] for o in u["meta"]["orbits"]}
        assert locks[",".join(map(str, range(12)))] == 100
        assert f.update(1, 12)["chunks"] == []
        with Run(path) as run:  # epoch 50 as the new file has it
            expected = next(panel_coordinates(run, f.data.panels, indices=np.array([5])))[1]
        got = unpack(u["chunks"][0]["arrays"])["coords"][1]
        assert np.allclose(got[..., 0] + 1j * got[..., 1], expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
        resumed.close()
        # another run written over it (--force): the page must reload
        path.unlink()
        attrs = {
            "schema_version": 1,
            "experiment": "orbits",
            "config": {"epochs": 10},
            "seed": 1,
            "created": "2026-02-02T00:00:00",
            "versions": {},
            "n": 24,
            "m": 2,
        }
        new = RunWriter.create(path, attrs, 0, weights(0), {}, {"train": np.arange(3)})
        new.publish()
        new.close()
        f.poll()
        assert f.update(1, 12, identity="2026-01-01T00:00:00|(20, 32, 4)") == {"reload": True}
        assert f.data.count == 1
    finally:
        f.close()


def test_a_bit_identical_resume_keeps_every_shared_snapshot(growing, tmp_path):
    """On CPU a resumed writer rewrites the snapshots after its checkpoint bit for bit: all stay."""
    from headmovies.render.orbits.watch import shared_prefix

    path, writer, weights = growing
    for t in range(1, 6):
        writer.append(10 * t, weights(t), {"eq_error": 0.1})
    old = Run(path)
    writer.close()
    resumed = RunWriter.reopen(path, 20)
    for t in range(3, 8):
        resumed.append(10 * t, weights(t), {"eq_error": 0.1})
    with Run(path) as new:
        assert (len(old), len(new)) == (6, 8) and shared_prefix(old, new) == 6
    old.close()
    resumed.close()


def test_watch_on_a_taken_port_is_one_line(eq_run, capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["orbits", "watch", str(eq_run), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "--port 0" in err and len(err.strip().splitlines()) == 1


def test_follower_chooses_the_planes_again_as_orbits_appear(tmp_path):
    """A live run whose heads are random for 4 snapshots, then gather into a 4- and a 3-orbit
    that do not show in the source's planes: the live view starts in the source's planes and
    moves to the planes the movie picks for the whole run, once the orbits are there."""
    from headmovies.render.orbits.panel_choice import resolve_panels
    from headmovies.render.orbits.stream import final_snapshot
    from headmovies.render.orbits.watch import Follower

    target = dict(zip(NAMES, equivariant_weights(24, 2, (4, 3), 32, 4, 0, 25)))
    rng = np.random.default_rng(1)
    start = {k: rng.standard_normal(v.shape) * 0.3 * np.abs(v).mean() for k, v in target.items()}
    start["W_E"], start["W_U"] = target["W_E"], target["W_U"]

    def weights(t):  # random through t = 3, the orbits from t = 6 on
        return snapshot(max(0, t - 3), target, start, 5)

    path = tmp_path / "growing.h5"
    attrs = {"schema_version": 1, "experiment": "orbits", "config": {"epochs": 90}, "seed": 0}
    attrs |= {"created": "2026-01-01T00:00:00", "versions": {}, "n": 24, "m": 2}
    writer = RunWriter.create(path, attrs, 0, weights(0), {"eq_error": 0.1}, {"train": np.arange(3)})
    writer.publish()
    f = None
    try:
        for t in range(1, 4):
            writer.append(10 * t, weights(t), {"eq_error": 0.1})
        f = Follower(path, rechoose_s=0.0)
        before = [str(p) for p in f.data.panels]
        identity = f.live()["identity"]
        assert before == ["qk:0,10", "ov:10,-10", "qk:0,6", "ov:6,-6"]  # the source's: no orbit yet
        for t in range(4, 9):
            writer.append(10 * t, weights(t), {"eq_error": 0.1})
        assert f.poll() == 5 and [str(p) for p in f.data.panels] == before  # a new choice, seen once
        writer.append(90, weights(9), {"eq_error": 0.1})
        assert f.poll() == 10  # seen twice: every snapshot again, in the new planes
        with Run(path) as run:  # the movie's rule on the whole run
            final = final_snapshot(run)
            want, _ = resolve_panels(None, final.report, final.M, final.R, 24, 2)
        assert [str(p) for p in f.data.panels] == [str(p) for p in want] != before
        assert f.data.count == 10 and [c.start for c in f.data.chunks] == [0]
        writer.mark_complete()
        assert "new planes" in f.status()["message"]
        assert f.update(f.gen, 4, identity) == {"reload": True}  # a page of the old planes reloads
        assert f.update(f.gen, 10, f.live()["identity"])["chunks"] == []
    finally:
        if f is not None:
            f.close()
        writer.close()

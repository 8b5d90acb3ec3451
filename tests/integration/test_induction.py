"""Induction experiment (source 003): data, model invariants (causal mask, positions in Q/K only,
smeared keys), the numpy renderer against the torch trainer, copying and composition scores
on hand-built circuits, a tiny training run, and bad input at the commands' edge."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import headmovies
from headmovies.cli import main as pipeline_main
from headmovies.cli import main as render_main
from headmovies.render.induction import analysis as ind
from headmovies.render.induction import circuit_scores as cs
from headmovies.render.induction import numpy_model as npm
from headmovies.runfile.reader import Run
from headmovies.tasks import induction as task
from headmovies.tasks.induction import sinusoidal_table
from headmovies.train import config
from headmovies.train.induction import (
    Induction1L,
    Induction2L,
    InductionConfig,
    InductionSmeared,
    InductionTransformer,
    repeated_blocks,
)
from headmovies.train.loop import train

ROOT = Path(headmovies.__file__).resolve().parents[1]  # the repository
TINY = {"epochs": "40", "early_every": "10", "batch_size": "32", "eval_size": "64"}


def cfg_of(task_cls, **kw) -> InductionConfig:
    return config.resolve(task_cls.Config, sets={**TINY, **{k: str(v) for k, v in kw.items()}})


def torch_model(task_cls, seed=0, **kw) -> InductionTransformer:
    torch.manual_seed(seed)
    return InductionTransformer(cfg_of(task_cls, **kw)).double()


def numpy_model(model: InductionTransformer) -> npm.Model:
    weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return npm.Model(weights, model.W_pos.numpy(), model.blocks[0].attn.positions)


# --- data ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("block_len", [6, 4, 7])
def test_generator_period_alphabet_distinct(block_len):
    cfg = cfg_of(Induction1L, block_len=block_len)
    x = repeated_blocks(2000, cfg, torch.Generator().manual_seed(0)).numpy()
    y = task.sample_sequences(np.random.default_rng(0), 2000, 26, 24, block_len)
    for tokens in (x, y):
        assert tokens.shape == (2000, 24) and tokens.min() == 0 and tokens.max() == 25
        assert np.all(tokens[:, block_len:] == tokens[:, :-block_len])  # period block_len
        block = np.sort(tokens[:, :block_len], axis=1)
        assert np.all(np.diff(block, axis=1) > 0)  # distinct letters
    # fresh blocks: rows differ (26P6 = 1.65e8 blocks; 2000 draws collide with probability ~1%)
    assert len({tuple(r) for r in x[:, :block_len]}) >= 1990


def test_generator_with_repeats():
    cfg = cfg_of(Induction1L, distinct=False)
    x = repeated_blocks(2000, cfg, torch.Generator().manual_seed(0)).numpy()
    assert np.all(x[:, 6:] == x[:, :-6])
    has_repeat = np.array([len(set(r[:6])) < 6 for r in x]).mean()
    assert abs(has_repeat - (1 - math.perm(26, 6) / 26**6)) < 0.05  # P = 0.46


def test_sinusoidal_table_values():
    P = sinusoidal_table(24, 32)
    assert P.shape == (24, 32)
    np.testing.assert_allclose(P[:, 0], np.sin(np.arange(24)), atol=1e-6)
    np.testing.assert_allclose(P[:, 1], np.cos(np.arange(24)), atol=1e-6)
    np.testing.assert_allclose(P[5, 2], np.sin(5 / 10000 ** (2 / 32)), atol=1e-6)


# --- model invariants ---------------------------------------------------------------------------


@pytest.mark.parametrize("task_cls", [Induction1L, InductionSmeared, Induction2L])
def test_causal_mask(task_cls):
    model = torch_model(task_cls)
    x = repeated_blocks(8, model_cfg := cfg_of(task_cls), torch.Generator().manual_seed(1))
    y = x.clone()
    y[:, 15:] = (y[:, 15:] + 3) % 26  # change only the tokens from position 15 on
    with torch.no_grad():
        lx, ly = model(x), model(y)
        _, pattern = model.blocks[-1].attn(model.W_E[x], model.W_pos, return_pattern=True)
    assert torch.equal(lx[:, :15], ly[:, :15])  # earlier positions cannot see them
    assert not torch.allclose(lx[:, 15:], ly[:, 15:])
    upper = torch.ones(24, 24, dtype=torch.bool).triu(1)
    assert float(pattern[..., upper].abs().max()) == 0.0  # no attention to later positions
    np.testing.assert_allclose(pattern.sum(-1).numpy(), 1.0, atol=1e-12)
    _, patterns = npm.forward(numpy_model(model), x.numpy(), return_patterns=True)
    assert all(float(np.abs(p[..., upper.numpy()]).max()) == 0.0 for p in patterns)
    del model_cfg


@pytest.mark.parametrize("positions", ["qk_input", "qk_vector"])
def test_positions_reach_only_q_and_k(positions):
    model = torch_model(Induction1L, positions=positions)
    attn = model.blocks[0].attn
    tokens = repeated_blocks(8, cfg_of(Induction1L), torch.Generator().manual_seed(2))
    ov_before = cs.copying_table(numpy_model(model).weights)
    with torch.no_grad():
        x = model.W_E[tokens]
        _, pattern_before = attn(x, model.W_pos, return_pattern=True)
        model.W_pos.copy_(torch.randn_like(model.W_pos) * 3)  # other positions
        out, pattern = attn(x, model.W_pos, return_pattern=True)
        assert (pattern - pattern_before).abs().max() > 0.05  # positions do steer attention ...
        v = torch.einsum("btd,hde->bhte", x, attn.W_V)  # ... values carry no position
        torch.testing.assert_close(out, torch.einsum("bhte,hed->btd", pattern @ v, attn.W_O))
        torch.testing.assert_close(model(tokens), (x + out) @ model.W_U)  # nor does the residual
        if positions == "qk_input":  # zero W_Q, W_K: uniform attention,
            attn.W_Q.zero_()  # and the positions leave no trace
            attn.W_K.zero_()
            uniform = model(tokens)
            model.W_pos.zero_()
            torch.testing.assert_close(model(tokens), uniform, rtol=0, atol=1e-12)
    ov_after = cs.copying_table(numpy_model(model).weights)
    assert [r["copying"] for r in ov_before] == [r["copying"] for r in ov_after]  # OV circuit unchanged


def test_default_positions_are_the_seeds_wording():
    """Source 003: positions "added to Q and K": the query/key vectors, one d_head slice per head."""
    for cls in (Induction1L, InductionSmeared, Induction2L):
        assert cfg_of(cls).positions == "qk_vector" == task.DEFAULT_POSITIONS
    assert task.positions_of({}) == "qk_input"  # files made before the option
    assert task.positions_of({"positions": "qk_vector"}) == "qk_vector"


@pytest.mark.parametrize("positions", ["qk_vector", "qk_input"])
def test_smeared_keys_weight_one_equals_plain_keys(positions):
    smeared = torch_model(InductionSmeared, seed=3, positions=positions)
    plain = torch_model(Induction1L, seed=3, positions=positions)
    with torch.no_grad():
        for name, p in plain.named_parameters():
            p.copy_(dict(smeared.named_parameters())[name])
        tokens = repeated_blocks(8, cfg_of(Induction1L), torch.Generator().manual_seed(4))
        smeared.blocks[0].attn.alpha.fill_(float("inf"))  # sigmoid(alpha) = 1: own key only
        torch.testing.assert_close(smeared(tokens), plain(tokens), rtol=0, atol=0)
        smeared.blocks[0].attn.alpha.fill_(float("-inf"))  # sigmoid(alpha) = 0: previous key only
        _, pat = smeared.blocks[0].attn(smeared.W_E[tokens], smeared.W_pos, return_pattern=True)
    # then key j holds token j-1's key: scores of query i on key j equal plain scores on key j-1
    attn = plain.blocks[0].attn
    x, pos = plain.W_E[tokens], plain.W_pos
    if positions == "qk_input":
        q = torch.einsum("btd,hde->bhte", x + pos, attn.W_Q)
        k = torch.einsum("btd,hde->bhte", x + pos, attn.W_K)
    else:  # head h adds columns h*8 .. h*8+7
        P = pos.view(24, 4, 8).transpose(0, 1)[None]  # (1, H, T, dh)
        q = torch.einsum("btd,hde->bhte", x, attn.W_Q) + P
        k = torch.einsum("btd,hde->bhte", x, attn.W_K) + P
    k = torch.cat([k[:, :, :1], k[:, :, :-1]], 2)
    scores = (q @ k.transpose(-1, -2) / math.sqrt(8)).masked_fill(torch.ones(24, 24).triu(1).bool(), -math.inf)
    torch.testing.assert_close(pat, scores.softmax(-1).detach())


@pytest.mark.parametrize(
    "task_cls,positions",
    [
        (Induction1L, "qk_input"),
        (InductionSmeared, "qk_input"),
        (Induction2L, "qk_input"),
        (Induction1L, "qk_vector"),
        (Induction2L, "qk_vector"),
        (InductionSmeared, "qk_vector"),
    ],
)
def test_numpy_forward_matches_trainer(task_cls, positions):
    model = torch_model(task_cls, positions=positions)
    if task_cls is InductionSmeared:
        with torch.no_grad():
            model.blocks[0].attn.alpha.copy_(torch.tensor([-2.0, -0.5, 0.5, 2.0], dtype=torch.float64))
    tokens = repeated_blocks(16, cfg_of(task_cls), torch.Generator().manual_seed(5))
    nm = numpy_model(model)
    for kcomp in (True, False):
        with torch.no_grad():
            ref = model(tokens, k_composition=kcomp).numpy()
        np.testing.assert_allclose(npm.forward(nm, tokens.numpy(), k_composition=kcomp), ref, atol=1e-10)


# --- copying and composition scores -------------------------------------------------------------


def copying_weights(sign: float) -> dict:
    """One head whose OV circuit W_E W_V W_O W_U is sign x (a projection): pure copying for +1."""
    rng = np.random.default_rng(0)
    W_E = np.linalg.qr(rng.standard_normal((32, 32)))[0][:26]  # orthonormal rows
    V = np.linalg.qr(rng.standard_normal((32, 8)))[0]  # [d, dh], orthonormal columns
    return {
        "W_E": W_E,
        "W_U": W_E.T.copy(),
        "blocks.0.attn.W_Q": V[None],
        "blocks.0.attn.W_K": V[None],
        "blocks.0.attn.W_V": V[None],
        "blocks.0.attn.W_O": sign * V.T[None],
    }


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_copying_score_pure_copying_and_negation(sign):
    head = cs.copying_table(copying_weights(sign))[0]
    assert head["circuit"] == "L0H0"
    assert head["copying"] == pytest.approx(sign, abs=1e-12)
    assert head["source_mean_sign"] == pytest.approx(sign, abs=1e-12)
    direct = cs.copying_table(copying_weights(sign))[-1]  # W_E W_E^T: identity
    assert direct["circuit"].startswith("direct") and direct["copying"] == pytest.approx(1.0)


def test_copying_scores_known_eigenvalues():
    s = cs.copying_scores(np.array([2.0, -1.0, 0.0]))
    assert s["copying"] == pytest.approx(1 / 3) and s["source_mean_sign"] == pytest.approx(0.0)
    s = cs.copying_scores(np.array([1 + 1j, 1 - 1j]))  # 45 degrees
    assert s["copying"] == pytest.approx(1 / math.sqrt(2)) and s["source_mean_sign"] == pytest.approx(1 / math.sqrt(2))
    A, B = np.random.default_rng(1).standard_normal((26, 8)), np.random.default_rng(2).standard_normal((8, 26))
    big = np.linalg.eigvals(A @ B)
    big = big[np.abs(big) > 1e-8]
    np.testing.assert_allclose(np.sort_complex(cs.factored_eigenvalues(A, B)), np.sort_complex(big), atol=1e-8)


def test_k_composition_known_cases():
    e = np.eye(4)
    w = {"W_E": np.eye(4), "W_U": np.eye(4)}
    for li in (0, 1):
        w |= {
            f"blocks.{li}.attn.W_Q": e[None, :, :1],
            f"blocks.{li}.attn.W_K": e[None, :, :1],
            f"blocks.{li}.attn.W_V": e[None, :, :1],
            f"blocks.{li}.attn.W_O": e[None, :1, :],
        }
    assert cs.composition_scores(w)["k"][0, 0] == pytest.approx(1.0)  # OV1 writes where keys read
    w["blocks.1.attn.W_K"] = e[None, :, 1:2]  # keys read another direction
    scores = cs.composition_scores(w)
    assert scores["k"][0, 0] == pytest.approx(0.0) and scores["q"][0, 0] == pytest.approx(1.0)
    assert 0 < scores["k_baseline"] < 1


def test_no_k_composition_ablation():
    model = torch_model(Induction2L, seed=6)
    nm = numpy_model(model)
    tokens = task.sample_sequences(np.random.default_rng(0), 32, 26, 24, 6)
    full = npm.mean_attention(nm, tokens)
    ablated = npm.mean_attention(nm, tokens, k_composition=False)
    np.testing.assert_array_equal(full[0], ablated[0])  # layer 0 untouched
    assert np.abs(full[1] - ablated[1]).max() > 1e-3  # layer 1 keys changed
    nm.weights["blocks.0.attn.W_O"] = np.zeros_like(nm.weights["blocks.0.attn.W_O"])  # layer 0 writes nothing
    np.testing.assert_allclose(npm.forward(nm, tokens, k_composition=False), npm.forward(nm, tokens), atol=1e-12)


def test_offset_profile_and_correct_completion():
    prev = np.eye(24, k=-1)
    prev[0, 0] = 1  # all attention one back
    prof = npm.offset_profile(prev)
    assert prof[1] == 1.0 and prof[0] == pytest.approx(1 / 24) and prof[5] == 0.0
    assert task.correct_completion("ABCDEF") == "ABCDEFABCDEFABCDEF"
    assert task.correct_completion("AAABBBAAABBB") == "AAABBBAAABBB"
    assert task.correct_completion("ABCDEFXYZRST") is None
    assert task.correct_completion("ABCD") is None
    assert ind.immediate_repeats("BBA", "A") == 1


# --- training and commands ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    out = {}
    for cls in (InductionSmeared, Induction2L):
        path = tmp_path_factory.mktemp("ind") / f"{cls.name}.h5"
        train(cls.name, cfg_of(cls), path, progress=False)
        out[cls.name] = path
    return out


def test_tiny_training_run_lands_snapshots(tiny_runs):
    with Run(tiny_runs["induction-smeared"]) as run:
        assert run.complete and run.epochs.tolist() == [0, 10, 20, 30, 40]
        assert run.weights(-1)["blocks.0.attn.alpha"].shape == (4,)
        m = run.metrics()
        assert m["epoch"].tolist() == [0, 10, 20, 30, 40] and np.all((m["heldout_acc"] >= 0) & (m["heldout_acc"] <= 1))
        assert m["heldout_loss"][-1] < m["heldout_loss"][0]  # it learns
    with Run(tiny_runs["induction-2l"]) as run:
        w = run.weights(-1)
        assert {"W_E", "W_U", "blocks.1.attn.W_Q"} <= set(w) and w["blocks.1.attn.W_O"].shape == (4, 8, 32)
        assert not np.array_equal(run.weights(0)["W_E"], w["W_E"])
        assert run.f.attrs["W_pos"].shape == (24, 32)
        assert npm.n_layers(w) == 2


@pytest.mark.slow
def test_render_command_writes_tables(tiny_runs, tmp_path, capsys):
    rc = render_main(
        [
            "induction",
            "report",
            str(tiny_runs["induction-2l"]),
            "--out",
            str(tmp_path),
            "--no-movie",
            "--sequences",
            "64",
        ]
    )
    assert rc == 0
    data = json.loads((tmp_path / "induction-2l" / "analysis.json").read_text())
    assert [r["prompt"] for r in data["completions"]] == list(task.SOURCE_PROMPTS)
    assert all(len(r["prompt"]) + len(r["completion"]) == 24 for r in data["completions"])
    assert np.array(data["composition"]["k"]).shape == (4, 4)
    assert set(data["block_length_accuracy"]) == {"4", "5", "6", "7", "8"}
    assert (tmp_path / "induction-2l" / "analysis.md").read_text().count("|") > 50
    rc = render_main(["induction", "complete", str(tiny_runs["induction-smeared"]), "--prompt", "ABCDEF"])
    assert rc == 0 and "ABCDEF" in capsys.readouterr().out


@pytest.mark.parametrize(
    "prompt,message",
    [("ABC1", "outside the alphabet"), ("abc", "outside the alphabet"), ("A" * 25, "longer than the context")],
)
def test_bad_prompt_is_one_line_exit_2(tiny_runs, prompt, message, capsys):
    rc = render_main(["induction", "complete", str(tiny_runs["induction-smeared"]), "--prompt", prompt])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and message in err and len(err.splitlines()) == 1


def test_unknown_variant_and_foreign_run_exit_2(tmp_path, capsys):
    assert pipeline_main(["train", "induction-3l", "--out", str(tmp_path / "x.h5")]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown experiment 'induction-3l'" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x.h5").exists()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "headmovies",
            "induction",
            "report",
            str(tmp_path / "missing.h5"),
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


# --- the movie's timeline and snippet ---------------------------------------------------------------


def test_induction_timeline_marks_accuracy_that_lasts():
    from headmovies.render.induction.movie import induction_timeline

    epochs = np.array([0, 100, 200, 300, 400, 500])
    metrics = {"epoch": epochs, "heldout_acc": np.array([0.1, 0.6, 0.4, 0.6, 0.95, 0.97])}
    config = {"epochs": 500, "early_every": 100, "switch_epoch": 300, "late_every": 100}  # no switch: same spacing
    tl = induction_timeline(epochs, metrics, config)
    assert [(e.epoch, e.label) for e in tl.events] == [(300, "accuracy ≥ 50%"), (400, "accuracy ≥ 90%")]
    assert tl.curves[0].values.tolist() == pytest.approx([10, 60, 40, 60, 95, 97])
    tl = induction_timeline(epochs, metrics, {**config, "early_every": 50})
    assert next((e.epoch, e.hold) for e in tl.events) == (300, False)  # the schedule switch is marked, not held


@pytest.mark.slow
def test_attention_movie_has_timeline_holds_and_caption(tiny_runs, tmp_path):
    from headmovies.render.core.timeline import hold_frames
    from headmovies.render.induction.movie import induction_timeline

    from test_encode import probe

    run = tiny_runs["induction-smeared"]
    rc = render_main(
        [
            "induction",
            "report",
            str(run),
            "--out",
            str(tmp_path),
            "--formats",
            "mp4,png,html",
            "--fps",
            "8",
            "--hold",
            "0",
            "--event-hold",
            "1",
            "--sequences",
            "64",
            "--no-progress",
        ]
    )
    assert rc == 0
    with Run(run) as r:
        tl = induction_timeline(r.epochs, r.metrics(), r.config)
        held = int(hold_frames(r.epochs, tl.events, 8, 1.0).sum())
    folder = tmp_path / "induction-smeared"
    assert probe(folder / "attention_movie.mp4")[1] == 5 + held
    html = (folder / "attention_movie.html").read_text()
    assert html.index("attention_movie.mp4") < html.index("<figcaption")
    import imageio.v3 as iio  # the movie's poster does not replace the attention figure

    assert iio.imread(folder / "attention.png").shape != iio.imread(folder / "attention_movie.png").shape
    assert "trained 40 epochs on sequences of 24 letters made of a repeated block of 6" in html


def test_induction_runs_record_the_probe_scores(tiny_runs):
    """The built-in runs store the probe (/probe): each head's scores at every snapshot, and
    patterns equal to the layer's own (return_pattern) on the probe batch."""
    from headmovies.train.head_scores import head_scores

    with Run(tiny_runs["induction-2l"]) as run:
        scores, tokens = run.head_scores(), run.probe_tokens()
        assert tokens.shape == (8, 24) and np.array_equal(tokens[:, :12], tokens[:, 12:])
        assert scores["induction"].shape == (5, 2, 4) and np.isfinite(scores["induction"]).all()
        assert run.in_context_scores().shape == (5,) and np.isfinite(run.in_context_scores()).all()
        assert run.patterns(-1).shape == (2, 2, 4, 24, 24)  # [S, L, H, P, P]
    task = Induction2L(cfg_of(Induction2L))
    x = task.model.W_E[torch.tensor(tokens[:2])]
    _, own = task.model.blocks[0].attn(x, task.model.W_pos, return_pattern=True)
    record = task.probe_record()
    np.testing.assert_allclose(record["patterns"][:, 0].astype(np.float32), own.detach().numpy(), atol=1e-3)
    full = head_scores(record["patterns"].astype(np.float32), tokens[:2])
    assert full["induction"].shape == (2, 4)


def test_view_scores_draws_an_induction_run_in_score_space(tiny_runs, tmp_path, capsys):
    """`headmovies view RUN --view scores` of a built-in induction run: the generic viewer, one
    plane per layer, each head at its recorded (previous-token, induction) scores."""
    from scatter_pages import payload_of

    from headmovies.render.core.viewer_page.build import unpack

    run = tiny_runs["induction-2l"]
    assert render_main(["view", str(run), "--out", str(tmp_path / "v"), "--view", "scores"]) == 0
    data = payload_of((tmp_path / "v" / "viewer.html").read_text())
    assert data["meta"]["family"] == "generic" and data["meta"]["detail"]["view"] == "scores"
    assert [p["title"] for p in data["meta"]["planes"]] == ["layer 0 (4 heads)", "layer 1 (4 heads)"]
    coords = unpack(data["arrays"])["coords"]  # [T, L, 8, 2]
    with Run(run) as r:
        scores = r.head_scores()
    np.testing.assert_allclose(coords[:, 1, 4:, 0], scores["previous_token"][:, 1], rtol=1e-6)
    np.testing.assert_allclose(coords[:, 1, 4:, 1], scores["induction"][:, 1], rtol=1e-6)
    assert np.isnan(coords[:, 1, :4]).all() and np.isnan(coords[:, 0, 4:]).all()

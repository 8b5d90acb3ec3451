"""OV-coherent superposition (source 004): generator, exact evaluation, analyses on a hand-built
2-head solution with known answers, training/resume, bad input. Tiny configs only."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch

from headmovies.cli import main as pipeline_main
from headmovies.cli import main as render_main
from headmovies.render.ov_coherent import analysis
from headmovies.render.ov_coherent.analysis import Analysis, HeadResult
from headmovies.runfile.reader import Run
from headmovies.tasks import ov_coherent as ov_task
from headmovies.train import config as pconfig
from headmovies.train import ov_coherent as ov_train
from headmovies.train.loop import train
from headmovies.train.orbits.config import OrbitConfig

# ------------------------------------------------------------------ generator


def test_generator_sequences_follow_the_task():
    tokens, labels = ov_train.sample_batch(4000, 10, torch.Generator().manual_seed(0))
    t = tokens.numpy()
    assert t.shape == (4000, 10)
    assert (t[:, -1] == ov_task.READOFF).all() and (t[:, :-1] != ov_task.READOFF).all()
    is_signal = (t >= 1) & (t <= 4)
    assert (is_signal.sum(1) == 2).all()  # exactly two signal tokens
    rest = t[:, :-1][~is_signal[:, :-1]]
    assert ((rest >= 5) & (rest <= 11)).all() and len(np.unique(rest)) == 7  # noise 5-11 elsewhere
    pairs = np.sort(t[is_signal].reshape(-1, 2), axis=1)
    expected = [ov_task.CLASSES.index((a, b)) for a, b in pairs]
    assert (labels.numpy() == expected).all()


def test_label_is_symmetric_and_every_class_reachable():
    table = ov_task.class_table()
    sig = list(ov_task.SIGNAL)
    assert (table[sig][:, sig] == table[sig][:, sig].T).all()
    assert sorted(np.unique(table[sig][:, sig]).tolist()) == list(range(10))
    _, labels = ov_train.sample_batch(2000, 10, torch.Generator().manual_seed(1))
    assert set(labels.tolist()) == set(range(10))


def test_class_frequencies_equal_pairs_half_as_frequent():
    n = 160_000
    _, labels = ov_train.sample_batch(n, 10, torch.Generator().manual_seed(2))
    counts = Counter(labels.tolist())
    for c, (a, b) in enumerate(ov_task.CLASSES):
        expected = n * (1 if a == b else 2) / 16
        sd = np.sqrt(expected * (1 - expected / n))
        assert abs(counts[c] - expected) < 5 * sd, (c, counts[c], expected)


def test_signal_positions_cover_every_slot():
    tokens, _ = ov_train.sample_batch(5000, 6, torch.Generator().manual_seed(3))
    t = tokens.numpy()
    hits = ((t >= 1) & (t <= 4)).sum(0)
    assert hits[-1] == 0 and (np.abs(hits[:-1] - 2 * 5000 / 5) < 200).all()  # uniform over 5 slots


# ------------------------------------------------------------------ exact evaluation


def test_exact_cases_probabilities_and_training_evaluates_on_them():
    cases = ov_task.task_cases(6)
    counts, labels, probs = cases.counts, cases.labels, cases.probs
    assert cases.exact and len(cases) == ov_task.n_exact_cases(6) == 10 * 84
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-12)
    task = ov_train.OVCoherentTask(pconfig.resolve(ov_train.OVCoherentConfig, sets={"seq_len": "6"}))
    np.testing.assert_array_equal(task.eval_counts.numpy(), counts)
    np.testing.assert_array_equal(task.eval_labels.numpy(), labels)
    mass = np.bincount(labels, probs, 10)
    np.testing.assert_allclose(mass, [(1 if a == b else 2) / 16 for a, b in ov_task.CLASSES], rtol=1e-12)
    assert (counts.sum(1) == 6).all() and (counts[:, 0] == 1).all()


def test_numpy_analysis_reproduces_the_torch_model():
    torch.manual_seed(0)
    model = ov_train.ReadoffAttention(n_heads=3, d_head=2)
    tokens, _ = ov_train.sample_batch(64, 10, torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = model(tokens).numpy()
        counts = torch.nn.functional.one_hot(tokens, 12).sum(1)
        np.testing.assert_allclose(model.forward_counts(counts.float()).numpy(), want, atol=1e-5)
    weights = {k: v.numpy() for k, v in model.state_dict().items()}
    got = analysis.logits(weights, counts.numpy())
    np.testing.assert_allclose(got, want, atol=1e-4)


# ------------------------------------------------------------------ hand-built solution

GAP = 30.0  # QK gap between ranks: attention leaks ~ 9 e^-30 off the top token


def hand_built() -> dict[str, np.ndarray]:
    """2 heads, d_head 1. Head 1 ranks 1 > 2 > 3 > 4 > noise (attends to min(A, B)) and writes
    min; head 2 ranks 4 > 3 > 2 > 1 (attends to max) and writes max + 10. z = (min, max + 10) is
    read out by nearest point: logit_c = 2 p_c . z - |p_c|^2 with p_c = (a, b + 10)."""
    H, d = 2, 12
    W_Q = np.zeros((H, d, 1))
    W_K = np.zeros((H, d, 1))
    W_V = np.zeros((H, d, 1))
    W_O = np.zeros((H, 1, d))
    W_U = np.zeros((d, 10))
    W_Q[:, 0, 0] = 1.0
    for t in ov_task.SIGNAL:
        W_K[0, t, 0] = GAP * (5 - t)
        W_K[1, t, 0] = GAP * t
        W_V[0, t, 0] = t
        W_V[1, t, 0] = t + 10
    W_O[0, 0, 1] = W_O[1, 0, 2] = 1.0  # z_1 -> residual dim 1, z_2 -> dim 2
    for c, (a, b) in enumerate(ov_task.CLASSES):
        p = np.array([a, b + 10.0])
        W_U[1:3, c] = 2 * p
        W_U[0, c] = -p @ p  # bias through the read-off's own residual e_0
    return {"W_E": np.eye(d), "W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": W_O, "W_U": W_U}


def test_hand_built_solution_is_perfect_with_opposite_orderings():
    result = analysis.analyse(hand_built(), ov_task.task_cases(10))
    assert result.acc == pytest.approx(1.0, abs=1e-12)
    assert result.class_acc == pytest.approx([1.0] * 10, abs=1e-12)
    assert result.heads[0].ordering == [1, 2, 3, 4]
    assert result.heads[1].ordering == [4, 3, 2, 1]
    assert result.heads[0].ordering_text == "1 > 2 > 3 > 4 > noise"
    assert result.opposite is True and result.kendall_tau == -1.0
    assert result.hard_attention_agreement == pytest.approx(1.0)
    att = np.array(result.attention_by_pair)
    # head 1 puts all its attention on the smaller token of a mixed pair, head 2 on the larger
    for a in range(1, 5):
        for b in range(a + 1, 5):
            assert att[0, a - 1, b - 1] == pytest.approx(1.0, abs=1e-9)
            assert att[1, b - 1, a - 1] == pytest.approx(1.0, abs=1e-9)


def test_hand_built_solution_scores_100_percent_in_the_torch_task():
    cfg = pconfig.resolve(ov_train.OVCoherentConfig, sets={"seq_len": "8"})
    task = ov_train.OVCoherentTask(cfg)
    task.model.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in hand_built().items()})
    metrics = task.evaluate()
    assert metrics["acc"] == pytest.approx(1.0, abs=1e-9)
    assert metrics["worst_class_acc"] == pytest.approx(1.0, abs=1e-9)


def test_ablating_a_head_changes_predictions_as_the_analysis_says():
    w, cases = hand_built(), ov_task.task_cases(10)
    result = analysis.analyse(w, cases)
    h1, h2 = result.heads
    # head 1 (reads min) off: z = (0, max+10), nearest p_c is (1, max+10): right iff min = 1
    with_one = [1.0 if a == 1 else 0.0 for a, _ in ov_task.CLASSES]
    assert h1.ablated_class_acc == pytest.approx(with_one, abs=1e-9)
    assert h1.ablated_acc == pytest.approx(7 / 16, abs=1e-9)
    # head 2 (reads max) off: z = (min, 0): every case is read as {1,1}
    assert h2.ablated_class_acc == pytest.approx([1.0] + [0.0] * 9, abs=1e-9)
    assert h2.ablated_acc == pytest.approx(1 / 16, abs=1e-9)
    # and the ablated model does what hard attention + the OV tables predict, case by case
    for h in (0, 1):
        model = analysis.logits(w, cases.counts, ablate=(h,)).argmax(-1)
        explained = analysis.hard_attention_predictions(w, cases, ablate=(h,))
        np.testing.assert_array_equal(model, explained)


def test_opposite_needs_exact_reversal_and_noise_is_placed():
    assert analysis.are_opposite((1, 2, 3, 4), (4, 3, 2, 1))
    assert not analysis.are_opposite((1, 2, 3, 4), (4, 3, 1, 2))
    row = np.zeros(12)
    row[[1, 2, 3, 4]] = [3.0, -1.0, 2.0, 1.0]  # noise at 0 sits between 4 and 2
    assert analysis.preference_ordering(row) == (1, 3, 4, 2)
    assert analysis.format_ordering(row) == "1 > 3 > 4 > noise > 2"
    other = np.zeros(12)
    other[[1, 2, 3, 4]] = [0.0, 1.0, 2.0, 3.0]  # 4 > 3 > 2 > 1
    # pairs (1,2) (1,3) (1,4) discordant; (2,3) (2,4) concordant; (3,4) discordant -> (2 - 4) / 6
    assert analysis.kendall_tau(row, other) == pytest.approx(-2 / 6)
    assert analysis.kendall_tau(row, row) == 1.0


# ------------------------------------------------------------------ training, resume, command

TINY = {"seq_len": "6", "batch": "16", "early_every": "5", "switch_epoch": "20", "late_every": "10"}


def _cfg(**extra):
    return pconfig.resolve(ov_train.OVCoherentConfig, sets={**TINY, **{k: str(v) for k, v in extra.items()}})


def test_run_file_holds_named_weights_and_resume_is_bit_exact(tmp_path):
    whole, part = tmp_path / "whole.h5", tmp_path / "part.h5"
    train("ov-coherent", _cfg(epochs=30), whole, progress=False)
    train("ov-coherent", _cfg(epochs=15), part, progress=False)
    train("ov-coherent", _cfg(epochs=30), part, resume=True, progress=False)
    with Run(whole) as a, Run(part) as b:
        assert a.experiment == "ov-coherent" and a.complete
        np.testing.assert_array_equal(a.epochs, b.epochs)
        wa, wb = a.weights(-1), b.weights(-1)
        assert wa["W_Q"].shape == (2, 12, 1) and wa["W_O"].shape == (2, 1, 12) and wa["W_U"].shape == (12, 10)
        np.testing.assert_array_equal(wa["W_E"], np.eye(12, dtype=np.float32))
        for name in ov_task.WEIGHT_NAMES:
            np.testing.assert_array_equal(wa[name], wb[name])
        ma, mb = a.metrics(), b.metrics()
        assert set(ma) >= {"epoch", "loss", "acc", "worst_class_acc"}
        np.testing.assert_array_equal(ma["acc"], mb["acc"])
        # the metric is the exact accuracy of the stored weights
        cases = ov_task.task_cases(6)
        exact, _ = analysis.accuracy(analysis.logits(wa, cases.counts).argmax(-1), cases)
        assert ma["acc"][-1] == pytest.approx(exact, abs=1e-5)


@pytest.mark.parametrize(
    "sets, needle",
    [
        (["seq_len=2"], "seq_len"),
        (["n_heads=0"], "n_heads"),
        (["d_head=0"], "d_head"),
        (["weight_decay=-1"], "weight_decay"),
        (["lr_schedule=step"], "lr_schedule"),
        (["warmup=99999", "epochs=10"], "warmup"),
        (["signal_weights=1,2,3"], "signal_weights"),
        (["signal_weights=1,0,1,1"], "signal_weights"),
        (["signal_weights=a,b,c,d"], "signal_weights"),
        (["unembed=fixed"], "unembed"),
    ],
)
def test_bad_config_is_one_line_and_exit_2(tmp_path, capsys, sets, needle):
    argv = ["train", "ov-coherent", "--out", str(tmp_path / "x.h5"), "--no-progress"]
    for s in sets:
        argv += ["--set", s]
    assert pipeline_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.slow
def test_render_command_writes_table_and_figures(tmp_path, capsys):
    run = tmp_path / "tiny.h5"
    train("ov-coherent", _cfg(epochs=10), run, progress=False)
    out = tmp_path / "out"
    assert render_main(["ov-coherent", "report", str(run), "--out", str(out), "--movie", "none"]) == 0
    rows = json.loads((out / "summary.json").read_text())
    assert len(rows) == 1 and rows[0]["epoch"] == 10 and rows[0]["seq_len"] == 6
    assert len(rows[0]["heads"]) == 2 and sorted(rows[0]["heads"][0]["ordering"]) == [1, 2, 3, 4]
    for name in ("summary.md", "training.png", "orderings.png", "tiny/analysis.png", "tiny/analysis.json"):
        assert (out / name).stat().st_size > 0, name
    assert not list(out.rglob("*.tmp"))
    capsys.readouterr()
    # a run of another experiment: one line, exit 2, nothing written
    other = tmp_path / "orbits.h5"
    train(
        "orbits",
        pconfig.resolve(OrbitConfig, sets={"p": "3", "n_heads": "1", "d_model": "4", "epochs": "1"}),
        other,
        progress=False,
    )
    assert render_main(["ov-coherent", "report", str(other), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ov-coherent" in err
    assert not (tmp_path / "o2").exists()


# ------------------------------------------------------------------ movie frames


def test_movie_keeps_every_dot_in_view_and_shrinks_smoothly():
    from headmovies.render.core.frame_states import MARGIN
    from headmovies.render.ov_coherent.movie import QKPlaneMovie

    T = 12
    epochs = np.arange(T) * 10
    qk = np.zeros((T, 2, 12))
    qk[:6, 0, 1] = 8.0  # a far dot for 6 frames, then it jumps back near 0
    qk[6:, 0, 1] = 0.5
    qk[:, 1, 4] = np.linspace(0, 2, T)
    movie = QKPlaneMovie(epochs, qk, None, trail=0, size_px=200, dpi=50)
    try:
        limits = []
        for t, frame in enumerate(movie.frames()):
            assert frame.dtype == np.uint8 and frame.shape[2] == 3
            assert frame.shape[0] % 2 == 0 and frame.shape[1] % 2 == 0
            lim = movie.ax.get_xlim()[1]
            assert movie.ax.get_ylim() == (-lim, lim) and movie.ax.get_xlim() == (-lim, lim)
            assert np.abs(movie.xy[t]).max() <= lim
            limits.append(lim)
    finally:
        movie.close()
    assert limits[5] == pytest.approx(MARGIN * 8.0)  # the one easing rule (frame_states)
    assert limits[5] > limits[6] > limits[7] > limits[11] > MARGIN * 2.0  # shrinks, but not at once


# ------------------------------------------------------------------ timeline and snippet


def test_ov_coherent_timeline_dates_opposite_orderings_and_accuracy():
    from headmovies.render.ov_coherent.movie import opposite_over_time, ov_coherent_timeline

    epochs = np.array([0, 10, 20, 30, 40])
    qk = np.zeros((5, 2, 12))
    qk[:, 0, 1:5] = [4, 3, 2, 1]  # head 1 prefers 1 > 2 > 3 > 4
    qk[:, 1, 1:5] = [[4, 3, 2, 1], [1, 2, 3, 4], [2, 1, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]]
    assert opposite_over_time(qk).tolist() == [False, True, False, True, True]
    metrics = {"epoch": epochs, "acc": np.array([0.2, 0.995, 0.98, 0.99, 1.0])}
    tl = ov_coherent_timeline(
        epochs, qk, metrics, {"epochs": 40, "early_every": 10, "switch_epoch": 40, "late_every": 10}
    )
    assert [(e.epoch, e.label) for e in tl.events] == [(30, "orderings opposite"), (30, "accuracy ≥ 99%")]


@pytest.mark.slow
def test_qk_plane_movie_has_timeline_and_caption(tmp_path):
    from test_encode import probe

    run = tmp_path / "tiny.h5"
    train("ov-coherent", _cfg(epochs=10), run, progress=False)
    out = tmp_path / "out"
    assert (
        render_main(
            [
                "ov-coherent",
                "report",
                str(run),
                "--out",
                str(out),
                "--formats",
                "mp4,html",
                "--fps",
                "8",
                "--hold",
                "0",
                "--event-hold",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    with Run(run) as r:
        snapshots = len(r)
    assert probe(out / "tiny" / "qk_plane.mp4")[1] == snapshots  # --event-hold 0: one frame per snapshot
    html = (out / "tiny" / "qk_plane.html").read_text()
    assert "<figcaption" in html and "trained 10 epochs to name the unordered pair of signal tokens" in html


def test_the_analysis_is_typed_and_its_json_keeps_the_stored_keys():
    """`analyse` returns an `Analysis`; its JSON form (analysis.json, summary.json) has the
    keys the report has always written, in their order, each head's too."""
    result = analysis.analyse(hand_built(), ov_task.task_cases(10))
    assert isinstance(result, Analysis) and isinstance(result.heads[0], HeadResult)
    d = result.to_dict()
    assert list(d) == [
        "acc", "class_acc", "worst_class_acc", "exact", "n_heads", "d_head", "heads", "opposite", "kendall_tau",
        "attention_by_pair", "class_contributions", "hard_attention_agreement", "hard_attention_acc",
    ]  # fmt: skip
    assert list(d["heads"][1]) == [
        "head", "qk_readoff", "qk_signal_minus_noise", "ordering", "ordering_text", "ablated_acc",
        "ablated_class_acc", "ov_signal",
    ]  # fmt: skip
    assert d["heads"][1]["ordering"] == [4, 3, 2, 1] and d["opposite"] is True
    assert json.loads(json.dumps(d)) == d


# ------------------------------------------------------------------ sweep knobs and the settle epoch


def test_orderings_settle_epoch_is_the_first_snapshot_of_the_final_orderings():
    epochs = np.array([0, 1, 2, 25, 50, 75])
    qk = np.zeros((6, 2, 12))
    qk[:, 0, 1:5] = [4, 3, 2, 1]  # head 1: 1 > 2 > 3 > 4 throughout
    # head 2 changes at 1 and 25, is back at the final ordering at 2 but leaves it again at 25
    qk[:, 1, 1:5] = [[1, 2, 3, 4], [4, 3, 2, 1], [1, 2, 3, 4], [1, 3, 2, 4], [1, 2, 3, 4], [1, 2, 3, 4]]
    assert analysis.orderings_settle_epoch(epochs, qk) == 50
    assert analysis.orderings_settle_epoch(epochs[:1], qk[:1]) == 0  # one snapshot: settled from it
    still = qk.copy()
    still[:, 1, 1:5] = [1, 2, 3, 4]
    assert analysis.orderings_settle_epoch(epochs, still) == 0  # never changed
    still[-1, 0, 1:5] = [3, 4, 2, 1]  # head 1 swaps 1 and 2 at the last snapshot
    assert analysis.orderings_settle_epoch(epochs, still) == 75
    assert analysis.orderings_settle_epoch(epochs, qk[:, :1]) is None  # one head: no pair of orderings


def test_orderings_detail_reads_the_row():
    from headmovies.render.ov_coherent.summary import orderings_detail

    row = {
        "orderings": ["1 > 2 > 3 > 4 > noise", "4 > 3 > noise > 2 > 1"],
        "kendall_tau": -1.0,
        "hard_attention_agreement": 0.875,
        "orderings_settle_epoch": 1250,
    }
    assert orderings_detail(row) == "1234 / 4321, τ -1.00, hard 87.5%, settled at 1,250"
    assert orderings_detail({"orderings": ["1 > 2 > 3 > 4"], "kendall_tau": None}) == ""


def test_signal_weights_set_token_and_class_frequencies_exactly():
    np.testing.assert_array_equal(ov_task.signal_probs(), [0.25] * 4)
    np.testing.assert_allclose(ov_task.signal_probs("4,3,2,1"), [0.4, 0.3, 0.2, 0.1], rtol=1e-15)
    probs = ov_task.class_probs("4,3,2,1")
    assert probs.sum() == pytest.approx(1.0, abs=1e-15)
    assert probs[ov_task.CLASSES.index((1, 1))] == pytest.approx(0.16) and probs[
        ov_task.CLASSES.index((1, 4))
    ] == pytest.approx(2 * 0.4 * 0.1)
    cases = ov_task.task_cases(6, signal_weights="4,3,2,1")
    np.testing.assert_allclose(np.bincount(cases.labels, cases.probs, 10), probs, rtol=1e-12)
    # the default weights give the source's distribution bit for bit
    np.testing.assert_array_equal(ov_task.task_cases(6).probs, ov_task.task_cases(6, signal_weights="2,2,2,2").probs)
    # the sampled cases of a long context follow the weights too
    long = ov_task.task_cases(16, signal_weights="4,3,2,1")
    assert not long.exact
    mass = np.bincount(long.labels, long.probs, 10)
    sd = np.sqrt(probs * (1 - probs) / ov_task.SAMPLE_CASES)
    assert (np.abs(mass - probs) < 5 * sd).all()
    # and so do the training batches
    n = 100_000
    tokens, labels = ov_train.sample_batch(n, 6, torch.Generator().manual_seed(5), ov_task.signal_probs("4,3,2,1"))
    freq = np.bincount(tokens.numpy().ravel(), minlength=12)[1:5] / (2 * n)
    np.testing.assert_allclose(freq, [0.4, 0.3, 0.2, 0.1], atol=0.005)
    is_signal = (tokens >= 1) & (tokens <= 4)
    assert (is_signal.sum(1) == 2).all()
    pairs = np.sort(tokens[is_signal].reshape(-1, 2).numpy(), axis=1)
    assert (labels.numpy() == [ov_task.CLASSES.index((a, b)) for a, b in pairs]).all()
    # uniform weights draw exactly as before signal_weights existed
    a = ov_train.sample_batch(64, 10, torch.Generator().manual_seed(7))
    b = ov_train.sample_batch(64, 10, torch.Generator().manual_seed(7), ov_task.signal_probs("3,3,3,3"))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_lr_factor_schedules():
    assert [ov_train.lr_factor(e, 4) for e in range(1, 5)] == [1.0] * 4
    assert [ov_train.lr_factor(e, 4, "linear") for e in range(1, 5)] == [1.0, 0.75, 0.5, 0.25]
    assert [ov_train.lr_factor(e, 4, "cosine") for e in range(1, 5)] == pytest.approx(
        [1.0, (1 + np.cos(np.pi / 4)) / 2, 0.5, (1 + np.cos(3 * np.pi / 4)) / 2]
    )
    assert [ov_train.lr_factor(e, 6, "linear", warmup=2) for e in range(1, 7)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
    assert [ov_train.lr_factor(e, 3, "constant", warmup=3) for e in range(1, 4)] == pytest.approx([1 / 3, 2 / 3, 1.0])


def test_new_keys_leave_the_default_run_as_it_was_and_act_when_set(tmp_path):
    default = _cfg(epochs=5)
    stored = pconfig.config_dict(default)
    assert not {"weight_decay", "lr_schedule", "warmup", "signal_weights"} & stored.keys()
    task = ov_train.OVCoherentTask(default)
    assert type(task.optimizer) is torch.optim.Adam
    # set keys are stored in the run file's config and act: AdamW, the lr on its schedule
    cfg = _cfg(epochs=4, weight_decay=0.5, lr_schedule="linear", signal_weights="4,3,2,1")
    task = ov_train.OVCoherentTask(cfg)
    assert type(task.optimizer) is torch.optim.AdamW and task.optimizer.param_groups[0]["weight_decay"] == 0.5
    lrs = []
    for e in range(1, 5):
        task.step(e)
        lrs.append(task.optimizer.param_groups[0]["lr"])
    assert lrs == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3])
    run = tmp_path / "wd.h5"
    train("ov-coherent", cfg, run, progress=False)
    with Run(run) as r:
        assert r.config["weight_decay"] == 0.5 and r.config["lr_schedule"] == "linear"
        assert r.config["signal_weights"] == "4,3,2,1"
        cases = analysis.run_cases(r)
        np.testing.assert_allclose(np.bincount(cases.labels, cases.probs, 10), ov_task.class_probs("4,3,2,1"))
        # the logged metric is the exact accuracy under the run's own distribution
        w = r.weights(-1)
        exact, _ = analysis.accuracy(analysis.logits(w, cases.counts).argmax(-1), cases)
        assert r.metrics()["acc"][-1] == pytest.approx(exact, abs=1e-6)


def test_weight_decay_shrinks_weights_the_gradient_does_not_hold():
    """With lr 0.1 and weight_decay 1, AdamW multiplies every weight by 0.9 per step besides its
    Adam step; on a huge initialisation the decay dominates and the norm falls, as without it it does not."""
    norms = {}
    for wd in (0.0, 1.0):
        task = ov_train.OVCoherentTask(_cfg(epochs=20, lr=0.1, weight_decay=wd, init_scale=100))
        before = task.model.W_V.detach().norm().item()
        for e in range(1, 21):
            task.step(e)
        norms[wd] = task.model.W_V.detach().norm().item() / before
    assert norms[1.0] < 0.9**20 * 2 and norms[0.0] > 0.5


def test_default_initialisation_is_drawn_as_before():
    torch.manual_seed(3)
    model = ov_train.ReadoffAttention(2, 1, init_scale=0.5)
    torch.manual_seed(3)
    want = [0.5 * torch.randn(2, 12, 1) / np.sqrt(12) for _ in range(3)]
    want += [0.5 * torch.randn(2, 1, 12) / np.sqrt(2), 0.5 * torch.randn(12, 10) / np.sqrt(12)]
    for name, w in zip(["W_Q", "W_K", "W_V", "W_O", "W_U"], want):
        assert torch.equal(getattr(model, name).detach(), w), name


def test_one_hot_unembedding_is_fixed_and_the_analysis_reads_it(tmp_path):
    torch.manual_seed(0)
    model = ov_train.ReadoffAttention(n_heads=2, d_head=1, unembed="one-hot")
    assert model.W_E.shape == (12, 22) and model.W_U.shape == (22, 10) and not model.W_U.requires_grad
    np.testing.assert_array_equal(model.W_U[12:].numpy(), np.eye(10))
    assert not model.W_U[:12].any() and not model.W_Q[:, 12:].any() and not model.W_O[..., :12].any()
    tokens, _ = ov_train.sample_batch(64, 10, torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = model(tokens).numpy()
    counts = torch.nn.functional.one_hot(tokens, 12).sum(1).numpy()
    weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    np.testing.assert_allclose(analysis.logits(weights, counts), want, atol=1e-5)
    assert not analysis.direct_logits(weights).any()  # the read-off's own embedding adds no class logit
    run = tmp_path / "onehot.h5"
    train("ov-coherent", _cfg(epochs=10, unembed="one-hot"), run, progress=False)
    with Run(run) as r:
        assert r.config["unembed"] == "one-hot"
        first, last = r.weights(0), r.weights(-1)
        np.testing.assert_array_equal(first["W_U"], last["W_U"])  # fixed
        assert not last["W_Q"][:, 12:].any() and not last["W_O"][..., :12].any()  # no gradient there
        assert (last["W_O"] != first["W_O"]).any()
        cases = analysis.run_cases(r)
        exact, _ = analysis.accuracy(analysis.logits(last, cases.counts).argmax(-1), cases)
        assert r.metrics()["acc"][-1] == pytest.approx(exact, abs=1e-6)


def test_uniform_attention_control_keeps_every_qk_score_at_zero(tmp_path):
    run = tmp_path / "uniform.h5"
    train("ov-coherent", _cfg(epochs=10, uniform_attention="true"), run, progress=False)
    with Run(run) as r:
        assert r.config["uniform_attention"] is True
        first, last = r.weights(0), r.weights(-1)
        assert not last["W_Q"].any() and not analysis.readoff_qk(last).any()
        np.testing.assert_array_equal(first["W_K"], last["W_K"])  # no gradient reaches W_K either
        assert (first["W_V"] != last["W_V"]).any()
        att = analysis.attention(last, ov_task.task_cases(6).counts)
        np.testing.assert_allclose(att.sum(-1), 1.0)
        np.testing.assert_allclose(att[:, :, 0], 1 / 6)  # the read-off: one of six equal keys
    torch.manual_seed(0)
    a = ov_train.ReadoffAttention(2, 1)
    torch.manual_seed(0)
    b = ov_train.ReadoffAttention(2, 1, uniform=True)
    for name in ("W_K", "W_V", "W_O", "W_U"):  # the other weights start as without the control
        assert torch.equal(getattr(a, name), getattr(b, name))

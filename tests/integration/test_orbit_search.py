"""The search helpers of bench/orbit_search.py and the equivariance-term options they explore
(eq_start / eq_ramp, eq_seq_lens): exact values on hand-built cases."""

from __future__ import annotations

import copy
import math
import sys

import pytest
import torch

from headmovies.errors import ConfigError
from headmovies.sweeps import search as orbit_search
from headmovies.tasks.orbits import M_SHIFT
from headmovies.train import config
from headmovies.train.orbits.config import OrbitConfig
from headmovies.train.orbits.losses import ov_bias_penalty
from headmovies.train.orbits.task import OrbitTask

from equivariant import equivariant_weights


def task_of(**sets) -> OrbitTask:
    cfg = config.resolve(OrbitConfig, sets={k: str(v) for k, v in sets.items()})
    torch.manual_seed(cfg.seed)
    return OrbitTask(cfg)


def load_equivariant(task: OrbitTask, **kw) -> None:
    names = ("W_E", "W_Q", "W_K", "W_V", "W_O", "W_U")
    with torch.no_grad():
        for name, w in zip(names, equivariant_weights(**kw)):
            getattr(task.model, name).copy_(torch.from_numpy(w).float())


def test_eq_weight_is_zero_then_ramps_linearly():
    task = task_of(p=5, n_heads=2, d_model=8, eq_weight=2.0, eq_start=5, eq_ramp=4)
    assert [task.schedule(e)[2] for e in (0, 4, 5, 6, 8, 100)] == [0.0, 0.0, 0.5, 1.0, 2.0, 2.0]
    no_ramp = task_of(p=5, n_heads=2, d_model=8, eq_weight=3.0, eq_start=0, eq_ramp=0)
    assert no_ramp.schedule(0)[2] == 3.0


def test_refine_phase_schedule():
    """Phase 1: cosine over refine_start epochs; phase 2: refine_lr cosine to 0 at `epochs`,
    its own weight decay, lambda ramped from 0, its own sequence lengths."""
    task = task_of(
        p=5,
        n_heads=2,
        d_model=8,
        epochs=30,
        lr=1e-3,
        weight_decay=0.1,
        eq_weight=2.0,
        eq_start=0,
        eq_ramp=0,
        eq_seq_lens="",
        refine_start=10,
        refine_lr=4e-4,
        refine_weight_decay=0.3,
        refine_eq_weight=8.0,
        refine_ramp=4,
        refine_seq_lens="4,6",
        ov_bias_weight=0.5,
        refine_ov_bias_weight=0.02,
    )
    assert task.schedule(0) == (1e-3, 0.1, 2.0, [], 0.5)
    lr5, wd, lam, lens, mu = task.schedule(5)  # half-way through phase 1's cosine
    assert lr5 == pytest.approx(5e-4) and (wd, lam, lens, mu) == (0.1, 2.0, [], 0.5)
    assert task.schedule(10) == (4e-4, 0.3, 2.0, [4, 6], 0.02)  # lambda (e + 1) / ramp * 8 = 2
    assert task.schedule(13)[2] == 8.0
    assert task.schedule(20)[0] == pytest.approx(2e-4)  # half-way through phase 2's cosine


def test_refine_start_at_or_after_the_last_epoch_means_one_phase():
    task = task_of(
        p=5,
        n_heads=2,
        d_model=8,
        epochs=20,
        lr=1e-3,
        refine_start=20,
        refine_seq_lens="4",
        eq_seq_lens="",
        eq_start=0,
        eq_ramp=0,
        eq_weight=1.0,
        weight_decay=0.1,
    )
    assert not task.cfg.refines()
    assert task.schedule(10)[0] == pytest.approx(5e-4)  # cosine over all 20 epochs
    assert task.schedule(19)[1:] == (0.1, 1.0, [], 0.0)


def test_refine_phase_equals_a_fine_tune_of_the_first_phase():
    """One run with a second phase gives the same weights, bit for bit, as the first phase
    alone followed by a fresh task (new AdamW) loaded with its weights and pruned: what
    bench/orbit_search --load --prune measured. The pruned heads stay exactly zero."""
    common = dict(p=5, n_heads=4, d_model=8, eq_weight=1.0, eq_start=2, eq_ramp=3, eq_seq_batch=4)
    refine = dict(
        refine_lr=5e-3,
        refine_weight_decay=0.2,
        refine_eq_weight=4.0,
        refine_ramp=3,
        refine_seq_lens="4",
        refine_prune=0.9,
        refine_ov_bias_weight=0.3,
    )
    one = task_of(**common, **refine, epochs=14, refine_start=8)
    for epoch in range(1, 15):
        one.step(epoch)
    first = task_of(**common, epochs=8)
    for epoch in range(1, 9):
        first.step(epoch)
    second = task_of(
        **{
            **common,
            "epochs": 6,
            "lr": refine["refine_lr"],
            "eq_start": 0,
            "weight_decay": refine["refine_weight_decay"],
            "eq_weight": refine["refine_eq_weight"],
            "eq_ramp": refine["refine_ramp"],
            "eq_seq_lens": refine["refine_seq_lens"],
            "ov_bias_weight": refine["refine_ov_bias_weight"],
        }
    )
    second.model.load_state_dict(first.model.state_dict())
    pruned = second.prune_heads(refine["refine_prune"])
    assert 1 <= len(pruned) < 4
    for epoch in range(1, 7):
        second.step(epoch)
    for name, w in one.model.state_dict().items():
        assert torch.equal(w, second.model.state_dict()[name]), name
    assert not one.model.W_V[pruned].any() and not one.model.W_O[pruned].any()
    kept = [h for h in range(4) if h not in pruned]
    assert one.model.W_O[kept].abs().amin((1, 2)).gt(0).all()


def test_prune_heads_zeroes_exactly_the_heads_below_the_fraction():
    """OV norms in the ratio 1 : 0.5 : 0.2 : 0.05 (W_O scaled): fraction 0.3 prunes the last two,
    0.5 is strict (keeps the head at exactly half), 0 prunes nothing."""
    task = task_of(p=6, n_heads=4, d_model=8)
    with torch.no_grad():
        task.model.W_O.copy_(task.model.W_O[:1].expand(4, -1, -1) * torch.tensor([1.0, 0.5, 0.2, 0.05])[:, None, None])
        task.model.W_V.copy_(task.model.W_V[:1].expand(4, -1, -1))
    assert task.prune_heads(0.0) == []
    assert task.prune_heads(0.3) == [2, 3]
    assert not task.model.W_V[[2, 3]].any() and not task.model.W_O[[2, 3]].any()
    assert task.prune_heads(0.49) == [2, 3] and task.model.W_O[1].any()


def test_ov_bias_penalty_gives_the_rolled_forms_value_and_gradient_bit_for_bit():
    """ov_bias_penalty takes its n rolls as one index_select and adds their gradients by hand;
    the default run was trained with n torch.roll calls, so both must give the same bits. Default
    shapes (32 heads, n = 24, m = 2) and a small odd case, at three scales."""
    from headmovies.tasks.orbits import M_SHIFT

    def rolled(R: torch.Tensor, m: int) -> torch.Tensor:
        OV = R.mT
        beta = (OV - OV.mean(-1, keepdim=True)).mean(1)
        invariant = torch.stack([torch.roll(beta, m * s, -1) for s in range(beta.shape[-1])]).mean(0)
        return OV.shape[1] * (beta - invariant).pow(2).sum()

    gen = torch.Generator().manual_seed(0)
    for (H, n, m), scale in zip([(32, 24, M_SHIFT), (3, 7, 3)] * 3, [1.0, 1.0, 1e-3, 1e-3, 30.0, 30.0]):
        R0 = scale * torch.randn(H, n, n, generator=gen)
        out = []
        for penalty in (ov_bias_penalty, rolled):
            R = R0.clone().requires_grad_()
            loss = penalty(R, m)
            loss.backward()
            out.append((loss.detach(), R.grad))
        assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1]), (H, n, scale)
        assert float(out[0][1].abs().max()) > 0


def test_ov_bias_penalty_is_the_shift_moved_part_of_each_heads_key_independent_column():
    """p = 6, m = 2: shift-invariant outputs are frequencies 0 and 3 (constant and alternating).
    A key-independent column made of those costs nothing; a frequency-1 column c costs p ||c||^2,
    whatever the key-dependent part; with m = 1 only the constant is invariant. Tables here are
    key-major, [H, key, class]; the penalty takes R = their transpose [H, class, key]."""
    p, H = 6, 3
    gen = torch.Generator().manual_seed(0)
    key_dependent = torch.randn(H, p, p, generator=gen, dtype=torch.float64)
    key_dependent = key_dependent - key_dependent.mean(1, keepdim=True)  # zero mean over keys
    k = torch.arange(p, dtype=torch.float64)
    invariant = 2.0 + 0.7 * (-1.0) ** k  # frequencies 0 and 3
    moved = torch.cos(2 * math.pi * k / p) - 0.5 * torch.sin(2 * math.pi * k / p)  # frequency 1
    assert float(ov_bias_penalty(key_dependent.mT, 2)) == pytest.approx(0.0, abs=1e-12)
    OV = key_dependent + invariant  # same column for every key
    assert float(ov_bias_penalty(OV.mT, 2)) == pytest.approx(0.0, abs=1e-12)
    OV[1] += moved
    assert float(ov_bias_penalty(OV.mT, 2)) == pytest.approx(p * float(moved.pow(2).sum()), rel=1e-12)
    alternating = 0.7 * (-1.0) ** k
    assert float(ov_bias_penalty(OV.mT, 1)) == pytest.approx(
        p
        * (
            H * float(alternating.pow(2).sum())
            + float((alternating + moved).pow(2).sum())
            - float(alternating.pow(2).sum())
        ),
        rel=1e-12,
    )


def test_bad_refine_settings_are_config_errors():
    for bad in (
        dict(refine_start=-1),
        dict(refine_start=5, epochs=50, refine_lr=0.0),
        dict(refine_lr=-1.0),
        dict(eq_seq_lens="4,x"),
        dict(refine_seq_lens="0"),
        dict(eq_seq_lens=","),
        dict(eq_seq_lens="4,,8"),
        dict(eq_seq_lens="+4"),
        dict(eq_seq_lens="\u0664"),
        dict(refine_seq_lens="65"),
        dict(lr="nan"),
        dict(refine_lr="inf"),
        dict(eq_weight="nan"),
        dict(refine_prune=1.0),
        dict(refine_prune=-0.1),
        dict(ov_bias_weight=-1.0),
        dict(refine_ov_bias_weight=-0.01),
    ):
        with pytest.raises(ConfigError):
            task_of(p=5, n_heads=2, d_model=8, **bad)


def test_sequence_term_equals_its_definition():
    """mean over x (every shift of each drawn sequence) and s != 0 of
    ||l(x+s) - roll_{2s} l(x)||^2, times 3 / L, from the layer's own per-sample path."""
    p, L, B = 6, 4, 3
    task = task_of(p=p, n_heads=3, d_model=8, eq_seq_lens=str(L), eq_seq_batch=B)
    state = task.generator.get_state()
    with torch.no_grad():
        fast = float(task._seq_eq_loss(L))
    task.generator.set_state(state)
    x = torch.randint(0, p, (B, L), generator=task.generator)
    m = task.model

    def logp(tokens):  # per-sample attention, any length
        e = m.W_E[tokens]
        q, k, v = (torch.einsum("bid,hde->bhie", e, W) for W in (m.W_Q, m.W_K, m.W_V))
        att = (q @ k.transpose(-1, -2) / math.sqrt(m.d_head)).softmax(-1)
        return (torch.einsum("bhie,hed->bid", att @ v, m.W_O) @ m.W_U).log_softmax(-1)

    with torch.no_grad():
        total = sum(
            ((logp((x + a + s) % p) - torch.roll(logp((x + a) % p), M_SHIFT * s, -1)) ** 2).sum()
            for a in range(p)
            for s in range(1, p)
        )
    assert fast == pytest.approx(float(total) / (B * p * (p - 1)) * 3 / L, rel=1e-5)


def test_search_helpers_see_exact_orbits_and_their_breaking():
    task = task_of(p=24, n_heads=16, d_model=32, d_head=4)
    load_equivariant(task, n=24, m=2, orbit_sizes=(12, 4), d_model=32, d_head=4)
    summary = orbit_search.orbit_summary(task, M_SHIFT, 0.02)
    assert summary["orbit_sizes"] == [12, 4] and summary["n_dead"] == 0
    assert orbit_search.seq_eq_error(task.model, M_SHIFT, length=5, n_seq=32) < 1e-5
    with torch.no_grad():
        task.model.W_Q[0] *= 1.5  # one head of the 12-orbit no longer matches its partners
    summary = orbit_search.orbit_summary(task, M_SHIFT, 0.02)
    assert summary["orbit_sizes"] == [4] and summary["closest"][0] < 0.02
    assert orbit_search.seq_eq_error(task.model, M_SHIFT, length=5, n_seq=32) > 1e-3


def test_refine_phase_has_the_grid_term_even_when_eq_weight_is_zero():
    """eq_weight = 0 (cross-entropy only in phase 1) must not switch the grid term off in
    phase 2, where lambda comes from refine_eq_weight: the runs agree to the end of phase 1
    and differ after it."""
    common = dict(
        p=5,
        n_heads=3,
        d_model=8,
        epochs=12,
        eq_weight=0.0,
        eq_start=0,
        eq_ramp=0,
        refine_start=6,
        refine_ramp=1,
        refine_seq_lens="",
    )
    with_term, ce_only = task_of(**common, refine_eq_weight=3.0), task_of(**common, refine_eq_weight=0.0)
    for epoch in range(1, 13):
        with_term.step(epoch)
        ce_only.step(epoch)
        same = torch.equal(with_term.model.W_Q, ce_only.model.W_Q)
        assert same if epoch <= 6 else not same
    assert with_term.evaluate()["eq_loss"] > 0


@pytest.mark.parametrize("saved_at", [7, 8, 9])
def test_state_restored_around_the_phase_boundary_continues_bit_exactly(saved_at):
    """What --resume relies on: a task restored from a state saved just before, at, or just after
    refine_start (where heads are pruned and AdamW restarts) ends equal to an uninterrupted run."""
    sets = dict(
        p=5,
        n_heads=4,
        d_model=8,
        eq_weight=1.0,
        eq_start=2,
        eq_ramp=3,
        eq_seq_batch=4,
        eq_seq_lens="3",
        epochs=12,
        refine_start=8,
        refine_prune=0.9,
        refine_ov_bias_weight=0.3,
    )
    whole = task_of(**sets)
    for epoch in range(1, 13):
        whole.step(epoch)
    first = task_of(**sets)
    for epoch in range(1, saved_at + 1):
        first.step(epoch)
    state = copy.deepcopy(first.state_dict())
    rng = torch.get_rng_state()
    resumed = task_of(**sets)
    resumed.load_state_dict(state)
    torch.set_rng_state(rng)
    for epoch in range(saved_at + 1, 13):
        resumed.step(epoch)
    for name, w in whole.model.state_dict().items():
        assert torch.equal(w, resumed.model.state_dict()[name]), name
    assert (whole.model.W_O.flatten(1).abs().sum(1) == 0).sum() >= 1  # something was pruned


@pytest.mark.slow
def test_bench_load_and_prune_errors_are_one_line(tmp_path):
    """--load of an empty file, of a non-weights file and of a model of another shape, and --prune
    out of range or without --load: one line on stderr each, no traceback; a fine-tune row names
    its --load and --prune."""
    import subprocess

    tiny = [
        "--set",
        "p=5",
        "--set",
        "n_heads=2",
        "--set",
        "d_model=8",
        "--epochs",
        "2",
        "--every",
        "2",
        "--log",
        str(tmp_path / "log.jsonl"),
    ]
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "text.pt").write_text("not weights\n")
    other = task_of(p=6, n_heads=2, d_model=8)
    torch.save(other.model.state_dict(), tmp_path / "p6.pt")
    task = task_of(p=5, n_heads=2, d_model=8)
    torch.save(task.model.state_dict(), tmp_path / "p5.pt")

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "headmovies.sweeps.search", *tiny, *args], capture_output=True, text=True
        )

    for name, says in (("empty.pt", "EOFError"), ("text.pt", "not a weights file"), ("p6.pt", "size mismatch")):
        done = run("--load", str(tmp_path / name))
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    for args, says in (
        (["--prune", "1", "--load", str(tmp_path / "p5.pt")], "fraction in [0, 1)"),
        (["--prune", "0.3"], "needs --load"),
    ):
        done = run(*args)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    done = run("--load", str(tmp_path / "p5.pt"), "--prune", "0.3")
    assert done.returncode == 0, done.stderr
    assert f"load {tmp_path / 'p5.pt'}, prune 0.3 |" in done.stdout


@pytest.mark.slow
def test_search_table_and_numbers_errors_are_one_line(tmp_path):
    """--table of a missing file, a folder, a non-JSON file and a census file, --every 0, bad
    --seeds (empty, reversed, not numbers) and an unknown --set key: one line on stderr each,
    exit 2, no traceback, and no run trained (no log written); a real log's final rows print."""
    import subprocess

    (tmp_path / "text.txt").write_text("not json\n")
    (tmp_path / "other.jsonl").write_text('{"version": 4, "recipe": "x"}\n')

    def run(*args):
        return subprocess.run([sys.executable, "-m", "headmovies.sweeps.search", *args], capture_output=True, text=True)

    for args, says in (
        (["--table", str(tmp_path / "nope.jsonl")], "cannot read search log"),
        (["--table", str(tmp_path)], "cannot read search log"),
        (["--table", str(tmp_path / "text.txt")], "is not a search log"),
        (["--table", str(tmp_path / "other.jsonl")], "is not a search log"),
        (["--every", "0"], "--every must be >= 1, got 0"),
        (["--epochs", "-5"], "--epochs must be >= 1, got -5"),
        *(
            (
                ["--seeds", seeds, "--epochs", "2", "--every", "2", "--log", str(tmp_path / "l.jsonl")],
                f"--seeds takes non-negative integers and ranges, e.g. 0-199 or 0,3,5; got {seeds!r}",
            )
            for seeds in ("a-b", "", "5-3")
        ),
        (
            ["--seeds", "1", "--set", "foo=1", "--epochs", "2", "--every", "2", "--log", str(tmp_path / "l.jsonl")],
            "unknown config key 'foo'",
        ),
    ):
        done = run(*args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
        assert not (tmp_path / "l.jsonl").exists()
    log = tmp_path / "log.jsonl"
    done = run(
        "--set",
        "p=5",
        "--set",
        "n_heads=2",
        "--set",
        "d_model=8",
        "--epochs",
        "2",
        "--every",
        "2",
        "--log",
        str(log),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    table = run("--table", str(log))
    assert table.returncode == 0 and table.stdout.count("| p 5, n_heads 2, d_model 8 | 24 | 2 |") == 1, table.stdout

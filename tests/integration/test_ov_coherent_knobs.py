"""The OV-coherent knob sweep's tables and figure (headmovies.sweeps.ov_coherent_knobs): settings
named from the config, per-setting counts on rows with known answers, a tiny real sweep folder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from headmovies.render.ov_coherent import analysis
from headmovies.sweeps import ov_coherent_knobs as knobs
from headmovies.sweeps.sweep import sweep
from headmovies.train.config import config_dict
from headmovies.train.ov_coherent import OVCoherentConfig


def test_settings_are_named_by_the_keys_set_away_from_the_defaults():
    cfg = config_dict(OVCoherentConfig(seed=7))
    assert knobs.setting_of(cfg) == {} and knobs.setting_text({}) == "default"
    cfg.update(lr=0.003, signal_weights="4,3,2,1", epochs=20000)
    assert knobs.setting_text(knobs.setting_of(cfg)) == "epochs=20000, lr=0.003, signal_weights=4,3,2,1"
    cfg = config_dict(OVCoherentConfig(warmup=1000, lr_schedule="cosine", init_scale=3.0))
    assert knobs.setting_text(knobs.setting_of(cfg)) == "init_scale=3, lr_schedule=cosine, warmup=1000"
    cfg = config_dict(OVCoherentConfig(uniform_attention=True))
    assert knobs.setting_text(knobs.setting_of(cfg)) == "uniform_attention=true"


def _row(setting, seed, reversed_, acc=1.0, tau=-1.0):
    return {
        "setting": setting,
        "seed": seed,
        "reversed": reversed_,
        "acc": acc,
        "kendall_tau": tau,
        "hard_attention_agreement": 0.875 if reversed_ else 0.25,
        "settle_epoch": 100 * seed,
        "sharpen_ratio": 2.0,
        "sharpen_slope": {"all": -1.0 if reversed_ else 0.5},
    }


def test_setting_counts_reversal_only_at_full_accuracy_and_marks_almost_all():
    rows = [_row("default", s, s < 3, tau=-1.0 if s < 3 else 0.0) for s in range(10)]
    rows += [_row("lr=0.003", s, True, acc=1.0 if s < 8 else 0.9) for s in range(10)]
    rows += [_row("init_scale=3", s, s != 0) for s in range(10)]
    stats = {k: knobs.setting_stats(g) for k, g in knobs.by_setting(rows).items()}
    assert stats["default"]["reversed"] == 3 and stats["default"]["reversed_seeds"] == [0, 1, 2]
    assert stats["default"]["tau_negative"] == 3 and stats["default"]["tau_mean"] == pytest.approx(-0.3)
    assert stats["default"]["settle_median"] == 450 and stats["default"]["settle_max"] == 900
    assert not stats["default"]["almost_all"]
    # two seeds below 100 %: reversed there does not count
    assert stats["lr=0.003"]["solved"] == 8 and stats["lr=0.003"]["reversed"] == 8 and stats["lr=0.003"]["almost_all"]
    assert stats["init_scale=3"]["reversed"] == 9 and stats["init_scale=3"]["almost_all"]
    lo, hi = stats["default"]["interval"]
    assert lo < 0.3 < hi
    table = knobs.knobs_table(rows)
    assert "| default | 10 | 10 | **3/10** | 0, 1, 2 | -0.30 (3) | 25% | 450 (900) | +0.5 (3) |" in table
    assert "| lr=0.003 | 10 | 8 | **8/10** |" in table
    fig = knobs.rate_figure(rows)
    ax = fig.axes[0]
    top_down = [t.get_text() for _, t in sorted(zip(ax.get_yticks(), ax.get_yticklabels()), key=lambda p: -p[0])]
    assert top_down == ["default", "lr=0.003", "init_scale=3"]  # in the rows' order, the default on top


def test_sharpened_loss_at_factor_one_is_the_exact_loss_and_hard_attention_at_large_factors():
    from test_ov_coherent import hand_built  # 2 heads that rank 1 > 2 > 3 > 4 and the reverse, 100 %

    from headmovies.tasks import ov_coherent as ov_task

    w, cases = hand_built(), ov_task.task_cases(10)
    z = analysis.logits(w, cases.counts)
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = float(cases.probs @ -np.log(p[np.arange(len(cases)), cases.labels]))
    assert knobs.sharpened_loss(w, cases, 1.0) == pytest.approx(want, rel=1e-9)
    # its QK gap is already 30: sharper attention changes the loss by less than a part in 1e6
    assert knobs.sharpened_loss(w, cases, 2.0) == pytest.approx(want, rel=1e-6)
    # flattening it to near-uniform attention mixes the two signal values: the loss rises
    assert knobs.sharpened_loss(w, cases, 0.01) > 10 * want
    slopes = knobs.sharpening_slopes(w, cases)
    assert abs(slopes["all"]) < 1e-6  # attention already all or nothing: no gain from sharper
    soft = knobs.sharpening_slopes(dict(w, W_Q=w["W_Q"] * 0.05), cases)  # QK gap 1.5: soft, and worse
    assert soft["all"] < 0 and soft["equal"] < 0 and soft["distinct"] < 0


@pytest.mark.slow
def test_knobs_from_a_tiny_sweep_folder(tmp_path, capsys):
    from headmovies.runfile.reader import Run
    from headmovies.tasks.ov_coherent import WEIGHT_NAMES

    sets = {"epochs": "30", "seq_len": "6", "batch": "16", "early_every": "10"}
    sweep("ov-coherent", tmp_path / "a", seeds=[0, 1], sets=sets, workers=1, progress=False)
    sweep("ov-coherent", tmp_path / "b", seeds=[0], sets=sets, grid=[("lr", ["0.01"])], workers=1, progress=False)
    out = tmp_path / "out"
    assert knobs.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    rows = json.loads((out / "knobs.json").read_text())
    base = "batch=16, early_every=10, epochs=30, seq_len=6"
    assert [(r["setting"], r["seed"]) for r in rows] == [
        (base, 0),
        (base, 1),
        ("batch=16, early_every=10, epochs=30, lr=0.01, seq_len=6", 0),
    ]
    for r in rows:  # each row is the analysis of its run file
        with Run(r["file"]) as run:
            full = analysis.analyse(run.weights(-1, WEIGHT_NAMES), analysis.run_cases(run))
            epochs, qk = analysis.qk_trajectory(run)
        assert r["acc"] == full.acc and r["reversed"] == full.opposite
        assert r["kendall_tau"] == full.kendall_tau and r["epochs"] == 30
        assert r["settle_epoch"] == analysis.orderings_settle_epoch(epochs, qk)
    assert (out / "knobs.png").stat().st_size > 0 and f"| {base} | 2 |" in (out / "knobs.md").read_text()
    capsys.readouterr()
    assert knobs.main([str(tmp_path / "missing"), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing" in err and not (tmp_path / "o2").exists()

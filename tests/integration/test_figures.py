"""`headmovies figures` of orbit runs and `headmovies orbits check` on small hand-built runs whose
orbits are known (tests/equivariant.py), read back from the files they write."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.image import imread

from headmovies.cli import main
from headmovies.render.orbits.check import check_orbits
from headmovies.render.orbits.check_figures import head_order
from headmovies.render.orbits.figures import make_figures
from headmovies.render.orbits.history_figures import orbits_over_time
from headmovies.render.orbits.stream import orbit_history
from headmovies.runfile.reader import Run

from equivariant import equivariant_run, write_run

EPOCHS = np.arange(0, 251, 50)  # 6 snapshots; the layer is exactly equivariant from epoch 200


@pytest.fixture(scope="module")
def eq_run(tmp_path_factory):
    return equivariant_run(tmp_path_factory.mktemp("run") / "eq.h5", EPOCHS, orbit_sizes=(12, 4), extra_heads=4)


@pytest.mark.slow
def test_figures_command_writes_every_figure(eq_run, tmp_path, capsys):
    out = tmp_path / "figs"
    assert main(["figures", str(eq_run), "--out", str(out), "--no-progress"]) == 0
    names = ["curves", "panels", "orbit_check", "orbit_power", "orbits_over_time", "orbit_progress", "orbit_spectrum"]
    for name in names:
        png = imread(out / f"{name}.png")
        assert png.ndim == 3 and min(png.shape[:2]) > 200
        assert png[..., :3].std() > 0.05  # not a blank page
        svg = (out / f"{name}.svg").read_text()
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    report = json.loads((out / "orbits.json").read_text())
    assert report["epoch"] == 250
    assert [(o["size"], o["heads"], o["stabiliser"]) for o in report["orbits"]] == [
        (12, list(range(12)), [0, 12]),
        (4, [12, 13, 14, 15], [0, 4, 8, 12, 16, 20]),
    ]
    assert report["unassigned"] == [16, 17, 18, 19]
    assert "orbit 1: size 12" in (out / "orbits.txt").read_text()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary left
    printed = capsys.readouterr().out.split()
    expected = [str(out / f"{n}.{e}") for n in names for e in ("png", "svg")]
    assert sorted(printed) == sorted(expected + [str(out / "orbits.json"), str(out / "orbits.txt")])


def test_orbits_over_time_counts(eq_run):
    with Run(eq_run) as run:
        epochs, counts, dead = orbits_over_time(orbit_history(run))
    assert epochs.tolist() == EPOCHS.tolist()
    assert sorted(counts) == [4, 12]
    # heads reach the exact orbits at the last two snapshots; before, the 2 % check fails
    assert counts[12].tolist() == [0, 0, 0, 0, 12, 12] and counts[4].tolist() == [0, 0, 0, 0, 4, 4]
    assert dead.tolist() == [0] * 6


def test_head_order_groups_orbits_in_shift_order():
    from test_orbits import layer

    M, R, expected = layer(24, 2, [4, 2], n_random=2, seed=4)
    M = np.concatenate([M, M[:1]])
    R = np.concatenate([R, np.zeros((1, 24, 24))])  # head 8: dead
    report = check_orbits(M, R, 24, 2)
    order = head_order(report)
    assert sorted(order) == list(range(9))
    assert order[:4] == [h for u in report.orbits[0].units for h in u]
    assert set(order[:4]) == set(expected[0]) and set(order[4:6]) == set(expected[1])
    assert order[6:8] == report.unassigned and order[8:] == [8] == report.dead


@pytest.mark.slow
def test_png_only_and_explicit_panels(eq_run, tmp_path):
    out = tmp_path / "f"
    paths = make_figures(
        eq_run, out, panels=["qk:1,2", "ov:3,-1"], formats=("png",), over_time=False, progress=False, log=lambda s: None
    )
    assert sorted(p.name for p in paths) == sorted(
        ["orbits.json", "orbits.txt", "curves.png", "panels.png", "orbit_check.png", "orbit_power.png"]
    )
    # the still has two panels side by side: wider than tall
    h, w = imread(out / "panels.png").shape[:2]
    assert w > h


def test_orbits_command(eq_run, capsys):
    assert main(["orbits", "check", str(eq_run), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [o["size"] for o in data["orbits"]] == [12, 4] and data["tol"] == 0.02
    assert [o["marginal"] for o in data["orbits"]] == [False, False] and data["near_misses"] == []
    # the frequency groups: every live head in one; a group holding only an exact orbit's heads
    # has a zero spectrum of N_w - 1 moments
    groups = data["frequency_groups"]
    assert sorted(h for g in groups for h in g["heads"]) == list(range(20))
    for g in groups:
        assert len(g["spectrum"]) == g["order"] - 1 and len(g["r"]) == len(g["heads"])
        if set(g["heads"]) <= set(range(16)) and len(g["heads"]) % g["order"] == 0:
            assert max(g["spectrum"]) < 1e-4
    assert main(["orbits", "check", str(eq_run), "--epoch", "100"]) == 0
    text = capsys.readouterr().out
    assert "epoch 100" in text and "no verified orbit" in text and "in no orbit: 20 heads" in text
    assert "frequency group w = " in text and "spectrum |mu_k|/sum|rho|" in text


@pytest.mark.parametrize(
    "argv,message",
    [
        (["orbits", "check", "{run}", "--epoch", "120"], "no snapshot at epoch 120; nearest: 50, 100, 150"),
        (["orbits", "check", "{run}", "--tol", "0"], "--tol must be in (0, 1)"),
        (["orbits", "check", "{dir}/missing.h5"], "does not exist"),
        (["figures", "{plain}", "--out", "{dir}/x"], "has no group data"),
        (["figures", "{run}", "--out", "{dir}/x", "--formats", "jpg"], "--formats must be"),
        (["figures", "{run}", "--out", "{dir}/x", "--panels", "qk:0"], "bad panel"),
    ],
)
def test_errors_are_one_line_exit_2(eq_run, tmp_path, capsys, argv, message):
    plain = write_run(tmp_path / "plain.h5", [0], [{"W_E": np.zeros((5, 4))}], n=None, m=None)
    argv = [a.format(run=eq_run, dir=tmp_path, plain=plain) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_panels_for_run(eq_run, tmp_path):
    """The movie's panel choice: one orbit check of the final snapshot serves default and auto."""
    from headmovies.render.orbits.check_run import run_report, snapshot_circuits
    from headmovies.render.orbits.panel_choice import SOURCE_PANELS, auto_panels, resolve_panels
    from headmovies.render.orbits.stream import final_snapshot

    with Run(eq_run) as run:
        final = final_snapshot(run)
        report, M, R = final.report, final.M, final.R
        panels, note = resolve_panels(None, report, M, R, 24, 2)
        auto, _ = resolve_panels(["auto"], report, M, R, 24, 2)
        M, R = snapshot_circuits(run, -1)
        expected = auto_panels(run_report(run), M, R, 24, 2)
    # random orbits do not live in the source's planes: the default falls back to auto
    assert panels == auto == expected and note.startswith("planes where this run's orbits are strongest")
    assert [p.order(24, 2) for p in panels] == [12, 12, 4, 4]
    # 'seed' needs no orbit check, so it works on a run without the weights for one
    plain = write_run(tmp_path / "plain.h5", [0], [{"W_E": np.zeros((24, 4))}])
    with Run(plain) as run:
        final = final_snapshot(run)
        report, M, R = final.report, final.M, final.R
        assert report is None and resolve_panels(["source"], report, M, R, 24, 2)[0] == list(SOURCE_PANELS)


def test_orbit_history_dates_each_orbit_from_its_verification(eq_run):
    """The hand-built run reaches its exact 12- and 4-orbits at its fifth snapshot and stays:
    both lock in there, not earlier; a set that never forms an orbit has no date."""
    with Run(eq_run) as run:
        h = orbit_history(run)
    assert h.epochs.tolist() == EPOCHS.tolist()
    assert h.locked_in(range(12)) == EPOCHS[4] and h.locked_in(range(12, 16)) == EPOCHS[4]
    assert h.verified(range(12)).tolist() == [False] * 4 + [True] * 2
    assert h.locked_in([0, 1]) is None
    assert h.heads_in_orbits().tolist() == [0, 0, 0, 0, 16, 16]
    # the distance to an orbit shrinks to rounding level once verified; extra heads stay far
    assert np.nanmax(h.head_error[-1, :16]) < 1e-6 and np.nanmin(h.head_error[-1, 16:]) > 0.02
    assert not h.in_orbit[:4].any() and h.in_orbit[4:, :16].all() and not h.in_orbit[:, 16:].any()


def test_both_equivariance_errors_in_curves_and_caption(eq_run, tmp_path):
    """New files store eq_error_pooled and eq_error_worst_input; files made before hold the
    pooled error as `eq_error`, which the reader renames, so figures and captions read both."""
    from headmovies.render.orbits.captions import metrics_caption
    from headmovies.render.orbits.history_figures import curves_figure

    with Run(eq_run) as run:
        met = run.metrics()
        text = metrics_caption(met)(int(EPOCHS[-1]))
    assert "eq. error pooled 1.0e-04" in text and "worst input 3.0e-04" in text
    eq_ax = curves_figure(met).axes[-1]
    assert eq_ax.get_title() == "equivariance error"
    assert [t.get_text() for t in eq_ax.get_legend().get_texts()] == [
        "pooled (final 0.0001)",
        "worst input (final 0.0003)",
    ]
    old = write_run(
        tmp_path / "old.h5",
        [0, 50],
        [{"W_E": np.zeros((24, 4))}] * 2,
        metrics={"train_acc": [0.5, 1.0], "eq_error": [0.1, 0.002]},
    )
    with Run(old) as run:
        met = run.metrics()
        assert set(met) == {"epoch", "train_acc", "eq_error_pooled"}
        assert met["eq_error_pooled"].tolist() == [0.1, 0.002]
        assert metrics_caption(met)(50) == "train 100.0%   eq. error pooled 2.0e-03"
    labels = [t.get_text() for t in curves_figure(met).axes[-1].get_legend().get_texts()]
    assert labels == ["pooled (final 0.002)"]


def test_orbit_progress_figure(eq_run):
    """Per head one error curve coloured by its final orbit, the tolerance line, the
    heads-in-orbits count, and each orbit's lock-in epoch (the fifth snapshot, 200) marked."""
    from matplotlib.colors import to_hex

    from headmovies.render.orbits.history_figures import orbit_progress_figure

    with Run(eq_run) as run:
        h = orbit_history(run)
    fig = orbit_progress_figure(h)
    top, bottom = fig.axes[:2]
    curves = [line for line in top.get_lines() if len(line.get_xdata()) == len(EPOCHS)]
    assert len(curves) == 20  # 16 orbit heads + 4 in none
    by_colour = {}
    for line in curves:
        by_colour.setdefault(to_hex(line.get_color()), []).append(line)
    assert sorted(len(v) for v in by_colour.values()) == [4, 4, 12]
    tol = [line for line in top.get_lines() if line.get_linestyle() == "--"]
    assert len(tol) == 1 and tol[0].get_ydata()[0] == pytest.approx(0.02)
    assert top.get_yscale() == "log"
    locks = sorted({float(line.get_xdata()[0]) for line in top.get_lines() if line.get_linestyle() == ":"})
    assert locks == [200.0]
    step = next(line for line in bottom.get_lines() if line.get_linestyle() == "-")
    assert step.get_ydata().tolist() == [0, 0, 0, 0, 16, 16]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0] == "orbit 1 (size 12, heads 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11): locked in at epoch 200"
    assert "4 heads in no orbit at the end" in legend and "tolerance 2%" in legend


def test_curves_mark_the_penalty_and_phase_2_from_the_config(tmp_path):
    """The curves figure marks where the equivariance penalty switches on (config eq_start) and
    where phase 2 starts (refine_start), in every panel and in the note under them; the orbits
    over time figure keeps dead heads off the orbit bands."""
    from matplotlib.collections import PolyCollection

    config = {"epochs": 250, "eq_start": 50, "eq_weight": 10.0, "eq_ramp": 100, "refine_start": 150}
    run = equivariant_run(tmp_path / "marks.h5", EPOCHS, extra_heads=4, config=config, dead_heads=(16,))
    out = tmp_path / "figs"
    assert make_figures(run, out, formats=("png",), progress=False, log=lambda s: None)
    assert imread(out / "curves.png")[..., :3].std() > 0.05
    from headmovies.render.orbits.events import phase_marks
    from headmovies.render.orbits.history_figures import curves_figure, orbits_over_time_figure

    with Run(run) as r:
        met, cfg, history = r.metrics(), r.config, orbit_history(r)
    marks = phase_marks(cfg, met["epoch"])
    assert [(e.epoch, e.label) for e in marks] == [(50, "equivariance penalty on"), (150, "phase 2")]
    fig = curves_figure(met, "t", marks)
    for ax in fig.axes:
        xs = sorted(line.get_xdata()[0] for line in ax.get_lines() if len(set(line.get_xdata())) == 1)
        assert xs == [50, 150], ax.get_title()
    assert fig.get_supxlabel() == "1: epoch 50, equivariance penalty on   2: epoch 150, phase 2"
    assert phase_marks({"epochs": 250, "eq_start": 0, "eq_weight": 10.0}, met["epoch"]) == []  # on from the start
    # dead heads: a line of their own, not a band stacked on the orbits
    epochs, counts, dead = orbits_over_time(history)
    assert dead.tolist() == [0, 0, 0, 1, 1, 1]
    ax = orbits_over_time_figure(epochs, counts, dead, 20, 0.02).axes[0]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == len(counts) == 2  # the orbit sizes only
    top = max(b.get_paths()[0].vertices[:, 1].max() for b in bands)
    assert top == 16  # 12 + 4 heads in orbits at the end, no dead head on top
    assert "dead heads apart" in ax.get_title()


def test_the_still_shows_each_group_s_final_spectrum(tmp_path):
    """The still (`panels_still`, panels.png) carries the movie's last panel lines: an exact
    4-orbit at w = 6 and 3-orbit at w = 8 (tests/equivariant.py) at rounding level."""
    from matplotlib.text import Text

    from headmovies.render.core.projections import parse_panel
    from headmovies.render.orbits.figures import panels_still
    from headmovies.render.orbits.stream import RunInfo, collect, final_snapshot

    path = equivariant_run(tmp_path / "still.h5", EPOCHS, orbit_sizes=(4, 3))
    panels = [parse_panel(p) for p in ("qk:0,6", "ov:6,-6", "qk:0,8")]
    with Run(path) as run:
        facts = collect(run, panels)
        fig = panels_still(RunInfo.of(run), facts.epochs, facts.coords, panels, final_snapshot(run).report, 24, 2)
    texts = [t.get_text() for t in fig.findobj(Text)]
    assert "frequency group ω = 6: 4 heads\n|μ̂_k|/Σ|ρ| < 1e-6 (k ≤ 3)" in texts
    assert "frequency group ω = 8: 3 heads\n|μ̂_k|/Σ|ρ| < 1e-6 (k ≤ 2)" in texts
    assert sum(t.startswith("frequency group") for t in texts) == 2  # the OV panel of w = 6 stays blank

"""The commands that render any run (`headmovies movie`, `figures`, `view`) on recorded runs:
their options and default output folders, run in-process through `cli.main`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import headmovies
from headmovies import cli


def _weights(gain: float) -> dict:
    rng = np.random.default_rng(0)
    W = rng.normal(size=(2, 8, 4)) * gain
    return {0: {"W_Q": W, "W_K": W, "W_V": W, "W_O": np.swapaxes(W, 1, 2).copy()}, "W_E": rng.normal(size=(5, 8))}


def _record(path: Path, gain: float = 1.0) -> Path:
    with headmovies.Recorder(path, lambda: _weights(gain), schedule=[0, 1]) as rec:
        rec.step(0, train_acc=0.5 * gain)
        rec.step(1, train_acc=gain)
    return path


def test_figures_view_and_movie_default_to_a_folder_per_run(tmp_path, capsys):
    a, b = _record(tmp_path / "a.h5", 1.0), _record(tmp_path / "b.h5", 0.5)
    for run in (a, b):
        assert cli.main(["figures", str(run)]) == 0
        assert cli.main(["view", str(run)]) == 0
    for name, acc in (("a", 1.0), ("b", 0.5)):  # neither overwrote the other's
        summary = json.loads((tmp_path / name / "figures" / "summary.json").read_text())
        assert summary["run"] == str(tmp_path / f"{name}.h5") and summary["final_metrics"] == {"train_acc": acc}
        assert (tmp_path / name / "viewer.html").stat().st_size > 1000
    assert not (tmp_path / "figures").exists() and not (tmp_path / "viewer.html").exists()
    out = capsys.readouterr().out.splitlines()
    assert cli.main(["movie", str(a), "--formats", "png", "--no-progress"]) == 0  # movie too: beside the run
    assert (tmp_path / "a" / "movie.png").stat().st_size > 1000
    assert out[0].startswith(f"{tmp_path / 'a' / 'figures'}: metrics.png") and out[1] == str(
        tmp_path / "a" / "viewer.html"
    )


def test_figures_offers_no_plane_options_it_would_ignore(tmp_path, capsys):
    """figures draws no planes of a recorded run: --basis is refused (argparse, exit 2), --panels
    (an orbit run's panels figure) in one line, not ignored."""
    run = _record(tmp_path / "a.h5")
    for option in (["--basis", "b.npz"],):
        with pytest.raises(SystemExit) as stop:
            cli.main(["figures", str(run), "--out", str(tmp_path / "f"), *option])
        assert stop.value.code == 2
        assert f"unrecognized arguments: {' '.join(option)}" in capsys.readouterr().err
    assert not (tmp_path / "f").exists()
    assert cli.main(["figures", str(run), "--out", str(tmp_path / "f"), "--panels", "qk:1,2"]) == 2
    assert capsys.readouterr().err.startswith("error: --panels is for orbit runs; ")
    assert cli.main(["figures", str(run), "--out", str(tmp_path / "f"), "--group-order", "5"]) == 0
    assert json.loads((tmp_path / "f" / "summary.json").read_text())["group_order"] == 5
    assert cli.main(["figures", str(run), "--out", str(tmp_path / "p"), "--formats", "png"]) == 0
    assert sorted(p.suffix for p in (tmp_path / "p").iterdir()) == [".json", ".png", ".png"]


def test_a_basis_that_is_not_an_npz_archive_is_one_line(tmp_path, capsys):
    run = _record(tmp_path / "a.h5")
    np.save(tmp_path / "b.npy", np.zeros((2, 5, 5)))  # one array, not an archive
    (tmp_path / "b.txt").write_text("hello\n")
    for name in ("b.npy", "b.txt"):
        assert cli.main(["view", str(run), "--out", str(tmp_path / "v"), "--basis", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        fix = "write one with numpy.savez(PATH, qk=..., ov=...)"
        assert err == f"error: the basis {tmp_path / name} is not an .npz archive: {fix}\n"
    assert cli.main(["view", str(run), "--out", str(tmp_path / "v"), "--basis", str(tmp_path / "none.npz")]) == 2
    assert "cannot read the basis" in capsys.readouterr().err and not (tmp_path / "v").exists()
    np.savez(tmp_path / "good.npz", qk=np.eye(5)[None].repeat(2, 0))
    assert cli.main(["view", str(run), "--out", str(tmp_path / "v"), "--basis", str(tmp_path / "good.npz")]) == 0


def test_the_movie_counts_snapshots_and_names_its_planes_in_words(tmp_path, capsys):
    with headmovies.Recorder(tmp_path / "one.h5", lambda: _weights(1.0), schedule=[0]) as rec:
        rec.step(0)
    argv = ["movie", str(tmp_path / "one.h5"), "--out", str(tmp_path / "m"), "--formats", "mp4,html", "--no-progress"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert err == "1 snapshot, 2 heads, principal-axis planes\n"
    assert out == f"{tmp_path / 'm'}: movie.mp4, movie.html (25 frames)\n"  # 1 + 2 s held at 12 fps
    html = (tmp_path / "m" / "movie.html").read_text()
    assert "Heads of one.h5 (2) in principal-axis planes, epochs 0 to 0</figcaption>" in html


def test_the_orbit_check_on_a_recorded_run_points_to_the_generic_commands(tmp_path, capsys):
    run = _record(tmp_path / "a.h5")
    hint = "; a recorded run's heads are drawn by `headmovies movie`, `figures` and `view` (docs/recording.md)\n"
    assert cli.main(["orbits", "check", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {run} (recorded) has no group data (n, m): the orbit check needs ")
    assert err.endswith(hint) and err.count("\n") == 1


def test_each_run_is_drawn_by_its_family_and_other_families_options_are_refused(tmp_path, capsys):
    """One `movie` command: an orbit run gets the orbit movie (orbits.*), a recorded one the
    generic movie (movie.*); an option of another family is one line, exit 2, nothing written;
    `--generic` draws an orbit run as a recorded one; the old `orbits movie` runs with a notice."""
    from equivariant import equivariant_run

    orbit = equivariant_run(tmp_path / "equi.h5", np.arange(3) * 50)
    recorded = _record(tmp_path / "a.h5")
    fast = ["--formats", "png", "--no-progress"]
    assert cli.main(["movie", str(orbit), "--out", str(tmp_path / "o"), "--panel-px", "220", *fast]) == 0
    assert [p.name for p in (tmp_path / "o").iterdir()] == ["orbits.png"]
    assert cli.main(["movie", str(orbit), "--generic", "--out", str(tmp_path / "g"), *fast]) == 0
    assert [p.name for p in (tmp_path / "g").iterdir()] == ["movie.png"]
    capsys.readouterr()
    for option in (["--layout", "tall"], ["--event-hold", "0"], ["--sequences", "8"]):
        assert cli.main(["movie", str(recorded), "--out", str(tmp_path / "r"), *option, *fast]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {option[0]} is for ") and err.count("\n") == 1, err
        assert f"{recorded} is drawn as a recorded run" in err and not (tmp_path / "r").exists()
    assert cli.main(["movie", str(orbit), "--out", str(tmp_path / "b"), "--basis", "b.npz", *fast]) == 2
    assert "--basis is for recorded runs (and --generic); " in capsys.readouterr().err
    assert cli.main(["orbits", "movie", str(orbit), "--out", str(tmp_path / "old"), "--panel-px", "220", *fast]) == 0
    assert capsys.readouterr().err.startswith("note: `headmovies orbits movie` is now `headmovies movie`\n")
    assert [p.name for p in (tmp_path / "old").iterdir()] == ["orbits.png"]
    for run, name in ((orbit, "orbits"), (recorded, "recorded")):  # --no-progress and --name: every run's
        assert cli.main(["view", str(run), "--out", str(tmp_path / "v"), "--no-progress", "--name", name]) == 0
        assert (tmp_path / "v" / f"{name}.html").stat().st_size > 1000


def test_the_metrics_figure_shows_a_single_value_and_only_the_panels_with_metrics():
    from headmovies.render.generic.figures import metrics_figure

    nan = np.nan
    fig = metrics_figure({"epoch": np.array([0, 5]), "train_loss": np.array([nan, 0.5])}, "t")
    (ax,) = fig.axes  # no accuracy: one panel, no empty one
    (line,) = ax.lines
    assert line.get_marker() == "o" and list(line.get_xdata()) == [5] and list(line.get_ydata()) == [0.5]
    assert ax.get_title() == "losses and other metrics" and ax.get_yscale() == "log"
    fig = metrics_figure({"epoch": np.array([0])}, "t")  # a run with no metrics
    assert [t.get_text() for ax in fig.axes for t in ax.texts] == ["no metric logged"]
    fig = metrics_figure({"epoch": np.array([0, 5]), "acc": np.array([0.1, 0.9]), "loss": np.array([2.0, -1.0])}, "t")
    assert [ax.get_title() for ax in fig.axes] == ["accuracies", "losses and other metrics"]
    assert fig.axes[0].lines[0].get_marker() in ("None", None, "") and fig.axes[1].get_yscale() == "linear"


def test_help_names_frequencies_omega_as_the_docs_do(capsys):
    """The census help names a head's frequency ω, as the panel help, docs and figures do."""
    with pytest.raises(SystemExit) as stop:
        cli.main(["orbits", "census", "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "reads each live head's frequency ω at the screen epochs" in out
    assert "orbits with size, ω, heads" in out and "every orbit by size and ω" in out
    assert "frequency w " not in out and "size, w," not in out


def test_figures_of_a_damaged_run_leave_the_output_folder_as_it_was(tmp_path, capsys):
    """A run whose middle snapshot was damaged (NaN written into W_V after training) fails only
    when the OV-frequency history reads it; by then metrics and heads_final were drawn, but
    nothing is written before everything is read: the folder keeps the good run's figures."""
    import h5py

    good, bad = tmp_path / "good.h5", tmp_path / "bad.h5"
    for path in (good, bad):
        with headmovies.Recorder(path, lambda: _weights(1.0), schedule=[0, 1, 2]) as rec:
            for epoch in range(3):
                rec.step(epoch, train_acc=0.25 * (epoch + 1))
    with h5py.File(bad, "r+") as f:
        f["snapshots/blocks.0.attn.W_V"][1] = np.nan
    out = tmp_path / "f"
    assert cli.main(["figures", str(good), "--out", str(out), "--group-order", "5"]) == 0
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.iterdir()}
    assert sorted(before) == sorted(
        f"{stem}.{ext}" for stem in ("metrics", "heads_final", "ov_frequencies") for ext in ("png", "svg")
    ) + ["summary.json"]
    capsys.readouterr()
    assert cli.main(["figures", str(bad), "--out", str(out), "--group-order", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # a warning (no W_U) may come first
    assert err[-1].startswith(f"error: {bad}: the snapshot at epoch 1 holds non-finite weights")
    assert [line for line in err if line.startswith("error")] == err[-1:] and "Traceback" not in "".join(err)
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.iterdir()} == before
    assert cli.main(["figures", str(bad), "--out", str(tmp_path / "new"), "--group-order", "5"]) == 2
    assert not any((tmp_path / "new").glob("*"))

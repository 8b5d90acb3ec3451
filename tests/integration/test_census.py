"""The orbit census (docs/results/orbits.md, "Census"): rows from sweep folders of run files
with known orbits, the screen's arithmetic on hand-made rows, the tables, the rebuild from
saved rows, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from headmovies.cli import main as cli_main
from headmovies.errors import UserError
from headmovies.sweeps import census_rows, census_tables

from equivariant import equivariant_run


def _sweep(folder: Path, runs: dict[int, dict], settings: dict | None = None) -> Path:
    """A sweep folder as `headmovies sweep orbits` leaves it: sweep.json and one row per run
    file, here hand-built run files (`equivariant_run` keyword arguments per seed)."""
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps({"experiment": "orbits", "settings": settings or {}}))
    rows = []
    for seed, kw in runs.items():
        equivariant_run(
            folder / f"seed{seed}.h5", np.arange(0, 1100, 100), seed=seed, config={"refine_start": 600}, **kw
        )
        rows.append(
            {
                "run": f"seed{seed}",
                "file": f"seed{seed}.h5",
                "experiment": "orbits",
                "seed": seed,
                "grid": {},
                "status": "done",
                "error": None,
                "seconds": 1.5,
                "metrics": {
                    "train_acc": 1.0,
                    "heldout_acc": 0.76,
                    "eq_error_pooled": 1e-4,
                    "eq_error_worst_input": 3e-4,
                },
            }
        )
    rows.append(
        {
            "run": "seed9",
            "file": "seed9.h5",
            "seed": 9,
            "grid": {},
            "status": "failed",
            "error": "boom",
            "seconds": 0.1,
            "metrics": None,
        }
    )
    (folder / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_orbit_order_and_fitting_groups():
    assert [census_tables.orbit_order(w, 24) for w in (1, 2, 3, 4, 6, 8, 10, 12)] == [24, 12, 8, 6, 4, 3, 12, 2]
    groups = {2: 12, 3: 5, 6: 8, 12: 3, 8: 2}
    assert census_tables.fitting(groups, 24, "fits") == {2, 6}  # 12 = 1 x 12, 8 = 2 x 4
    assert census_tables.fitting(groups, 24, "room") == {2, 6, 12}  # 3 heads have room for a pair
    assert census_tables.groups_of([0, 2, 2, 6, 0, 2]) == {2: 3, 6: 1}  # 0: dead heads are not counted


def _row(seed, early, final, orbits, epochs=1000, n=24):
    return {
        "recipe": "r",
        "seed": seed,
        "n": n,
        "epochs": epochs,
        "orbits": orbits,
        "omega": {"500": early, str(epochs): final},
    }


def test_tables_of_old_and_new_rows_show_spectrum_marginal_and_near_misses():
    """A version-5 row with a marginal square, a near-miss pair and a deformed group beside a
    version-4 row (no spectrum): the tables show the numbers and say what the old row lacks."""
    new = {
        **_row(
            0,
            [6] * 4,
            [6] * 4 + [12, 12],
            [{"size": 4, "omega": 6, "worst": 0.019, "locked_in": 900, "marginal": True}],
        ),
        "near_misses": [{"size": 2, "omega": 12, "heads": [4, 5], "worst": 0.020006}],
        "groups": [
            {
                "omega": 6,
                "order": 4,
                "n_heads": 4,
                "spectrum": [0.0, 0.001, 0.0],
                "r": [1.2, 1.4],
                "odd_qk": 0.002,
                "odd_ov": 0.001,
            },
            {
                "omega": 2,
                "order": 12,
                "n_heads": 12,
                "spectrum": [0.009, 0.025, 0.011, 0.23, 0.21, 0.41] + [0.1] * 5,
                "r": [0.3, 1.6],
                "odd_qk": 0.23,
                "odd_ov": 0.05,
            },
        ],
        "train_acc": 1.0,
    }
    old = {**_row(1, [6] * 4, [6] * 4, [{"size": 4, "omega": 6, "worst": 0.001, "locked_in": 800}]), "train_acc": 1.0}
    structure = census_tables.structure_table([new, old])
    assert (
        "| r | 4 | 6 | 2 | 0, 1 | 1.00 [0.10, 1.90] % | 1 (0) | 850 [800, 900] | 100.0 [100.0, 100.0] % |" in structure
    )
    assert census_tables.near_miss_list([new, old]) == "- r: seed 0: 2 at ω 12, 2.001 %"
    spectrum = census_tables.spectrum_table([new, old])
    assert (
        "| r | 2 | 12 | 1 | 12 [12, 12] | 0.025 [0.025, 0.025] | 0.410 [0.410, 0.410] | 1.60 [1.60, 1.60] " in spectrum
    )
    assert "| r | 6 | 4 | 1 | 4 [4, 4] | 0.001 [0.001, 0.001] | – |" in spectrum
    assert "1 rows of an older census version carry no spectrum" in spectrum


def test_screen_counts_kept_frequencies_recall_and_precision():
    # seed 0: 4 heads at w = 6 from epoch 500 on, and they form a 4-orbit; a dead head revives
    # seed 1: 4 heads at w = 6 at epoch 500, one moves to w = 3 by the end: no orbit
    # seed 2: a 2-orbit at w = 12 whose group at epoch 500 had 3 heads (room, but no fit)
    rows = [
        _row(0, [6, 6, 6, 6, 0], [6, 6, 6, 6, 5], [{"size": 4, "omega": 6}]),
        _row(1, [6, 6, 6, 6, 5], [6, 6, 6, 3, 5], []),
        _row(2, [12, 12, 12, 1], [12, 12, 1, 1], [{"size": 2, "omega": 12}]),
    ]
    s = census_tables.screen_stats(rows, 500, "fits")
    # live at both: 4 + 5 + 4 = 13 heads; unchanged: 4 + 4 + 3
    assert s["omega_kept"] == pytest.approx(11 / 13)
    assert (s["orbits"], s["recall"]) == (2, 0.5)  # the square fitted, the pair did not
    assert (s["groups_flagged"], s["precision"]) == (2, 0.5)  # seeds 0 and 1 flag w = 6; only seed 0 formed it
    assert (s["seeds_flagged"], s["seeds_with_orbit"], s["seeds_both"]) == (2, 2, 1)
    room = census_tables.screen_stats(rows, 500, "room")
    assert room["recall"] == 1.0 and room["groups_flagged"] == 3 and room["precision"] == pytest.approx(2 / 3)
    assert census_tables.screen_stats(rows, 750)["runs"] == 0  # no snapshot there: not counted


@pytest.mark.slow
def test_census_of_known_orbits_and_rebuild_from_rows(tmp_path, capsys):
    a = _sweep(
        tmp_path / "exact",
        {0: {"orbit_sizes": (12, 4), "extra_heads": 2}, 1: {"orbit_sizes": (4, 2), "extra_heads": 3}},
        {"epochs": 1000},
    )
    b = _sweep(
        tmp_path / "other", {0: {"orbit_sizes": (12, 4), "extra_heads": 2}, 1: {"orbit_sizes": (), "extra_heads": 6}}
    )
    out = tmp_path / "census"
    assert (
        cli_main(
            ["orbits", "census", str(a), str(b), "--out", str(out), "--no-progress", "--screen-epochs", "300,500,700"]
        )
        == 0
    )
    rows = census_rows.read_census_rows(out / "census.jsonl")
    assert [(r["recipe"], r["seed"], r["outcome"]) for r in rows] == [
        ("exact", 0, "12+4"),
        ("exact", 1, "4+2"),
        ("other", 0, "12+4"),
        ("other", 1, "none"),
    ]
    first = rows[0]
    assert [o["size"] for o in first["orbits"]] == [12, 4]
    assert sorted(first["orbits"][0]["heads"]) == list(range(12))
    for r in rows:
        for o in r["orbits"]:
            # the weights reach the equivariant layer one snapshot before the end (epoch 900)
            # and stay: the orbit is verified from there, not before
            assert o["locked_in"] == 900
            # an orbit of k heads lives at a frequency that k shifts turn a whole number of times
            assert o["size"] * o["omega"] % 24 == 0
            assert o["worst"] < 1e-4 and o["marginal"] is False
    assert sorted(first["omega"]) == ["1000", "300", "500", "700"]
    # the final frequency groups: one per frequency of the live heads, each head in one
    assert sum(g["n_heads"] for g in first["groups"]) == sum(w != 0 for w in first["omega"]["1000"])
    assert first["near_misses"] == []
    for g in first["groups"]:
        assert len(g["spectrum"]) == g["order"] - 1 and g["r"][0] <= g["r"][1]
    assert first["phase2_start"] == 600 and first["epochs"] == 1000 and first["train_acc"] == 1.0
    md = (out / "census.md").read_text()
    assert [r["outcome_bias_gauge"] for r in rows] == ["12+4", "4+2", "12+4", "none"]  # exact: both gauges agree
    assert (
        "| exact | 2 | 12+4 ×1, 4+2 ×1 | 2 (100 %; 34–100 %) | 2 (100 %; 34–100 %) | 12+4 ×1, 4+2 ×1 "
        "| 2 (100 %; 34–100 %) |"
    ) in md
    assert "| exact | other | 2 | 1 (50 %) | 1: 4+2 vs none |" in md
    assert (out / "census.png").stat().st_size > 10_000

    # rebuilt from the saved rows alone, after the run files are gone: the same tables
    for f in list(a.glob("*.h5")) + list(b.glob("*.h5")):
        f.unlink()
    # ... and from the sweeps again, into the same folder: the rows of deleted files stand
    assert (
        cli_main(
            ["orbits", "census", str(a), str(b), "--out", str(out), "--no-progress", "--screen-epochs", "300,500,700"]
        )
        == 0
    )
    assert census_rows.read_census_rows(out / "census.jsonl") == rows and (out / "census.md").read_text() == md
    again = tmp_path / "again"
    assert cli_main(["orbits", "census", "--rows", str(out / "census.jsonl"), "--out", str(again)]) == 0
    assert (again / "census.md").read_text() == md
    assert not (again / "census.jsonl").exists()


@pytest.mark.slow
def test_unchanged_runs_are_reused_and_changed_ones_are_not(tmp_path):
    a = _sweep(tmp_path / "exact", {0: {"orbit_sizes": (4,), "extra_heads": 1}})
    out = tmp_path / "census"
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress", "--formats", "png,svg"]) == 0
    first = census_rows.read_census_rows(out / "census.jsonl")[0]
    assert first["outcome"] == "4" and (out / "census.svg").exists()
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress", "--formats", "png"]) == 0
    assert census_rows.read_census_rows(out / "census.jsonl")[0] == first  # same file: the row is reused as it was
    assert not (out / "census.svg").exists()  # no stale figure beside new tables
    # retrained in place with the same shapes (so the same size): other orbits, a new row
    equivariant_run(
        a / "seed0.h5", np.arange(0, 1100, 100), seed=0, config={"refine_start": 600}, orbit_sizes=(2,), extra_heads=3
    )
    assert (a / "seed0.h5").stat().st_size == first["file_bytes"]
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress"]) == 0
    assert census_rows.read_census_rows(out / "census.jsonl")[0]["outcome"] == "2"
    # other screen epochs: recomputed too
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress", "--screen-epochs", "400"]) == 0
    assert sorted(census_rows.read_census_rows(out / "census.jsonl")[0]["omega"]) == ["1000", "400"]
    # rows of an older version (here: 2, before the bias gauge) are recomputed, not refused
    old = {k: v for k, v in census_rows.read_census_rows(out / "census.jsonl")[0].items() if "bias_gauge" not in k}
    (out / "census.jsonl").write_text(json.dumps({**old, "version": 2}) + "\n")
    with pytest.raises(UserError, match="holds census rows of version 2, this headmovies reads 4, 5, 6"):
        census_rows.read_census_rows(out / "census.jsonl")
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress", "--screen-epochs", "400"]) == 0
    row = census_rows.read_census_rows(out / "census.jsonl")[0]
    assert row["version"] == 6 and row["outcome_bias_gauge"] == row["outcome"] == "2"


@pytest.mark.slow
def test_a_cut_off_run_file_is_named_keeps_an_earlier_row_and_the_rest_is_counted(tmp_path, capsys):
    a = _sweep(
        tmp_path / "exact",
        {
            0: {"orbit_sizes": (4,), "extra_heads": 1},
            1: {"orbit_sizes": (3,), "extra_heads": 2},
            2: {"orbit_sizes": (2,), "extra_heads": 2},
        },
    )
    counted = tmp_path / "counted"
    assert cli_main(["orbits", "census", str(a), "--out", str(counted), "--no-progress", "--formats", "png"]) == 0
    before = census_rows.read_census_rows(counted / "census.jsonl")
    assert [(r["seed"], r["outcome"]) for r in before] == [(0, "4"), (1, "3"), (2, "2")]
    capsys.readouterr()
    broken = a / "seed1.h5"
    data = broken.read_bytes()
    broken.write_bytes(data[: len(data) // 3])  # as a full disk or a killed copy leaves it
    (a / "seed2.h5").unlink()
    # into a fresh folder: the cut-off run and the never-counted missing one are named and left out
    out = tmp_path / "census"
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress", "--formats", "png"]) == 1
    err = capsys.readouterr().err
    assert f"census: {broken} is not a readable HDF5 run file" in err and "(left out)" in err
    assert "--force" not in err and "Traceback" not in err
    assert f"census: {a / 'seed2.h5'} is listed as done in its sweep.jsonl but does not exist" in err
    assert "2 run files missing or unreadable: rerun the sweep" in err
    assert [(r["seed"], r["outcome"]) for r in census_rows.read_census_rows(out / "census.jsonl")] == [(0, "4")]
    # into the census that counted them before the damage: every earlier row is kept, as for a deleted file
    assert cli_main(["orbits", "census", str(a), "--out", str(counted), "--no-progress", "--formats", "png"]) == 1
    err = capsys.readouterr().err
    assert "(its earlier row is kept)" in err and "1 run file missing or unreadable" in err
    assert census_rows.read_census_rows(counted / "census.jsonl") == before
    # nothing readable at all: the files are named before the error
    (a / "seed0.h5").write_bytes(b"")
    assert cli_main(["orbits", "census", str(a), "--out", str(tmp_path / "none"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"census: {a / 'seed0.h5'} is not a readable" in err and "could be read" in err.splitlines()[-1]
    # the library call without a handler still refuses, naming the file
    with pytest.raises(UserError, match=r"seed0\.h5 is not a readable"):
        census_rows.collect([a])


@pytest.mark.slow
def test_a_bias_on_one_head_hides_an_orbit_from_the_default_gauge_only(tmp_path, capsys):
    """Head 12 (first of the 4-orbit) gains a key-independent OV column through W_V: the default
    check loses the 4-orbit, the bias gauge keeps it exact; the census row has both outcomes."""
    a = _sweep(tmp_path / "biased", {0: {"orbit_sizes": (12, 4), "extra_heads": 2}})
    with h5py.File(a / "seed0.h5", "r+") as f:
        W_E, W_V = f["snapshots/W_E"][-1].astype(np.float64), f["snapshots/W_V"][-1].astype(np.float64)
        u = np.random.default_rng(7).standard_normal(W_V.shape[-1]) * np.abs(W_V[12]).max()
        W_V[12] += np.linalg.pinv(W_E) @ np.ones((W_E.shape[0], 1)) @ u[None]  # W_E W_V gains 1 u^T
        f["snapshots/W_V"][-1] = W_V.astype(np.float32)
    out = tmp_path / "census"
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress"]) == 0
    row = census_rows.read_census_rows(out / "census.jsonl")[0]
    assert (row["outcome"], row["outcome_bias_gauge"]) == ("12", "12+4")
    square = row["orbits_bias_gauge"][1]
    assert square["heads"] == [12, 13, 14, 15] and 4 * square["omega"] % 24 == 0 and square["worst"] < 1e-3
    assert (
        "| biased | 1 | 12 ×1 | 1 (100 %; 21–100 %) | 1 (100 %; 21–100 %) | 12+4 ×1 | 1 (100 %; 21–100 %) |"
        in (out / "census.md").read_text()
    )
    # the row's worst errors are the orbit check's, digit for digit (6 significant digits, not rounded twice)
    for gauge, orbits in (("spec", row["orbits"]), ("bias", row["orbits_bias_gauge"])):
        capsys.readouterr()
        assert cli_main(["orbits", "check", str(a / "seed0.h5"), "--gauge", gauge, "--json"]) == 0
        checked = json.loads(capsys.readouterr().out)["orbits"]
        assert [o["worst"] for o in orbits] == [o["worst_error"] for o in checked if o["size"] >= 2]
        assert all(o["worst"] > 0 for o in orbits)


def test_wilson_interval_contains_the_share_exactly():
    """At k = 0 the formula's low bound is 0 only to rounding (1.4e-17 at 0/22, which made the
    census figure's whisker negative and the census fail); the interval holds k/total exactly."""
    for total in range(1, 301):
        for k in range(total + 1):
            lo, hi = census_tables.wilson_interval(k, total)
            assert 0.0 <= lo <= k / total <= hi <= 1.0
    assert census_tables.wilson_interval(0, 22)[0] == 0.0 and census_tables.wilson_interval(22, 22)[1] == 1.0


def test_wilson_interval_known_values():
    """Closed forms: at k = 0 the upper end is z^2/(n + z^2); 4 of 66 seeds (the seed objective's
    orbit count at 66 seeds) gives 2.4-14.6 %, by hand from Wilson's formula."""
    lo, hi = census_tables.wilson_interval(0, 8)
    assert lo == 0 and hi == pytest.approx(1.96**2 / (8 + 1.96**2))
    lo, hi = census_tables.wilson_interval(4, 66)
    assert (lo, hi) == (pytest.approx(0.02382, abs=5e-5), pytest.approx(0.14572, abs=5e-5))
    assert census_tables.wilson_interval(8, 8) == (pytest.approx(1 - 1.96**2 / (8 + 1.96**2)), 1.0)


@pytest.mark.slow
def test_a_grid_sweep_folder_is_refused_not_merged_into_one_recipe(tmp_path, capsys):
    folder = _sweep(tmp_path / "grid", {0: dict(orbit_sizes=(12, 4)), 1: dict(orbit_sizes=(12, 4))})
    rows = [json.loads(line) for line in (folder / "sweep.jsonl").read_text().splitlines()]
    for r, w in zip(rows, (1.0, 10.0, 1.0)):
        r["grid"] = {"eq_weight": w}
    (folder / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    assert cli_main(["orbits", "census", str(folder), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {folder} is a grid sweep (eq_weight varies), and the census names one recipe per folder: "
        "sweep each grid point into its own folder (with --set eq_weight=VALUE)\n"
    )
    assert not out.exists()
    for r in rows:  # a one-value grid is one recipe
        r["grid"] = {"eq_weight": 10.0}
    (folder / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli_main(["orbits", "census", str(folder), "--out", str(out), "--no-progress", "--formats", "png"]) == 0


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "error: give sweep folders (the --out of `headmovies sweep orbits`), or --rows FILE.jsonl"),
        (["--rows", "{tmp}/nowhere.jsonl"], "error: cannot read census rows {tmp}/nowhere.jsonl: No such file"),
        (["--rows", "{tmp}/census.jsonl", "{tmp}"], "error: give sweep folders or --rows FILE.jsonl (to rebuild"),
        (["{tmp}/nowhere"], "error: sweep folder {tmp}/nowhere does not exist"),
        (["{tmp}"], "error: {tmp} is not a sweep folder (no sweep.json)"),
        (["--screen-epochs", "a,b", "{tmp}"], "error: --screen-epochs must be epochs separated by commas"),
        (["--screen-epochs", "-5", "{tmp}"], "error: --screen-epochs must be epochs >= 1"),
        (["{tmp}/file.txt"], "error: {tmp}/file.txt is a file; give the sweep's folder"),
        (["--rows", "{tmp}/file.txt"], "error: {tmp}/file.txt is not a census.jsonl (JSON lines written by"),
        (["--rows", "{tmp}/sweep.jsonl"], "error: {tmp}/sweep.jsonl line 1 is not a census row"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    (tmp_path / "file.txt").write_text("not json\n")
    (tmp_path / "sweep.jsonl").write_text('{"run": "seed0", "status": "done"}\n')
    args = [a.format(tmp=tmp_path) for a in args]
    assert cli_main(["orbits", "census", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(tmp=tmp_path)) and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.slow
def test_census_continues_in_fresh_folders_on_another_machine(tmp_path, capsys):
    """The run files and sweep folders of earlier seeds are gone (another machine): the
    committed rows stand, and new seeds in fresh folders of the same recipes add to them."""
    first = tmp_path / "first"
    a = _sweep(first / "exact", {0: {"orbit_sizes": (12, 4), "extra_heads": 2}}, {"refine_prune": 0.0})
    b = _sweep(first / "other", {0: {"orbit_sizes": (4,), "extra_heads": 4}})
    out = tmp_path / "census"
    assert cli_main(["orbits", "census", str(a), str(b), "--out", str(out), "--no-progress", "--formats", "png"]) == 0
    before = census_rows.read_census_rows(out / "census.jsonl")
    md_before = (out / "census.md").read_text()
    settings = json.loads((out / "census.settings.json").read_text())
    import shutil

    shutil.rmtree(first)  # a new machine: only the rows are left
    a2 = _sweep(tmp_path / "second" / "exact", {1: {"orbit_sizes": (2,), "extra_heads": 6}}, {"refine_prune": 0.0})
    assert cli_main(["orbits", "census", str(a2), "--out", str(out), "--no-progress", "--formats", "png"]) == 0
    rows = census_rows.read_census_rows(out / "census.jsonl")
    assert [(r["recipe"], r["seed"], r["outcome"]) for r in rows] == [
        ("exact", 0, "12+4"),
        ("exact", 1, "2"),
        ("other", 0, "4"),
    ]
    assert rows[0] == before[0] and rows[2] == before[1]  # the old rows as they were
    assert json.loads((out / "census.settings.json").read_text()) == settings
    md = (out / "census.md").read_text()
    assert md != md_before and "| exact | 2 |" in md  # two exact seeds counted now
    # the same recipe name with other settings cannot stand beside the old rows; nothing is rewritten
    a3 = _sweep(tmp_path / "third" / "exact", {2: {"orbit_sizes": (), "extra_heads": 6}}, {"refine_prune": 0.25})
    assert cli_main(["orbits", "census", str(a3), "--out", str(out), "--no-progress", "--formats", "png"]) == 2
    err = capsys.readouterr().err
    assert (
        "error: 2 exact rows of the existing census.jsonl (runs not in these folders) were made with settings "
        '{"refine_prune": 0.0}, the exact folder now has {"refine_prune": 0.25}: give another --out'
    ) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    # rows read at other screen epochs cannot be recomputed without their files
    assert cli_main(["orbits", "census", str(a2), "--out", str(out), "--no-progress", "--screen-epochs", "400"]) == 2
    assert "read at screen epochs 250,500,1000,1500,2000,3000: pass --screen-epochs" in capsys.readouterr().err
    assert census_rows.read_census_rows(out / "census.jsonl") == rows and (out / "census.md").read_text() == md


def test_a_bad_out_fails_before_any_run_is_read(tmp_path, capsys):
    (tmp_path / "file.txt").write_text("")
    # tmp_path is no sweep folder: reading it first would give another error
    assert cli_main(["orbits", "census", str(tmp_path), "--out", str(tmp_path / "file.txt")]) == 2
    assert (
        capsys.readouterr().err
        == f"error: output folder {tmp_path}/file.txt is a file; remove it or choose another --out\n"
    )
    assert cli_main(["orbits", "census", str(tmp_path), "--out", str(tmp_path / "file.txt" / "c")]) == 2
    assert capsys.readouterr().err.startswith(f"error: cannot create output folder {tmp_path}/file.txt/c: ")


def test_provenance_names_code_machine_and_dates_and_survives_the_run_files(tmp_path):
    """census.md's provenance table is generated from the run files' root attributes, carried in
    the rows (so a rebuild from rows alone keeps it); rows without them say "not recorded"."""
    import os
    from datetime import UTC, datetime

    a = _sweep(tmp_path / "exact", {0: {"orbit_sizes": (4,), "extra_heads": 1}, 1: {"orbit_sizes": (2,)}})
    with h5py.File(a / "seed0.h5", "r+") as f:
        f.attrs["versions"] = json.dumps({"headmovies": "0.3.0", "torch": "2.13.0+cpu", "numpy": "2.0"})
        f.attrs["git_commit"] = "abcdef1234567890"
        f.attrs["machine"] = json.dumps({"cpu": "Test CPU 9000", "cores": 2, "system": "Linux x86_64"})
        f.attrs["created"] = "2026-12-04T10:00:00+00:00"
    written = datetime(2026, 12, 4, 12, 30, tzinfo=UTC).timestamp()
    for seed in (0, 1):
        os.utime(a / f"seed{seed}.h5", (written, written + 60 * seed))
    out = tmp_path / "census"
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress"]) == 0
    rows = census_rows.read_census_rows(out / "census.jsonl")
    assert rows[0]["provenance"] == {
        "created": "2026-12-04T10:00:00+00:00",
        "git_commit": "abcdef1234567890",
        "versions": {"headmovies": "0.3.0", "torch": "2.13.0+cpu"},
        "machine": {"cpu": "Test CPU 9000", "cores": 2, "system": "Linux x86_64"},
    }
    md = (out / "census.md").read_text()
    assert "1 of 2 rows name their machine" in md
    assert (
        "| exact | 0 | 1 | headmovies 0.3.0, commit abcdef1 | Test CPU 9000, 2 cores (Linux x86_64) "
        "| 2026-12-04 10:00 | 2026-12-04 12:30 |"
    ) in md
    # the hand-built seed 1 records a creation time but no code version, commit or machine
    assert (
        "| exact | 1 | 1 | headmovies (version not recorded), commit not recorded | not recorded "
        "| 2026-01-01 00:00 | 2026-12-04 12:31 |"
    ) in md

    # a row counted before rows carried provenance gains it from its unchanged run file ...
    old = [{k: v for k, v in r.items() if k != "provenance"} for r in rows]
    (out / "census.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    assert cli_main(["orbits", "census", str(a), "--out", str(out), "--no-progress"]) == 0
    assert census_rows.read_census_rows(out / "census.jsonl") == rows
    # ... and says "not recorded" once its run file is gone; the rebuild from rows keeps what rows carry
    (out / "census.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps(old[1]) + "\n")
    again = tmp_path / "again"
    assert cli_main(["orbits", "census", "--rows", str(out / "census.jsonl"), "--out", str(again)]) == 0
    md = (again / "census.md").read_text()
    assert "| exact | 0 | 1 | headmovies 0.3.0, commit abcdef1 | Test CPU 9000, 2 cores" in md
    assert "| exact | 1 | 1 | not recorded | not recorded | not recorded | 2026-12-04 12:31 |" in md


def test_seed_ranges_and_the_machine_of_rows():
    from headmovies.sweeps.census_provenance import machine_of, seed_ranges

    assert seed_ranges([7, 0, 1, 2, 5, 8, 2]) == "0–2, 5, 7–8"
    assert seed_ranges([]) == ""
    assert machine_of({"provenance": {"machine": {"cpu": "X", "cores": 1}}}) == "X, 1 core"
    assert machine_of({}) == "not recorded"

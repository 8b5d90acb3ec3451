"""The census gallery (docs/sweeps.md, "Census gallery"): the per-head plane coordinates of census
rows on hand-built layers with known orbits, the page's build and size, its pure scripts in
Chromium (the `browser` fixture, tests/conftest.py), and the page the census command writes,
loaded from file:// (tile counts, filters, viewer links, no network, no console errors)."""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from headmovies.cli import main as cli_main
from headmovies.render.core.circuits import circuits
from headmovies.render.orbits.check import check_orbits
from headmovies.render.orbits.gallery_page import build
from headmovies.render.orbits.spectrum import orbit_spectrum
from headmovies.render.orbits.summary import head_frequencies
from headmovies.sweeps import census_rows
from headmovies.sweeps.census_coordinates import final_planes, group_frequencies, head_orbits
from headmovies.sweeps.census_gallery import colours, gallery_payload, gallery_run, write_gallery

from equivariant import NAMES, equivariant_run, equivariant_weights
from test_spectrum import MS, N, cos_head, orbit_layer

FOLDER = Path(build.__file__).parent
COMMITTED = FOLDER.parents[3] / "docs" / "results" / "census" / "census.jsonl"


# --- the rows' coordinates ----------------------------------------------------------------------


def test_groups_of_the_orbits_first_then_the_largest_and_which_orbit_each_head_is_in():
    omega = [6, 6, 6, 6, 8, 8, 8, 0, 3, 3, 3, 3, 3, 5]
    orbits = [{"size": 4, "omega": 6, "heads": [0, 1, 2, 3]}, {"size": 3, "omega": 8, "heads": [4, 5, 6]}]
    assert group_frequencies(omega, orbits) == [6, 8, 3]
    assert group_frequencies(omega, [], groups=2) == [3, 6]  # 5 heads at 3, 4 at 6 (ties: lower ω)
    assert group_frequencies([0, 0], []) == []
    assert head_orbits(len(omega), omega, orbits) == [0, 0, 0, 0, 1, 1, 1, -2, -1, -1, -1, -1, -1, -1]


def test_an_orbit_of_k_heads_sits_on_a_regular_k_gon_in_its_planes():
    w = dict(zip(NAMES, equivariant_weights(24, 2, (12, 4), seed=3, extra_heads=2)))
    c = circuits(w)
    report = check_orbits(c["qk"], c["ov"], 24, 2)
    omega = [int(x) for x in head_frequencies(c["qk"])]
    orbits = [{"size": o.size, "omega": omega[o.heads[0]], "heads": list(o.heads)} for o in report.orbits if o.size > 1]
    assert [o["size"] for o in orbits] == [12, 4]
    got = final_planes(c["qk"], c["ov"], omega, orbits, 900)
    assert got["epoch"] == 900 and got["head_orbit"] == [0] * 12 + [1] * 4 + [-1, -1]
    assert [g["omega"] for g in got["groups"]][:2] == [o["omega"] for o in orbits]
    for g, o in zip(got["groups"], orbits):
        for circuit, (u, v) in (("qk", (0, o["omega"])), ("ov", (o["omega"], -o["omega"]))):
            plane = g[circuit]
            assert (plane["u"], plane["v"]) == (u, v)
            xy = np.array(plane["xy"])
            assert np.round(xy, 3).tolist() == xy.tolist()
            group = [h for h in range(len(omega)) if omega[h] == o["omega"]]
            assert g["heads"] == len(group) and set(o["heads"]) <= set(group)
            assert max(np.hypot(*xy[h]) for h in o["heads"]) == pytest.approx(1.0, abs=1e-3)  # scaled to the orbit
            z = xy[o["heads"], 0] + 1j * xy[o["heads"], 1]
            assert np.allclose(np.abs(z), np.abs(z[0]), atol=2e-3) and np.abs(z[0]) > 0.1  # one radius
            # the heads fill the vertices of a regular polygon of the plane's order n / gcd(r, n)
            # (r = ω in both planes for m = 2), k / order heads on each
            order = 24 // math.gcd(o["omega"], 24)
            phase = (np.angle(z) - np.angle(z[0])) * order / (2 * np.pi)  # whole numbers
            assert np.allclose(phase, np.round(phase), atol=2e-3)
            assert sorted(np.unique(np.round(phase) % order)) == list(range(order))
            assert plane["scale"] > 0
    json.dumps(got, allow_nan=False)  # JSON as it stands


def test_each_drawn_group_carries_its_orbit_spectrum_in_brief():
    """A deformed square at ω 6 (test_spectrum: every |μ̂_k|/Σ|ρ| = 1/3, N_ω = 4 so no k ≥ 4,
    r = 1) beside an exact 12-orbit at ω 2 (spectrum 0 to rounding, r = 1.5 plus noise), in a row
    as census_rows writes it (`groups`, `final_planes`): the gallery's brief, 3 significant digits,
    in the planes' order (the larger group first); none for rows without `groups` or planes."""
    heads = [cos_head(6, 1.0, k * np.pi / 2, a) for k, a in enumerate((1, 1, 1, 3))]
    M2, R2 = orbit_layer(2, 12)
    M = np.concatenate([np.stack([h[0] for h in heads]), M2])
    R = np.concatenate([np.stack([h[1] for h in heads]), R2])
    omega = [int(x) for x in head_frequencies(M)]
    assert omega == [6] * 4 + [2] * 12
    groups = [census_rows.group_row(g) for g in orbit_spectrum(M, R, N, MS)]
    row = synthetic_rows(1)[0] | {"groups": groups, "final_planes": final_planes(M, R, omega, [], 900)}
    brief = gallery_run(row)["spectrum"]
    assert [(b["omega"], b["heads"]) for b in brief] == [(2, 12), (6, 4)]
    assert brief[1] == {"omega": 6, "heads": 4, "low": 0.333, "high": None, "r_max": 1.0}
    two = next(g for g in groups if g["omega"] == 2)
    assert brief[0]["low"] == float(f"{max(two['spectrum'][:3]):.3g}") < 1e-12
    assert brief[0]["high"] == float(f"{max(two['spectrum'][3:]):.3g}") < 1e-12
    assert brief[0]["r_max"] == 1.5 and abs(two["r"][1] - 1.5) < 0.05
    # a version-5 row (groups, no planes) and a version-4 one (neither) draw no plane and name no spectrum
    v5 = {k: v for k, v in row.items() if k != "final_planes"} | {"version": 5}
    v4 = {k: v for k, v in v5.items() if k != "groups"} | {"version": 4}
    assert gallery_run(v5)["spectrum"] == [] and gallery_run(v4)["spectrum"] == []
    assert [r["spectrum"] == [] for r in gallery_payload([row, v5, v4])["runs"]] == [False, True, True]


# --- the page's build and size ------------------------------------------------------------------


def test_the_page_inlines_every_part_and_is_package_data():
    payload = {"note": "a </script> in the data", "runs": []}
    text = build.page(payload)
    assert text == build.page(payload) and "<script src=" not in text and '<link rel="stylesheet"' not in text
    assert {p.name for p in FOLDER.glob("*.js")} <= set(build.scripts()) and build.scripts()[-1] == "main.js"
    # nothing to fetch (no CDN, no web font); the SVG namespace is a name, never fetched
    assert set(re.findall(r"https?://[^\s\"'`]*", text)) == {"http://www.w3.org/2000/svg"}
    data = re.search(r'<script id="payload" type="application/json">(.*?)</script>', text, re.S).group(1)
    assert json.loads(data) == payload
    globs = tomllib.loads((FOLDER.parents[3] / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for path in FOLDER.iterdir():
        if path.is_file() and path.suffix != ".py":
            assert any(path.match(g) for g in globs["headmovies.render.orbits.gallery_page"]), path.name


def synthetic_rows(count: int, heads: int = 32, seed: int = 0) -> list[dict]:
    """`count` census rows of version 6 with random coordinates in 3 groups (both circuits)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        omega = rng.integers(0, 13, heads).tolist()
        size = [0, 2, 3, 4][i % 4]
        live = [h for h in range(heads) if omega[h]]
        orbits = [{"size": size, "omega": 6, "heads": live[:size], "worst": 0.01, "locked_in": 9000}] if size else []
        xy = lambda: np.round(rng.uniform(-1, 1, (heads, 2)), 3).tolist()  # noqa: E731
        groups = [
            {
                "omega": w,
                "heads": 9,
                "qk": {"u": 0, "v": w, "scale": 1.23456, "xy": xy()},
                "ov": {"u": w, "v": -w, "scale": 0.5, "xy": xy()},
            }
            for w in (6, 8, 3)
        ]
        rows.append(
            {
                "version": 6,
                "recipe": ["seed-objective", "with-additions"][i % 2],
                "seed": i,
                "run": f"seed{i}",
                "epochs": 16000,
                "outcome": str(size) if size else "none",
                "orbits": orbits,
                "n_dead": omega.count(0),
                "heldout_acc": 0.99,
                "omega": {"16000": omega},
                "final_planes": {"epoch": 16000, "groups": groups, "head_orbit": head_orbits(heads, omega, orbits)},
            }
        )
    return rows


def test_two_hundred_runs_stay_under_five_megabytes(tmp_path):
    path = write_gallery(tmp_path, synthetic_rows(200))
    size = path.stat().st_size
    assert 200_000 < size < 5_000_000, size


# --- the scripts in Chromium --------------------------------------------------------------------


@pytest.fixture(scope="module")
def js(browser):
    """A blank page holding every script but main.js: js(expression, arg) -> its value, with `M`
    the scripts' functions (galleryModules) and `arg` the argument."""
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content("<!DOCTYPE html><html><body></body></html>")
    for name in build.scripts():
        if name != "main.js":
            page.add_script_tag(content=build.part(name))
    yield lambda expression, arg=None: page.evaluate(
        f"(arg) => {{ const M = galleryModules; return {expression}; }}", arg
    )
    assert errors == []
    page.close()


RUNS = [
    {"recipe": "b", "outcome": "3", "seed": 0},
    {"recipe": "a", "outcome": "none", "seed": 1},
    {"recipe": "a", "outcome": "4+3", "seed": 2},
    {"recipe": "b", "outcome": "2", "seed": 3},
    {"recipe": "a", "outcome": "3", "seed": 4},
]


def test_filters_and_groups(js):
    assert js("M.filters.outcomeOrder(['2', 'none', '4+3', '3', '6', '4+2', '3'])") == [
        "4+3",
        "6",  # as many heads as 4+2, a larger first orbit
        "4+2",
        "3",
        "2",
        "none",
    ]
    seeds = lambda groups: [(g["key"], [r["seed"] for r in g["runs"]]) for g in groups]  # noqa: E731
    assert seeds(js("M.filters.groupRuns(arg, {recipe: '', outcome: ''}, 'recipe', ['a', 'b'])", RUNS)) == [
        ("a", [1, 2, 4]),
        ("b", [0, 3]),
    ]
    assert seeds(js("M.filters.groupRuns(arg, {recipe: '', outcome: 'any'}, 'outcome', ['a', 'b'])", RUNS)) == [
        ("4+3", [2]),
        ("3", [0, 4]),
        ("2", [3]),
    ]
    assert seeds(js("M.filters.groupRuns(arg, {recipe: 'a', outcome: '3'}, 'recipe', ['a', 'b'])", RUNS)) == [
        ("a", [4])
    ]
    assert js("M.filters.groupRuns(arg, {recipe: 'b', outcome: 'none'}, 'recipe', ['a', 'b'])", RUNS) == []
    assert js("M.filters.outcomeCounts(arg)", RUNS) == {"": 5, "any": 4, "none": 1, "3": 2, "4+3": 1, "2": 1}


def test_dots_take_the_movies_colours_and_orbits_draw_their_polygons(js):
    c = colours()
    assert c["orbits"][:2] == ["#1f77b4", "#ff7f0e"] and c["other"] == "#a0a0a0"  # blue, orange as in the movie
    styles = js("[0, 1, 9, -1, -2].map((k) => M.tiles.dotStyle(k, arg))", c)
    assert [s["fill"] for s in styles] == [c["orbits"][0], c["orbits"][1], c["orbits"][0], c["other"], c["dead"]]
    assert styles[4]["stroke"] == c["dead_edge"]
    square = {"xy": [[1, 0], [0, 1], [-1, 0], [0, -1], [0.5, 0.5], [0, 0]]}
    ho = [0, 0, 0, 0, -1, -2]
    dots = js("M.tiles.planeDots(arg.p, arg.ho, arg.c, 50)", {"p": square, "ho": ho, "c": c})
    assert [d["head"] for d in dots] == [5, 4, 0, 1, 2, 3]  # dead below, orbits on top
    assert [(d["x"], d["y"]) for d in dots[2:]] == [(45, 25), (25, 5), (5, 25), (25, 45)]  # y up, unit = 20 px
    assert (
        js("M.tiles.orbitPolygon(arg.p, arg.ho, 0, 50)", {"p": square, "ho": ho})
        == "25.00,45.00 45.00,25.00 25.00,5.00 5.00,25.00"
    )
    assert js("M.tiles.orbitPolygon(arg.p, [0, 0, -1, -1, -1, -1], 0, 50)", {"p": square}) is None  # a pair: no polygon
    text = js(
        "M.tiles.tileText(arg)",
        {
            "seed": 7,
            "outcome": "4+3",
            "orbits": [[4, 6], [3, 8]],
            "heldout_acc": 0.9123,
            "n_dead": 2,
            "heads": 32,
            "stopped": False,
            "epochs": 16000,
        },
    )
    assert text == {
        "title": "seed 7",
        "outcome": "4+3",
        "lines": ["4-orbit ω 6, 3-orbit ω 8", "held-out 91.2 % · 2 dead of 32"],
        "spectrum": [],  # an older row: no line
    }


def test_the_tile_names_each_drawn_group_s_spectrum(js):
    run = {
        "seed": 3,
        "outcome": "12",
        "orbits": [[12, 2]],
        "heldout_acc": 1.0,
        "n_dead": 0,
        "heads": 16,
        "stopped": False,
        "epochs": 900,
        "spectrum": [
            {"omega": 2, "heads": 12, "low": 0.0153, "high": 0.81, "r_max": 3.02},
            {"omega": 6, "heads": 4, "low": 0.333, "high": None, "r_max": 1.0},
            {"omega": 5, "heads": 1, "low": 1.23e-4, "high": 1.15e-15, "r_max": 0.5},
        ],
    }
    assert js("M.tiles.tileText(arg).spectrum", run) == [
        "ω 2: k≤3 0.0153, k≥4 0.81, r≤3.02",
        "ω 6: k≤3 0.333, k≥4 –, r≤1",  # N_ω = 4: no k ≥ 4
        "ω 5: k≤3 1.23e-4, k≥4 1.15e-15, r≤0.5",  # below 0.001 in exponent form
    ]


# --- the page the census command writes, in Chromium --------------------------------------------


def _sweep(folder: Path, runs: dict[int, tuple]) -> Path:
    """A sweep folder as `headmovies sweep orbits` leaves it, of hand-built run files."""
    folder.mkdir(parents=True)
    (folder / "sweep.json").write_text(json.dumps({"experiment": "orbits", "settings": {}}))
    rows = []
    for seed, sizes in runs.items():
        equivariant_run(folder / f"seed{seed}.h5", np.arange(0, 500, 100), seed=seed, orbit_sizes=sizes, extra_heads=2)
        rows.append(
            {"run": f"seed{seed}", "file": f"seed{seed}.h5", "seed": seed, "grid": {}, "status": "done", "seconds": 1.0}
        )
    (folder / "sweep.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture
def open_page(browser):
    """open_page(path) -> (page, problems): console errors, page errors and every request that
    is not the page itself (a network fetch) are collected."""
    contexts = []

    def opener(path: Path):
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        contexts.append(ctx)
        page = ctx.new_page()
        url = path.resolve().as_uri()
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
        page.on(
            "request",
            lambda r: None if r.url in (url,) or r.url.startswith("data:") else problems.append(f"request: {r.url}"),
        )
        page.goto(url)
        page.wait_for_selector("body[data-state=ready]", timeout=15000)
        return page, problems

    yield opener
    for ctx in contexts:
        ctx.close()


def test_the_census_writes_a_gallery_that_filters_and_links_to_viewers(tmp_path, open_page, capsys):
    a = _sweep(tmp_path / "exact", {0: (12, 4), 1: (4, 2)})
    b = _sweep(tmp_path / "other", {0: (3,), 1: ()})
    out = tmp_path / "census"
    census = ["orbits", "census", str(a), str(b), "--out", str(out), "--no-progress", "--viewers"]
    assert cli_main([*census, "--screen-epochs", "200"]) == 0
    assert "4 viewers written" in capsys.readouterr().err
    assert cli_main([*census, "--screen-epochs", "200"]) == 0  # again: each viewer is newer than its file: kept
    assert "0 viewers written" in capsys.readouterr().err
    rows = census_rows.read_census_rows(out / "census.jsonl")
    assert [r["outcome"] for r in rows] == ["12+4", "4+2", "3", "none"] and all(r["version"] == 6 for r in rows)
    page, problems = open_page(out / "gallery.html")
    assert page.locator(".tile").count() == 4 and page.locator(".tile svg").count() > 4
    assert page.locator("#count").inner_text() == "showing 4 of 4 runs"
    # a spectrum line under each drawn plane (version-6 rows), the 12-orbit's first: exact, so ~0
    assert page.locator(".tile .spectrum").count() == page.locator(".tile .plane").count() > 4
    assert page.locator(".tile").first.locator(".spectrum").first.inner_text().startswith("ω ")
    hrefs = page.locator("a.tile").evaluate_all("(els) => els.map((e) => e.getAttribute('href'))")
    assert hrefs == [
        "viewers/exact/seed0.html",
        "viewers/exact/seed1.html",
        "viewers/other/seed0.html",
        "viewers/other/seed1.html",
    ]
    assert all((out / h).is_file() for h in hrefs)
    # the 12-orbit's heads are drawn in the first orbit colour, the 4-orbit's in the second
    first = page.locator(".tile").first.locator("svg").first
    fills = first.locator("circle").evaluate_all("(els) => els.map((e) => e.getAttribute('fill'))")
    assert fills.count(colours()["orbits"][0]) == 12 and fills.count(colours()["orbits"][1]) == 4
    page.select_option("#recipe", "other")
    assert page.locator(".tile").count() == 2
    page.click("#outcomes button[data-outcome=any]")
    assert page.locator(".tile").count() == 1 and page.locator("#count").inner_text() == "showing 1 of 4 runs"
    page.select_option("#recipe", "")
    page.select_option("#group-by", "outcome")
    assert page.locator(".group h2").all_inner_texts() == [
        "outcome 12+4 · 1 run",
        "outcome 4+2 · 1 run",
        "outcome 3 · 1 run",
    ]
    page.select_option("#circuit", "ov")
    assert page.locator(".tile").count() == 3
    assert problems == []
    page.locator("a.tile").first.click()  # the link opens that run's viewer, from file:// too
    page.wait_for_selector("body[data-state=ready]", timeout=15000)
    assert page.url.endswith("/viewers/exact/seed0.html") and "seed0.h5" in page.locator("#runline").inner_text()


def test_the_committed_rows_draw_what_they_carry(tmp_path, open_page):
    """The committed census: rows of version 4 (no coordinates) show as text; the version-6 rows
    of the score-scale-2 recipe draw their planes, each with its group's spectrum line."""
    assert cli_main(["orbits", "census", "--rows", str(COMMITTED), "--out", str(tmp_path), "--formats", "png"]) == 0
    rows = census_rows.read_census_rows(COMMITTED)
    payload = gallery_payload(rows)
    old = [run for run, row in zip(payload["runs"], rows) if not row.get("final_planes")]
    drawn = sum(len(run["spectrum"]) for run in payload["runs"])
    assert len(old) > 800 and all(run["planes"] is None and run["spectrum"] == [] for run in old)
    assert drawn >= 22  # 22 score-scale-2 runs, each drawing at least one group
    page, problems = open_page(tmp_path / "gallery.html")
    assert page.locator(".tile").count() == len(rows)
    assert page.locator(".tile .none").count() == len(old)  # version-4 rows: "no coordinates"
    assert page.locator(".tile .spectrum").count() == drawn
    assert page.locator("a.tile").count() == 0  # no run file, no viewer
    with_orbits = sum(r["outcome"] != "none" for r in rows)
    page.click("#outcomes button[data-outcome=any]")
    assert page.locator(".tile").count() == with_orbits
    assert problems == []


def test_rows_of_version_4_stand_beside_new_ones_and_gain_coordinates_from_their_run_files(tmp_path, capsys):
    a = _sweep(tmp_path / "exact", {0: (4,), 1: (3,)})
    out = tmp_path / "census"
    out.mkdir()
    committed = next(
        r for r in map(json.loads, COMMITTED.read_text().splitlines()) if r["version"] == 4
    )  # version 4, seed-objective, no folder here
    (out / "census.jsonl").write_text(json.dumps(committed) + "\n")
    census = ["orbits", "census", str(a), "--out", str(out), "--no-progress", "--formats", "png"]
    assert cli_main(census) == 0
    rows = census_rows.read_census_rows(out / "census.jsonl")
    assert [(r["recipe"], r["version"], "final_planes" in r) for r in rows] == [
        ("exact", 6, True),
        ("exact", 6, True),
        ("seed-objective", 4, False),
    ]
    # a version-4 row of a listed run: recomputed (gains coordinates) while its file is there,
    # kept as it is once the file is gone
    old = [{**{k: v for k, v in r.items() if k != "final_planes"}, "version": 4} for r in rows]
    (out / "census.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    (a / "seed1.h5").unlink()
    assert cli_main(census) == 0
    rows = census_rows.read_census_rows(out / "census.jsonl")
    assert [(r["seed"], r["version"], "final_planes" in r) for r in rows] == [
        (0, 6, True),
        (1, 4, False),
        (0, 4, False),
    ]
    assert [r["planes"] is None for r in gallery_payload(rows)["runs"]] == [False, True, True]
    capsys.readouterr()
    # --viewers needs the run files: refused with --rows, one line, nothing written
    again = tmp_path / "again"
    assert cli_main(["orbits", "census", "--rows", str(out / "census.jsonl"), "--out", str(again), "--viewers"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --viewers needs the sweep folders") and err.count("\n") == 1 and not again.exists()

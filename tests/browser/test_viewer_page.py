"""The viewer page's parts: the build that inlines them (headmovies/render/core/viewer_page/
build.py) and unit tests of the pure JavaScript functions, loaded into a blank page of Debian's
Chromium through Playwright (the `browser` fixture, tests/conftest.py) and checked on known
answers and against the Python they mirror. The whole page is tested in tests/test_browser.py."""

from __future__ import annotations

import importlib
import json
import re
import tomllib
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from headmovies.render.core.frame_states import frame_states
from headmovies.render.core.projections import Panel, irrep_coordinate
from headmovies.render.core.scatter_viewer import HEATMAP, colour_stops
from headmovies.render.core.viewer_page import build as core_build
from headmovies.render.orbits.check import format_error
from headmovies.render.orbits.viewer import (
    PACKAGE,
    dequantise_rows,
    fourier_rows,
    pack,
    plane_words,
    quantise_rows,
    rows_to_factors,
    time_delta,
)

# the orbit family's page, as the engine's build makes it
build = SimpleNamespace(
    page=partial(core_build.page, package=PACKAGE),
    part=partial(core_build.part, package=PACKAGE),
    scripts=partial(core_build.scripts, PACKAGE),
    inline=core_build.inline,
)
FOLDER = Path(importlib.import_module(PACKAGE).__file__).parent
CORE = Path(core_build.__file__).parent
RULE = {"lookahead": 8, "ease": 0.25, "margin": 1.12, "floor": 1e-30}


# --- the build ----------------------------------------------------------------------------------


def test_the_page_inlines_every_part_in_order_and_is_deterministic():
    payload = {"meta": {"note": "a </script> in the data"}, "chunks": [], "live": None}
    text = build.page(payload)
    assert text == build.page(payload)
    assert "<script src=" not in text and '<link rel="stylesheet"' not in text and text.count("<style>") == 2
    names = build.scripts()
    assert names[0] == "format.js" and names[-1] == "scatter_main.js" and len(names) == len(set(names))
    assert {p.name for p in FOLDER.glob("*.js")} <= set(names)  # every script of the family is used
    assert all((FOLDER / n).is_file() or (CORE / n).is_file() for n in names)
    starts = [text.index(build.part(name).replace("</script", "<\\/script")) for name in names]
    assert starts == sorted(starts)  # in viewer.html's order
    assert build.part("viewer.css") in text
    data = re.search(r'<script id="payload" type="application/json">(.*?)</script>', text, re.S).group(1)
    assert json.loads(data) == payload


def test_the_inliner_escapes_closing_tags_and_refuses_comment_openers():
    parts = {"a.css": "p::after { content: '</style>'; }", "b.js": "const s = '</script>';", "c.js": "// <!--"}
    html = '<link rel="stylesheet" href="a.css"><script src="b.js"></script>'
    assert build.inline(html, parts.get) == (
        "<style>\np::after { content: '<\\/style>'; }</style><script>\nconst s = '<\\/script>';</script>"
    )
    with pytest.raises(ValueError, match=r"c\.js"):
        build.inline('<script src="c.js"></script>', parts.get)


def test_every_part_is_package_data_and_under_450_lines():
    pyproject = tomllib.loads((FOLDER.parents[3] / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["package-data"]
    for folder in (FOLDER, CORE, *FOLDER.parents[1].glob("*/viewer_page")):
        globs = data[f"headmovies.render.{folder.parent.name}.viewer_page"]
        for path in folder.iterdir():
            if path.is_file() and path.suffix != ".py":
                assert any(path.match(g) for g in globs), path.name
                assert len(path.read_text().splitlines()) <= 450, path.name


# --- the scripts in Chromium --------------------------------------------------------------------


@pytest.fixture(scope="module")
def js(browser):
    """A blank page holding every script but the engine's wiring (scatter_main.js): js(expression,
    arg) -> the expression's value (awaited), with `M` the scripts' functions (viewerModules) and
    `arg` the argument."""
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content("<!DOCTYPE html><html><body></body></html>")
    for name in build.scripts():
        if name != "scatter_main.js":
            page.add_script_tag(content=build.part(name))
    assert errors == [] and page.evaluate("Object.keys(viewerModules).length") == len(build.scripts()) - 1
    yield lambda expression, arg=None: page.evaluate(
        f"async (arg) => {{ const M = viewerModules; return {expression}; }}", arg
    )
    assert errors == []
    page.close()


def test_numbers_in_words(js):
    values = [0.0197, 0.01996, 0.02, 0.02003, 0.0199996, 0.020000001, 0.5, 6e-4, 3e-7, 0.0]
    for tol in (0.02, 0.05):
        assert js(f"arg.map((x) => M.format.formatError(x, {tol}))", values) == [format_error(x, tol) for x in values]
    assert js("[16000, 0, 999.6].map(M.format.fmtEpoch)") == ["16,000", "0", "1,000"]
    assert js("[0, 123.4, -1.2345, 0.012345].map(M.format.fmtNum)") == ["0", "123", "-1.23", "0.012"]
    gs = [15.0, 360 / 7, 360 / 37, 2.5, 120.0, 0.1 + 0.2]
    assert js("arg.map(M.format.fmtG)", gs) == [f"{x:g}" for x in gs]


def test_base64_and_the_differences_between_snapshots(js):
    assert js("Array.from(M.decode.b64bytes('AAEC/w=='))") == [0, 1, 2, 255]
    q = np.array([[100, -5], [-100, 7], [27, 7]], np.int8)  # 100 -> -100 wraps in int8
    d = time_delta(q)
    assert d[1].tolist() == [56, 12]
    assert js("Array.from(M.decode.undoDeltas(new Int8Array(arg), 2))", d.ravel().tolist()) == q.ravel().tolist()
    assert js("Array.from(M.decode.joined(new Int16Array([1, 2, 3]), new Int16Array([9]), 2))") == [1, 2, 9]


def test_unpack_reads_what_pack_wrote(js):
    rng = np.random.default_rng(0)
    arrays = {
        "f": rng.standard_normal((3, 2, 5)).astype(np.float32),
        "i": np.array([[-128, 0, 127]], np.int8),
        "s": np.array([-32768, 5, 32767], np.int16),
        "u": np.array([0, 1, 255], np.uint8),
    }
    got = js(
        "M.decode.unpack(arg).then((A) => Object.fromEntries(Object.entries(A).map(([k, v]) => "
        "[k, [v.constructor.name, Array.from(v)]])))",
        pack(arrays),
    )
    assert {k: v[0] for k, v in got.items()} == {
        "f": "Float32Array",
        "i": "Int8Array",
        "s": "Int16Array",
        "u": "Uint8Array",
    }
    for name, a in arrays.items():
        assert np.array_equal(np.array(got[name][1], a.dtype), a.ravel()), name


@pytest.mark.parametrize(
    "circuit,u,v,n,m",
    [
        ("qk", 1, 3, 24, 2),
        ("ov", 3, 1, 24, 2),
        ("qk", -8, 10, 24, 2),
        ("ov", 2, 5, 7, 3),
        ("qk", 4, 7, 37, 1),
        ("qk", 6, 6, 12, 1),
    ],
)
def test_plane_words_are_python_s(js, circuit, u, v, n, m):
    want = plane_words(Panel(circuit, u, v), n, m)
    got = js(f"M.planes.planeWords('{circuit}', {u}, {v}, {n}, {m})")
    assert got == {k: want[k] for k in ("circuit", "u", "v", "r", "order", "title", "axes")}


def test_planes_the_softmax_gauge_removes_are_refused(js):
    assert js("M.planes.centredAway('qk', 3, 24, 24)").startswith("QK planes with v = 0 are centred away")
    assert js("M.planes.centredAway('ov', -12, 1, 12)").startswith("OV planes with u = 0 are centred away")
    assert js("[M.planes.centredAway('qk', 0, 5, 24), M.planes.centredAway('ov', 5, 0, 24)]") == ["", ""]


def exact_source(n: int = 4) -> dict:
    """Rows of one head, one snapshot, d_head 1, C_4: F0 = cos(pi a / 2) = [1, 0, -1, 0], F1 =
    sin(pi b / 2) = [0, 1, 0, -1] (QK), whose rows u = 1 are 2 and 2i; 2 = 64 * 2^(-40/8)
    exactly. Rows u = 0, 2 and the OV factors are zero."""
    rows = np.zeros((1, 1, 4, 3, 2), np.int8)
    codes = np.full((1, 1, 4, 3), -32768, np.int16)
    rows[0, 0, 0, 1] = [64, 0]
    rows[0, 0, 1, 1] = [0, 64]
    codes[0, 0, :2, 1] = -40
    return {
        "rows": rows.ravel().tolist(),
        "codes": codes.ravel().tolist(),
        "H": 1,
        "N": n,
        "D": 1,
        "scaleSteps": 8,
        "zeroCode": -32768,
    }


SRC = "Object.assign({}, arg, {rows: new Int8Array(arg.rows), codes: new Int16Array(arg.codes)})"


def test_an_irrep_coordinate_of_a_known_circuit(js):
    F0, F1 = np.array([1.0, 0, -1, 0]), np.array([0.0, 1, 0, -1])
    M = np.outer(F0, F1)  # centred: F1 sums to 0
    assert np.isclose(irrep_coordinate(M, 1, 1), 1j) and np.isclose(irrep_coordinate(M, 1, 3), -1j)
    got = js(
        f"(() => {{ const src = {SRC}, out = new Float64Array(2), bound = new Float64Array(1), res = []; "
        "for (const [u, v] of [[1, 1], [1, 3], [-3, 1], [1, 2], [2, 1]]) { "
        "M.planes.planeFromRows(src, {circuit: 'qk', u, v}, 0, 1, out, bound); res.push([...out, bound[0]]); } "
        "return res; })()",
        exact_source(),
    )
    delta = 2**-5 / 2 * np.sqrt(2)  # half a step, both parts
    assert got[0] == pytest.approx([0, 1, delta + delta**2 / 4], abs=1e-15)  # X^(1,1) = i
    assert got[1] == pytest.approx([0, -1, delta + delta**2 / 4], abs=1e-15)  # X^(1,3) = conj row: -i
    assert got[2] == pytest.approx(got[0], abs=1e-15)  # u = -3 is u = 1
    assert got[3][:2] == [0, 0] and got[4][:2] == [0, 0]  # zero rows
    factors = js(
        f"(() => {{ const src = {SRC}; "
        "return [0, 1].map((f) => Array.from(M.planes.factorFromRows(src, 0, 0, f))); })()",
        exact_source(),
    )
    assert np.allclose(factors, [F0, F1], atol=1e-15)
    matrix = js(f"Array.from(M.planes.circuitMatrix({SRC}, 0, 0, 0))", exact_source())
    assert np.allclose(np.reshape(matrix, (4, 4)), M, atol=1e-15)


def test_planes_and_circuits_from_rows_match_python(js):
    """Random factors, odd n: the page's X^(u, v) is the product of the dequantised rows, the
    true one lies within its bound, and its circuits are rows_to_factors' products."""
    rng = np.random.default_rng(3)
    T, H, n, d = 2, 3, 7, 2
    F = rng.standard_normal((T, H, 4, n, d)) * np.array([1, 10, 0.1, 1])[:, None, None]
    q, codes = quantise_rows(fourier_rows(F))
    src = {
        "rows": q.ravel().tolist(),
        "codes": codes.ravel().tolist(),
        "H": H,
        "N": n,
        "D": d,
        "scaleSteps": 8,
        "zeroCode": -32768,
    }
    A = dequantise_rows(q, codes)  # [T, H, 4, 4, d]
    full = np.fft.ifft(F, axis=-2) * n  # exact rows, all u
    for circuit, u, v in [("qk", 2, -3), ("ov", 3, 5), ("ov", 6, 1)]:
        xy, bound = js(
            f"(() => {{ const src = {SRC}, out = new Float64Array({T * H * 2}), bound = new Float64Array({T * H}); "
            f"M.planes.planeFromRows(src, {{circuit: '{circuit}', u: {u}, v: {v}}}, 0, {T}, out, bound); "
            "return [Array.from(out), Array.from(bound)]; })()",
            src,
        )
        xy, bound = np.reshape(xy, (T, H, 2)), np.reshape(bound, (T, H))
        f = 0 if circuit == "qk" else 2

        def row(G, w):
            return G[..., w % n, :] if w % n <= n // 2 else np.conj(G[..., (-w) % n, :])

        want = (row(A[:, :, f], u) * row(A[:, :, f + 1], v)).sum(-1) / n
        assert np.allclose(xy[..., 0] + 1j * xy[..., 1], want, rtol=1e-12, atol=1e-12)
        exact = (full[:, :, f, u % n] * full[:, :, f + 1, v % n]).sum(-1) / n
        assert np.all(np.abs(xy[..., 0] + 1j * xy[..., 1] - exact) <= bound * (1 + 1e-9))
    R = rows_to_factors(A, n)  # [T, H, 4, n, d]
    got = js(f"[0, 1].map((w) => Array.from(M.planes.circuitMatrix({SRC}, 1, 2, w)))", src)
    assert np.allclose(np.reshape(got, (2, n, n)), [R[1, 2, 0] @ R[1, 2, 1].T, R[1, 2, 2] @ R[1, 2, 3].T], atol=1e-12)


def test_a_rescale_step_by_hand(js):
    """One head on the x axis at radius 4, 1, 1 at epochs 0, 1000, 2000, trails of 250 epochs:
    at t = 1 the trail reaches back to 750, a quarter of the way from 4 to 1 (1.75), and the
    axes ease a quarter of the way (in log scale) from 4 down to 1.75; at t = 2 from there to 1."""
    xy, epochs = [4, 0, 1, 0, 1, 0], [0, 1000, 2000]
    got = js(
        "Array.from(M.axes.axisLimits(new Float64Array(arg.xy), 1, arg.epochs, 250, arg.rule))",
        {"xy": xy, "epochs": epochs, "rule": RULE},
    )
    L1 = 4**0.75 * 1.75**0.25
    assert got == pytest.approx([1.12 * 4, 1.12 * L1, 1.12 * L1**0.75], rel=1e-14)
    assert js("M.axes.trailOf([0, 1000, 2000], 1, 250)") == {"front": 0, "w": 0.75, "start": 750}
    assert js("M.axes.trailOf([0, 100, 200, 300], 3, 200)") == {"front": 1, "w": None, "start": 100}
    assert js("[-5, 0, 999, 1000, 5000].map((e) => M.axes.indexAtOrBefore([0, 1000, 2000], e))") == [0, 0, 0, 1, 2]


def test_axis_limits_are_the_movie_s(js):
    rng = np.random.default_rng(1)
    T, H = 40, 5
    epochs = np.cumsum(rng.integers(10, 120, T)) - 10
    z = (
        np.cumsum(rng.standard_normal((T, H)) + 1j * rng.standard_normal((T, H)), 0)
        * np.geomspace(1e-3, 10, T)[:, None]
    )
    z[:10] = 0  # a plane all at 0 at first, beyond the look-ahead
    want = [s.limits[0] for s in frame_states(zip(epochs, z[:, None, :]))]
    got = js(
        "Array.from(M.axes.axisLimits(new Float64Array(arg.xy), arg.H, arg.epochs, 250, arg.rule))",
        {"xy": np.stack([z.real, z.imag], -1).ravel().tolist(), "H": H, "epochs": epochs.tolist(), "rule": RULE},
    )
    assert np.allclose(got, want, rtol=1e-12) and got[0] == 1.0


def test_heatmap_colours(js):
    stops = colour_stops(HEATMAP)  # RdBu_r's 11 ColorBrewer colours
    assert stops[0] == [5, 48, 97] and stops[5] == [247, 247, 247] and stops[-1] == [103, 0, 31]
    got = js("[-2, -1, 0, 0.1, 1, 3].map((z) => M.heatmap.colourOf(z, arg))", stops)
    assert got == [[5, 48, 97], [5, 48, 97], [247, 247, 247], [250, 233, 223], [103, 0, 31], [103, 0, 31]]


def test_timeline_label_rows(js):
    """curves.labelRows, the one rule every timeline places its marks' labels by: each label
    centred on its mark where the row has room (6 px apart), else in the next row; with no row
    free, after the end of the least crowded one; never past the axis' ends."""
    marks = [[100, 40], [110, 40], [120, 40], [125, 40], [400, 20], [495, 40]]
    placed = [[80, 0], [90, 1], [100, 2], [126, 0], [390, 0], [460, 0]]  # [left px, row]
    assert js("M.curves.labelRows(arg, 44, 500, 3)", marks) == placed
    assert js("M.curves.labelRows([[10, 30]], 44, 500, 1)") == [[44, 0]]


def test_timeline_steps_and_holds(js):
    assert js("[500, 600, 16000, 7, 1e6].map(M.curves.niceStep)") == [100, 100, 2000, 1, 200000]
    meta = {"events": [{"epoch": 3000}], "orbits": [{"locked_in": 1200}, {"locked_in": None}]}
    assert js("M.family.holdsOf(arg)", meta) == [3000, 1200]


def test_orbit_status_and_the_live_badge(js):
    o = {"locked_in": 10700}
    assert js("[[11000, true], [9000, true], [9000, false]].map(([e, v]) => M.heads.orbitStatus(arg, e, v))", o) == [
        "verified since epoch 10,700",
        "verified at this snapshot; for good from epoch 10,700",
        "not yet verified: from epoch 10,700",
    ]
    status = {"epoch": 1200, "final_epoch": 16000, "complete": False, "quiet_s": 45.4, "message": ""}
    assert js("M.live.liveBadge(arg, false)", status) == {
        "text": "live: epoch 1,200 of 16,000 · no new snapshot for 45 s",
        "className": "stale",
    }
    assert js("M.live.liveBadge(arg, true)", {**status, "quiet_s": 2, "complete": True}) == {
        "text": "live: epoch 1,200 of 16,000 · training finished · server not answering, retrying",
        "className": "lost",
    }


def test_snapshots_grow_and_say_what_each_head_is(js):
    """Two heads, C_2, one plane: chunk 0..2 then a chunk that rewrites snapshot 1 on (a resumed
    run). Head 0 is in the final 1-orbit {0} from snapshot 1; head 1 is dead at snapshot 2."""
    H, n, d = 2, 2, 1
    meta = {
        "n_heads": H,
        "n": n,
        "d_head": d,
        "m": 1,
        "panels": [{}],
        "fourier_rows": {"scale_steps": 8, "zero_code": -32768},
        "orbits": [{"key": "0", "heads": [0], "size": 1, "colour": "#1f77b4", "final": True}],
        "colours": {"other": "#a0a0a0", "dead": "#dcdcdc"},
    }

    def chunk(start, epochs, orbits, dead):
        T = len(epochs)
        rows = np.arange(T * H * 4 * 2 * 2 * d).reshape(T, H, 4, 2, 2 * d).astype(np.int8)
        return {
            "start": start,
            "epochs": epochs,
            "captions": [f"c{e}" for e in epochs],
            "eq_error": [None] * T,
            "orbits": orbits,
            "arrays": pack(
                {
                    "coords": np.arange(T * 1 * H * 2, dtype=np.float32).reshape(T, 1, H, 2),
                    "rows": time_delta(rows),
                    "codes": time_delta(np.full((T, H, 4, 2), 3, np.int16)),
                    "head_error": np.full((T, H), 0.5, np.float32),
                    "dead": np.array(dead, np.uint8),
                }
            ),
        }, rows

    c0, rows0 = chunk(0, [0, 10, 20], [[], [["0", 1e-7]], [["0", 2e-7]]], [[0, 0], [0, 0], [0, 0]])
    c1, rows1 = chunk(1, [15, 25], [[["0", 3e-7]], [["0", 4e-7]]], [[0, 0], [0, 1]])
    got = js(
        "(async () => { const s = new M.snapshots.Snapshots(arg.meta); await s.append(arg.c0); await s.append(arg.c1); "
        "const kinds = [0, 1, 2].map((t) => [0, 1].map((h) => s.styleOf(t, h).kind)); "
        "return {T: s.T, epochs: s.epochs, captions: s.captions, kinds, "
        "counts: [0, 1, 2].map((t) => s.verifiedCount(t)), "
        "rows: Array.from(s.rows), codes: Array.from(s.codes), coords: Array.from(s.coords), "
        "at: s.indexAtOrBefore(17), orbit: s.orbitAt(1, 0)[1], none: s.orbitAt(1, 1)}; })()",
        {"meta": meta, "c0": c0, "c1": c1},
    )
    assert got["T"] == 3 and got["epochs"] == [0, 15, 25] and got["captions"] == ["c0", "c15", "c25"]
    assert got["kinds"] == [["hint", "other"], ["orbit", "other"], ["orbit", "dead"]]
    assert got["counts"] == [0, 1, 1] and got["at"] == 1 and got["orbit"] == 3e-7 and got["none"] is None
    assert got["rows"] == np.concatenate([rows0[:1], rows1]).ravel().tolist() and set(got["codes"]) == {3}
    assert got["coords"] == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7]


def test_frequency_groups_in_words(js):
    """A deformed square (moments 1/3) and an exact pair, as viewer.group_words writes them."""
    from headmovies.render.orbits.spectrum import FrequencyGroup
    from headmovies.render.orbits.viewer import group_words

    square = FrequencyGroup(
        6,
        4,
        [0, 1, 2, 3],
        np.full(3, 1 / 3),
        np.array([1.0, 1.25]),
        np.zeros(2),
        np.ones(2),
        np.array([0.6, 0]),
        np.zeros(2),
    )
    pair = FrequencyGroup(
        12, 2, [4, 5], np.zeros(1), np.array([0.8, 0.8]), np.zeros(2), np.ones(2), np.zeros(2), np.zeros(2)
    )
    words = js("arg.map(M.groups.groupWords)", [group_words(square), group_words(pair)])
    assert words[0] == {
        "omega": 6,
        "title": "ω = 6 (orbit size 4): 4 heads 0, 1, 2, 3",
        "spectrum": "|μ̂_k|/Σ|ρ|, k = 1..3: 0.333 0.333 0.333",
        "detail": "score amplitude A 1.00–1.25 · stabiliser-odd QK ≤ 60.0 %, OV ≤ 0.0 %",
        "exact": False,
    }
    assert words[1]["exact"] is True and words[1]["spectrum"] == "|μ̂_k|/Σ|ρ|, k = 1..1: 0.000"
    assert js("[[0.0197, 0.02], [0.0179, 0.02], [0.022, 0.02]].map(([x, t]) => M.heads.marginal(x, t))") == [
        True,
        False,
        True,
    ]

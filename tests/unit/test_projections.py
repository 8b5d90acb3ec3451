"""Irrep coordinates of QK/OV circuits: exact rotation under shifts, known Fourier answers, and
the polygons an exactly equivariant layer draws (docs/math.md, "Irrep coordinates"; source 000)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from headmovies.errors import UserError
from headmovies.render.core.circuits import centre_ov, centre_qk, ov_circuit, qk_circuit
from headmovies.render.core.projections import (
    Panel,
    fourier_power,
    irrep_coordinate,
    parse_panel,
    polygon_order,
    rotation_frequency,
)
from headmovies.render.orbits.panel_choice import SOURCE_PANELS

from equivariant import equivariant_weights


def shift_qk(X, s):
    """T_s X T_s^{-1}: X'[a+s, b+s] = X[a, b]."""
    return np.roll(X, (s, s), axis=(-2, -1))


def shift_ov(X, s, m):
    """T_{ms} X T_s^{-1}: X'[c+ms, b+s] = X[c, b]."""
    return np.roll(X, (m * s, s), axis=(-2, -1))


@pytest.mark.parametrize("n, m", [(24, 2), (7, 2), (9, 3), (10, 1), (2, 1)])
def test_every_shift_rotates_by_r_s_2pi_over_n(n, m):
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, n))
    freqs = sorted({0, 1, n - 1, n // 2, -1, -(n // 3), 3 % n})
    for u in freqs:
        for v in freqs:
            for circuit in ("qk", "ov"):
                r = rotation_frequency(circuit, u, v, n, m)
                assert r == ((u + v) if circuit == "qk" else (m * u + v)) % n
                base = irrep_coordinate(X, u, v)
                for s in range(n):
                    Xs = shift_qk(X, s) if circuit == "qk" else shift_ov(X, s, m)
                    expected = base * np.exp(2j * np.pi * r * s / n)
                    assert abs(irrep_coordinate(Xs, u, v) - expected) < 1e-12 * max(1, abs(base)) * n


def test_known_fourier_component():
    # X[a, b] = cos(2 pi (u a + v b) / n + phi)  =>  X^(-u, -v) = (n / 2) e^{i phi}, zero elsewhere
    n, u, v, phi = 24, 3, 10, 0.7
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    X = np.cos(2 * np.pi * (u * a + v * b) / n + phi)
    assert abs(irrep_coordinate(X, -u, -v) - n / 2 * np.exp(1j * phi)) < 1e-12
    assert abs(irrep_coordinate(X, u, v) - n / 2 * np.exp(-1j * phi)) < 1e-12
    assert abs(irrep_coordinate(X, u, v + 1)) < 1e-12 and abs(irrep_coordinate(X, 0, 0)) < 1e-12
    P = fourier_power(X)
    assert P[(-u) % n, (-v) % n] == pytest.approx(n * n / 4) and P.sum() == pytest.approx(2 * n * n / 4)


def test_batched_and_periodic_frequencies():
    X = np.random.default_rng(0).standard_normal((3, 5, 9, 9))
    c = irrep_coordinate(X, 2, -4)
    assert c.shape == (3, 5)
    assert np.allclose(c, irrep_coordinate(X, 2 + 9, 5))  # frequencies are mod n
    assert np.allclose(c[1, 2], irrep_coordinate(X[1, 2], 2, -4))


def test_rotation_frequency_and_polygon_order():
    n, m = 24, 2
    assert [p.r(n, m) for p in SOURCE_PANELS] == [10, 10, 6, 6]  # source 000: OV r = 2*10 - 10
    assert [p.order(n, m) for p in SOURCE_PANELS] == [12, 12, 4, 4]
    assert polygon_order(0, 24) == 1 and polygon_order(12, 24) == 2 and polygon_order(8, 24) == 3
    assert polygon_order(3, 9) == 3 and polygon_order(2, 9) == 9 and polygon_order(-2, 9) == 9
    assert Panel("ov", 10, -10).title(24, 2) == "OV circuit, frequencies (u, v) = (10, -10)"
    # the note says what a shift does there: r * 360/n degrees per unit shift, and the polygon
    assert Panel("qk", 0, 6).note(24, 2) == (
        "a shift by s turns every dot by s·90° (ω = 6, 15° a step)\nso an orbit draws a square, or sits at 0"
    )
    assert Panel("ov", 10, -10).note(24, 2).startswith("a shift by s turns every dot by s·150° (ω = 10")
    assert Panel("ov", 12, 12).note(24, 2).endswith("so an orbit draws a pair of opposite points, or sits at 0")
    assert Panel("qk", 3, -3).note(24, 2) == "ω = 0: a shift moves no dot\nso an orbit's heads coincide"
    assert Panel("qk", 0, 1).note(7, 1).startswith("a shift by s turns every dot by s·51.43° (ω = 1, 51.43° a step)")


def test_parse_panel():
    assert parse_panel("qk:0,10") == Panel("qk", 0, 10)
    assert parse_panel(" OV : 10 , -10 ") == Panel("ov", 10, -10)
    for bad in ("qk:0,1.5", "xy:1,2", "qk:1", "qk 0,10", ""):
        with pytest.raises(UserError, match="bad panel"):
            parse_panel(bad)


# --- an exactly equivariant layer -----------------------------------------------------------------


def coords_of_layer(n, m, sizes, panels, extra=0, seed=0):
    W_E, W_Q, W_K, W_V, W_O, W_U = equivariant_weights(
        n, m, sizes, d_model=max(32, n), d_head=4, seed=seed, extra_heads=extra
    )
    M = centre_qk(qk_circuit(W_E, W_Q, W_K))
    R = centre_ov(ov_circuit(W_E, W_V, W_O, W_U))
    return M, R, np.stack([irrep_coordinate(M if p.circuit == "qk" else R, p.u, p.v) for p in panels])


def polygon(points, tol=1e-7):
    """(vertices, radius) if `points` (complex) lie on distinct vertices of a regular polygon
    centred at 0 with all vertices occupied equally often; else AssertionError."""
    radius = np.abs(points).max()
    assert radius > 0
    assert np.allclose(np.abs(points), radius, rtol=tol), "not all on one circle"
    verts = []
    for p in points:
        if not any(abs(p - q) < tol * radius for q in verts):
            verts.append(p)
    k = len(verts)
    ang = np.sort(np.angle(verts) % (2 * np.pi))
    gaps = np.diff(np.append(ang, ang[0] + 2 * np.pi))
    assert np.allclose(gaps, 2 * np.pi / k, atol=1e-7), f"unequal angles {gaps}"
    counts = [sum(abs(p - q) < tol * radius for p in points) for q in verts]
    assert len(set(counts)) == 1, f"vertices occupied unevenly {counts}"
    return k, radius


def test_builder_is_exactly_equivariant():
    n, m, sizes = 24, 2, (12, 4)
    W = equivariant_weights(n, m, sizes, d_model=32, d_head=4, seed=3)
    M = qk_circuit(W[0], W[1], W[2])
    R = ov_circuit(W[0], W[3], W[4], W[5])
    start = 0
    for k in sizes:
        for j in range(k):
            for s in range(n):
                h, g = start + j, start + (j + s) % k  # s.h
                assert np.allclose(M[g], shift_qk(M[h], s), atol=1e-10)
                assert np.allclose(R[g], shift_ov(R[h], s, m), atol=1e-10)
        assert not np.allclose(M[start], M[start + 1])  # really k distinct heads
        start += k


def test_equivariant_layer_draws_12gon_and_square_seed_panels():
    n, m = 24, 2
    _, _, X = coords_of_layer(n, m, (12, 4), SOURCE_PANELS)
    big, small = X[:, :12], X[:, 12:16]
    for p, panel in enumerate(SOURCE_PANELS):
        r = panel.r(n, m)
        k, _ = polygon(big[p])
        if r == 10:
            assert k == 12  # 12-gon, one head per vertex
            # head j sits at angle r*j*2pi/n from head 0 (the shift order of the builder)
            assert np.allclose(big[p], big[p, 0] * np.exp(2j * np.pi * r * np.arange(12) / n))
            # the 4-orbit is fixed by the shift 4, which turns r=10 planes by 10*4*15 deg: so it sits at 0
            assert np.abs(small[p]).max() < 1e-9 * np.abs(big[p]).max()
        else:
            assert r == 6 and k == 4  # squares; 3 heads per vertex
            assert polygon(small[p])[0] == 4


@pytest.mark.parametrize(
    "n, m, sizes, panels",
    [
        (9, 2, (9, 3), ["qk:0,3", "qk:3,3", "ov:3,3", "ov:3,-3", "qk:1,2", "qk:0,5"]),
        (15, 4, (5, 3), ["qk:0,3", "qk:3,3", "ov:3,3", "ov:5,5", "qk:0,5", "qk:5,5", "qk:1,2"]),
    ],
)
def test_odd_n_orbits_draw_regular_polygons(n, m, sizes, panels):
    panels = [parse_panel(p) for p in panels]
    _, _, X = coords_of_layer(n, m, sizes, panels, seed=1)
    scale = np.abs(X).max()
    start = 0
    for k in sizes:
        drawn = 0
        for p, panel in enumerate(panels):
            pts = X[p, start : start + k]
            r = panel.r(n, m)
            if (r * k) % n:  # the stabiliser (multiples of k) turns this plane: the orbit sits at 0
                assert np.abs(pts).max() < 1e-9 * scale
            elif np.abs(pts).max() > 1e-6 * scale:  # the builder's heads may also vanish in a plane
                assert polygon(pts)[0] == polygon_order(r, n) == n // math.gcd(r, n)
                drawn += 1
        assert drawn >= 3  # the test saw real polygons
        start += k


def test_orbit_check_finds_the_built_orbits():
    from headmovies.render.orbits import check as orbits

    W_E, W_Q, W_K, W_V, W_O, W_U = equivariant_weights(24, 2, (12, 4), 32, 4, seed=0, extra_heads=3)
    report = orbits.check_orbits(qk_circuit(W_E, W_Q, W_K), ov_circuit(W_E, W_V, W_O, W_U), 24, 2, tol=0.02)
    assert sorted(o.size for o in report.orbits) == [4, 12]
    assert sorted(sorted(o.heads) for o in report.orbits) == [list(range(12)), list(range(12, 16))]

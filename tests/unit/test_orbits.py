"""Orbit check (render/orbits.py) on layers built by hand with known orbits.

The builder works on the circuits M_h, R_h directly (what the check consumes): an orbit of
size k of C_n is a base head averaged over its stabiliser {0, k, 2k, ...}, then moved by the
shifts 0..k-1 (docs/math.md, "The cyclic group and orbits"). Gauge constants are added so that the check must centre.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from headmovies.render.core.circuits import circuits
from headmovies.render.core.projections import Panel
from headmovies.render.orbits.check import check_orbits, format_error, shift_ov, shift_qk, shifted_inner_products
from headmovies.render.orbits.panel_choice import SOURCE_PANELS, auto_panels, canonical, default_panels, resolve_panels


def orbit_heads(n, m, k, rng, scale_m=1.0, scale_r=1.0):
    """M, R [k, n, n]: one exactly equivariant orbit of size k (k divides n)."""
    stab = range(0, n, k)
    M0 = rng.normal(size=(n, n)) * scale_m
    R0 = rng.normal(size=(n, n)) * scale_r
    M0 = np.mean([shift_qk(M0, t) for t in stab], axis=0)
    R0 = np.mean([shift_ov(R0, t, m) for t in stab], axis=0)
    M = np.stack([shift_qk(M0, s) for s in range(k)])
    R = np.stack([shift_ov(R0, s, m) for s in range(k)])
    return M, R


def layer(n, m, sizes, n_random=0, seed=0, gauge=True):
    """Heads of orbits of the given sizes, then n_random random heads, in a shuffled order.
    Returns M, R [H, n, n] and the expected orbits as sorted head lists (largest first)."""
    rng = np.random.default_rng(seed)
    Ms, Rs, labels = [], [], []
    for i, k in enumerate(sizes):
        M, R = orbit_heads(n, m, k, rng)
        Ms.append(M)
        Rs.append(R)
        labels += [i] * k
    if n_random:
        Ms.append(rng.normal(size=(n_random, n, n)))
        Rs.append(rng.normal(size=(n_random, n, n)))
        labels += [-1] * n_random
    M, R = np.concatenate(Ms), np.concatenate(Rs)
    perm = rng.permutation(len(M))
    M, R, labels = M[perm], R[perm], np.array(labels)[perm]
    if gauge:  # constants the softmaxes ignore: per query row of M, per input column of R
        M = M + rng.normal(size=(len(M), n, 1)) * 3
        R = R + rng.normal(size=(len(R), 1, n)) * 3
    expected = [sorted(np.flatnonzero(labels == i).tolist()) for i in range(len(sizes))]
    return M, R, sorted(expected, key=lambda h: (-len(h), h[0]))


def stabiliser(n, k):
    return list(range(0, n, k))


def assert_exact(report, expected, n, unassigned=(), dead=(), max_err=1e-9):
    assert [o.heads for o in report.orbits] == expected
    assert [o.size for o in report.orbits] == [len(h) for h in expected]
    for o in report.orbits:
        assert o.stabiliser == stabiliser(n, o.size)
        assert 0 <= o.worst_error < max_err
    assert report.unassigned == sorted(unassigned)
    assert report.dead == sorted(dead)


@pytest.mark.parametrize("sizes", [[12, 4], [24, 8], [8, 4, 1, 1], [24], [12, 12, 8]])
def test_exact_orbits_c24(sizes):
    M, R, expected = layer(24, 2, sizes, n_random=32 - sum(sizes) if sum(sizes) < 32 else 0)
    report = check_orbits(M, R, 24, 2)
    n_random = max(0, 32 - sum(sizes))
    random_heads = sorted(set(range(len(M))) - {h for e in expected for h in e})
    assert len(random_heads) == n_random
    assert_exact(report, expected, 24, unassigned=random_heads)
    assert report.merged == []


def test_seed_layout_orbits_in_shift_order():
    # source 000: a 12-orbit and a 4-orbit among 32 heads
    M, R, expected = layer(24, 2, [12, 4], n_random=16, seed=3)
    report = check_orbits(M, R, 24, 2)
    assert_exact(report, expected, 24, unassigned=sorted(set(range(32)) - set(sum(expected, []))))
    o12 = report.orbits[0]
    assert o12.stabiliser == [0, 12]
    # units are in shift order: unit k = k . unit 0, so shifting unit 0 by k gives unit k
    Mc = M - M.mean(-1, keepdims=True)
    h0 = o12.units[0][0]
    for k, unit in enumerate(o12.units):
        assert np.allclose(shift_qk(Mc[h0], k), Mc[unit[0]])
    # every shift sends an orbit head onto a head of the same orbit, with ~0 error
    assert np.isin(report.match[:, o12.heads], o12.heads).all()
    assert np.nanmax(report.match_error[:, o12.heads]) < 1e-9


@pytest.mark.parametrize("m", [1, 2, 5])
def test_output_shift_m(m):
    M, R, expected = layer(12, m, [12, 6, 3, 2, 1], n_random=4, seed=m)
    assert_exact(check_orbits(M, R, 12, m), expected, 12, unassigned=sorted(set(range(28)) - set(sum(expected, []))))


def test_wrong_m_breaks_orbits():
    # an orbit built for m = 2 is not one for m = 1: its OV circuits do not shift that way
    M, R, _expected = layer(24, 2, [12, 4], seed=1)
    report = check_orbits(M, R, 24, 1)
    assert report.orbits == [] and report.unassigned == list(range(16))


@pytest.mark.parametrize("n,sizes", [(9, [9, 3, 1]), (7, [7, 1, 1]), (15, [5, 3, 15])])
def test_odd_n(n, sizes):
    M, R, expected = layer(n, 2, sizes, n_random=3, seed=n)
    assert_exact(check_orbits(M, R, n, 2), expected, n, unassigned=sorted(set(range(len(M))) - set(sum(expected, []))))


def test_duplicated_heads_are_merged():
    # each head of a 12-orbit is split into two heads with the same QK circuit whose OV
    # circuits are NOT equivariant on their own; only their sum is
    rng = np.random.default_rng(7)
    n, m = 24, 2
    M, R = orbit_heads(n, m, 12, rng)
    junk = rng.normal(size=R.shape) * 5
    M2 = np.concatenate([M, M + rng.normal(size=(12, n, 1))])  # same centred M
    R2 = np.concatenate([R + junk, -junk])
    report = check_orbits(M2, R2, n, m)
    assert len(report.orbits) == 1
    o = report.orbits[0]
    assert o.size == 12 and o.heads == list(range(24)) and o.stabiliser == [0, 12]
    assert sorted(o.units) == [[h, h + 12] for h in range(12)]
    assert report.merged == [[h, h + 12] for h in range(12)]
    assert o.worst_error < 1e-9 and report.unassigned == [] and report.dead == []
    # without the duplicate the halves alone are no orbit
    alone = check_orbits(M2[:12], R2[:12], n, m)
    assert alone.orbits == [] and alone.unassigned == list(range(12))


def test_merged_orbit_with_duplicates_of_some_heads():
    # a 4-orbit where head 0 appears three times (OV split in three): size stays 4
    rng = np.random.default_rng(8)
    M, R = orbit_heads(24, 2, 4, rng)
    M = np.concatenate([M, M[:1], M[:1]])
    R = np.concatenate([R, R[:1], R[:1]])
    R[[0, 4, 5]] *= 1 / 3
    report = check_orbits(M, R, 24, 2)
    assert [(o.size, o.heads) for o in report.orbits] == [(4, [0, 1, 2, 3, 4, 5])]
    assert report.merged == [[0, 4, 5]]


def test_dead_heads_set_apart():
    rng = np.random.default_rng(9)
    n, m = 24, 2
    M, R = orbit_heads(n, m, 8, rng)
    # head 8: zero OV (dead) but the QK of an orbit head: must not merge into it
    # heads 9, 10: same QK, cancelling OV (dead together); head 11: OV below 1 % of the largest
    shared = rng.normal(size=(n, n))
    extra_M = np.stack([M[0], shared, shared, rng.normal(size=(n, n))])
    r = rng.normal(size=(n, n))
    scale = np.linalg.norm(R[0] - R[0].mean(0))
    tiny = rng.normal(size=(n, n))
    tiny *= 0.005 * scale / np.linalg.norm(tiny - tiny.mean(0))
    extra_R = np.stack([np.zeros((n, n)) + rng.normal(size=(1, n)), r, -r, tiny])
    report = check_orbits(np.concatenate([M, extra_M]), np.concatenate([R, extra_R]), n, m)
    assert [(o.size, o.heads) for o in report.orbits] == [(8, list(range(8)))]
    assert report.dead == [8, 9, 10, 11]
    assert report.merged == [[9, 10]]
    assert report.unassigned == []
    assert np.isnan(report.match_error[:, 8:]).all() and (report.match[:, 8:] == -1).all()


def noisy(X, eps, rng):
    """X plus noise of relative Frobenius norm eps per head (after centring, as compared)."""
    N = rng.normal(size=X.shape)
    return X + eps * N * (np.linalg.norm(X, axis=(1, 2), keepdims=True) / np.linalg.norm(N, axis=(1, 2), keepdims=True))


def test_noise_below_tolerance_keeps_orbits():
    rng = np.random.default_rng(10)
    M, R, expected = layer(24, 2, [12, 4, 8], n_random=8, seed=10, gauge=False)
    report = check_orbits(noisy(M, 0.002, rng), noisy(R, 0.002, rng), 24, 2)
    assert [o.heads for o in report.orbits] == expected
    for o in report.orbits:
        # two heads each carry noise ~0.002: the match error is ~0.003, far below 0.02
        assert 0.001 < o.worst_error < 0.01


def test_noise_above_tolerance_breaks_orbits():
    rng = np.random.default_rng(11)
    M, R, expected = layer(24, 2, [12, 4, 8], n_random=8, seed=11, gauge=False)
    report = check_orbits(noisy(M, 0.05, rng), noisy(R, 0.05, rng), 24, 2)
    assert report.orbits == [] and report.unassigned == list(range(32))
    orbit_heads_ = sum(expected, [])
    # the nearest match is still the right head, just too far off
    assert np.nanmin(report.head_error[orbit_heads_]) > 0.02
    # noise only in R, above tolerance, is caught too (M and R are checked separately)
    report = check_orbits(M, noisy(R, 0.05, rng), 24, 2)
    assert report.orbits == []


def test_tolerance_argument():
    rng = np.random.default_rng(12)
    M, R, expected = layer(24, 2, [12, 4], seed=12, gauge=False)
    Mn, Rn = noisy(M, 0.02, rng), noisy(R, 0.02, rng)
    assert check_orbits(Mn, Rn, 24, 2, tol=0.02).orbits == []
    assert [o.heads for o in check_orbits(Mn, Rn, 24, 2, tol=0.1).orbits] == expected


def test_random_layer_has_no_orbit():
    rng = np.random.default_rng(13)
    M, R = rng.normal(size=(2, 32, 24, 24))
    report = check_orbits(M, R, 24, 2)
    assert report.orbits == [] and report.merged == [] and report.dead == []
    assert report.unassigned == list(range(32))
    assert np.nanmin(report.head_error) > 0.5


def test_uniform_attention_heads_merge_into_invariant_head():
    # centred M = 0 (uniform attention) for three heads: they merge, and their summed OV is
    # shift-invariant although no single one is, so they form an orbit of size 1
    rng = np.random.default_rng(14)
    n, m = 24, 2
    _, R = orbit_heads(n, m, 1, rng)
    parts = rng.normal(size=(2, n, n))
    R3 = np.stack([R[0] - parts[0] - parts[1], parts[0], parts[1]])
    M3 = rng.normal(size=(3, n, 1)) * np.ones((1, 1, n))  # constant rows: centred to 0
    report = check_orbits(M3, R3, n, m)
    assert [(o.size, o.heads, o.stabiliser) for o in report.orbits] == [(1, [0, 1, 2], list(range(24)))]


def test_format_error_never_prints_the_tolerance_for_another_value():
    assert [format_error(x) for x in (0.0197, 0.0006, 3e-7, 0.02)] == ["1.97%", "0.06%", "3.0e-07", "2.00%"]
    assert format_error(0.01996) == "1.996%" and format_error(0.02003) == "2.003%"  # not "2.00%"
    assert format_error(0.0199996) == "1.99996%"
    assert format_error(0.04996, tol=0.05) == "4.996%" and format_error(0.01996, tol=0.05) == "2.00%"
    assert format_error(0.0199999999) == "<2.00000%" and format_error(0.020000001) == ">2.00000%"


def test_report_json_and_text():
    M, R, expected = layer(24, 2, [12, 4], n_random=2, seed=15)
    report = check_orbits(M, R, 24, 2)
    report.epoch = 500
    data = json.loads(report.to_json())
    assert data["epoch"] == 500 and data["n"] == 24 and data["m"] == 2 and data["tol"] == 0.02
    assert [o["heads"] for o in data["orbits"]] == expected
    assert [o["stabiliser"] for o in data["orbits"]] == [[0, 12], list(range(0, 24, 4))]
    assert len(data["match_error"]) == 24 and len(data["match_error"][0]) == 18
    text = report.text()
    assert "orbit 1: size 12" in text and "stabiliser {0, 12}" in text
    assert "in no orbit: 2 heads" in text and "epoch 500" in text


def test_from_weights_one_hot_embedding():
    # weights of an exactly equivariant layer: one-hot W_E, W_U; head s.h has its W_Q, W_K,
    # W_V rows rolled by s and its W_O columns rolled by m s
    rng = np.random.default_rng(16)
    n, m, dh = 12, 2, 3
    base = {k: rng.normal(size=(2, n, dh)) for k in ("W_Q", "W_K", "W_V")}
    base["W_O"] = rng.normal(size=(2, dh, n))
    w = {k: [] for k in base}
    for h, k in ((0, 12), (1, 3)):  # a 12-orbit; a 3-orbit needs W averaged: use circuits
        for s in range(k):
            for name in ("W_Q", "W_K", "W_V"):
                w[name].append(np.roll(base[name][h], s, axis=0))
            w["W_O"].append(np.roll(base["W_O"][h], m * s, axis=1))
    weights = {k: np.stack(v) for k, v in w.items()}
    weights["W_E"] = np.eye(n)
    weights["W_U"] = np.eye(n)
    c = circuits(weights)
    report = check_orbits(c["qk"], c["ov"], n, m)
    # head 12's base is not stabilised by {0, 3, 6, 9}, so its 3 shifts are not an orbit
    assert [(o.size, o.heads) for o in report.orbits] == [(12, list(range(12)))]
    assert report.unassigned == [12, 13, 14]


@pytest.mark.parametrize("n,c", [(24, 1), (24, 2), (9, 2), (7, 3)])
def test_shifted_inner_products_match_direct_shifts(n, c):
    X = np.random.default_rng(n + c).normal(size=(5, n, n))
    G = shifted_inner_products(X, c)
    direct = np.array(
        [
            [[np.sum(np.roll(X[u], (c * s, s), axis=(0, 1)) * X[v]) for v in range(5)] for u in range(5)]
            for s in range(n)
        ]
    )
    assert np.allclose(G, direct, rtol=0, atol=1e-10)


def test_match_errors_equal_the_all_pairs_reference():
    # the report's match and error for every (shift, head) equal a plain loop over all
    # shifts and all pairs of heads, with e = max(relative QK error, relative OV error)
    M, R, _ = layer(12, 2, [6, 3], n_random=3, seed=21)
    M = M + 0.01 * np.random.default_rng(0).normal(size=M.shape)
    report = check_orbits(M, R, 12, 2)
    Mc, Rc = M - M.mean(-1, keepdims=True), R - R.mean(-2, keepdims=True)
    for s in range(12):
        for h in range(len(M)):
            e = [
                max(
                    np.linalg.norm(shift_qk(Mc[h], s) - Mc[g]) / np.linalg.norm(Mc[h]),
                    np.linalg.norm(shift_ov(Rc[h], s, 2) - Rc[g]) / np.linalg.norm(Rc[h]),
                )
                for g in range(len(M))
            ]
            assert report.match[s, h] == int(np.argmin(e))
            assert report.match_error[s, h] == pytest.approx(min(e), rel=1e-9)


def test_bad_shapes():
    with pytest.raises(ValueError, match="shape"):
        check_orbits(np.zeros((4, 24, 24)), np.zeros((4, 23, 24)), 24, 2)


# ---- panels chosen for the data (render/panel_choice.py) ----


def plane_orbit(n, m, k, qk, ov, rng, noise=0.1):
    """An exact orbit of size k whose power sits mostly in the QK plane qk = (u, v) and the OV
    plane ov = (u, v) (cosine modes), plus a little power everywhere else."""
    a = np.arange(n)
    M0 = np.cos(2 * np.pi * (qk[0] * a[:, None] + qk[1] * a[None, :]) / n + 0.3)
    R0 = np.cos(2 * np.pi * (ov[0] * a[:, None] + ov[1] * a[None, :]) / n + 1.1)
    M0 = M0 + noise * rng.normal(size=(n, n))
    R0 = R0 + noise * rng.normal(size=(n, n))
    stab = range(0, n, k)
    M0 = np.mean([shift_qk(M0, t) for t in stab], axis=0)
    R0 = np.mean([shift_ov(R0, t, m) for t in stab], axis=0)
    return (np.stack([shift_qk(M0, s) for s in range(k)]), np.stack([shift_ov(R0, s, m) for s in range(k)]))


def two_orbit_layer(planes4, seed=0):
    rng = np.random.default_rng(seed)
    M12, R12 = plane_orbit(24, 2, 12, (0, 10), (10, -10), rng)
    M4, R4 = plane_orbit(24, 2, 4, *planes4, rng)
    M = np.concatenate([M12, M4, rng.normal(size=(16, 24, 24))])
    R = np.concatenate([R12, R4, rng.normal(size=(16, 24, 24))])
    return M, R, check_orbits(M, R, 24, 2)


def test_auto_panels_find_the_seed_planes():
    M, R, report = two_orbit_layer(((0, 6), (6, -6)))
    assert [o.size for o in report.orbits] == [12, 4]
    assert auto_panels(report, M, R, 24, 2) == list(SOURCE_PANELS)
    panels, note = default_panels(report, M, R, 24, 2)
    assert panels == list(SOURCE_PANELS) and note.startswith("source 000's planes")


def test_auto_panels_elsewhere_and_default_falls_back():
    # the 4-orbit lives in QK (3, 3) (r = 6) and OV (1, 4) (r = 2 + 4 = 6): a square, but not
    # in the source's planes (0, 6), (6, -6)
    M, R, report = two_orbit_layer(((3, 3), (1, 4)), seed=1)
    auto = auto_panels(report, M, R, 24, 2)
    assert auto == [Panel("qk", 0, 10), Panel("ov", 10, -10), Panel("qk", 3, 3), Panel("ov", 1, 4)]
    assert [p.order(24, 2) for p in auto] == [12, 12, 4, 4]
    panels, note = default_panels(report, M, R, 24, 2)
    assert panels == auto and note == (
        "planes where this run's orbits are strongest (its 4-orbit is faint in source 000's QK planes: "
        "less than half as strong as in its best one)"
    )


def test_auto_panels_fill_up_to_four_after_a_single_orbit():
    rng = np.random.default_rng(2)
    M4, R4 = plane_orbit(24, 2, 4, (0, 6), (6, -6), rng)
    M = np.concatenate([M4, 0.3 * rng.normal(size=(4, 24, 24))])
    R = np.concatenate([R4, 0.3 * rng.normal(size=(4, 24, 24))])
    report = check_orbits(M, R, 24, 2)
    assert [o.size for o in report.orbits if o.size > 1] == [4]
    auto = auto_panels(report, M, R, 24, 2)
    assert auto[:2] == [Panel("qk", 0, 6), Panel("ov", 6, -6)]
    assert len(auto) == 4 and len(set(auto)) == 4 and [p.circuit for p in auto[2:]] == ["qk", "ov"]
    assert auto[2].order(24, 2) == auto[3].order(24, 2)


def test_canonical_plane_is_the_source_spelling():
    assert canonical(Panel("qk", 0, 14), 24, 2) == Panel("qk", 0, 10)
    assert canonical(Panel("ov", 14, 10), 24, 2) == Panel("ov", 10, -10)
    assert canonical(Panel("qk", 21, 21), 24, 2) == Panel("qk", 3, 3)


def test_resolve_panels_keywords():
    M, R, report = two_orbit_layer(((3, 3), (1, 4)), seed=1)
    assert resolve_panels(["source"], None, None, None, 24, 2) == (
        list(SOURCE_PANELS),
        "source 000's planes (--panels source)",
    )
    # the old name still works, and the note says so
    assert resolve_panels(["Seed"], None, None, None, 24, 2) == (
        list(SOURCE_PANELS),
        "source 000's planes (--panels source; --panels seed is its old name)",
    )
    assert resolve_panels(["auto"], report, M, R, 24, 2)[0][2:] == [Panel("qk", 3, 3), Panel("ov", 1, 4)]
    assert resolve_panels(None, report, M, R, 24, 2)[0][2:] == [Panel("qk", 3, 3), Panel("ov", 1, 4)]
    assert resolve_panels(["qk:1,2", "ov:1,3"], None, None, None, 24, 2)[0] == [Panel("qk", 1, 2), Panel("ov", 1, 3)]
    from headmovies.errors import UserError

    for gauge in ("qk:1,0", "ov:0,3", "ov:0,-1", "qk:0,0"):  # zero for every head: refused, not drawn
        with pytest.raises(UserError, match="centred away"):
            resolve_panels([gauge], None, None, None, 24, 2)
    for words in (["auto", "qk:1,2"], ["seed", "qk:1,2"]):
        with pytest.raises(UserError, match="one of default, auto, source"):
            resolve_panels(words, report, M, R, 24, 2)


def layer_logits(M, R, x):
    """Logits [B, L, n] of a layer given by its circuits, on token sequences x [B, L]."""
    att = np.exp(M[:, x[:, :, None], x[:, None, :]])
    att /= att.sum(-1, keepdims=True)  # [H, B, L, L]
    return np.einsum("hbij,hcbj->bic", att, R[:, :, x])


def test_bias_gauge_moves_nothing_yet_breaks_the_spec_check():
    """Moving a key-independent OV column beta from one head to another leaves the layer's
    output unchanged (attention sums to 1). The default check then rejects the orbit; the bias gauge
    verifies it exactly, and reports the total bias as equivariant."""
    n, m = 24, 2
    M, R, expected = layer(n, m, (12, 4), n_random=0, seed=4, gauge=False)
    beta = np.random.default_rng(5).normal(size=n) * 0.3 * np.linalg.norm(R[0]) / np.sqrt(n)
    h, g = expected[1][0], expected[1][1]  # two heads of the 4-orbit
    R2 = R.copy()
    R2[h] += beta[:, None]
    R2[g] -= beta[:, None]
    x = np.random.default_rng(6).integers(0, n, size=(50, 5))
    assert np.allclose(layer_logits(M, R, x), layer_logits(M, R2, x), atol=1e-12)
    spec = check_orbits(M, R2, n, m)
    assert [o.size for o in spec.orbits if o.size > 1] == [12]  # the 4-orbit is lost
    assert spec.head_error[h] > 0.05
    bias = check_orbits(M, R2, n, m, gauge="bias")
    assert_exact(bias, expected, n)
    assert bias.bias_error < 1e-12 and bias.gauge == "bias"
    assert json.loads(bias.to_json())["gauge"] == "bias" and "bias gauge" in bias.text()


def test_bias_gauge_reports_a_non_equivariant_total_bias():
    n, m = 24, 2
    M, R, expected = layer(n, m, (12, 4), seed=4, gauge=False)
    a = np.arange(n)
    R2 = R.copy()
    R2[expected[0][0]] += np.cos(2 * np.pi * 5 * a / n)[:, None]  # a bias at frequency 5: rolls
    report = check_orbits(M, R2, n, m, gauge="bias")
    assert_exact(report, expected, n)  # the heads are still orbits ...
    assert report.bias_error > 0.5  # ... but the layer is not equivariant
    with pytest.raises(ValueError, match="gauge"):
        check_orbits(M, R, n, m, gauge="full")


def test_bias_gauge_floors_and_no_live_head():
    n, m = 12, 2
    M, R, expected = layer(n, m, (6, 3), seed=7, gauge=False)
    R = R - R.mean(2, keepdims=True)  # no biases at all
    report = check_orbits(M, R, n, m, gauge="bias")
    assert_exact(report, expected, n)
    assert report.bias_error == 0.0
    # heads whose OV is only a bias are dead in the bias gauge (live in the default gauge)
    rng = np.random.default_rng(8)
    R_bias = np.concatenate([R, np.repeat(rng.normal(size=(2, n, 1)), n, axis=2)])
    M_bias = np.concatenate([M, rng.normal(size=(2, n, n))])
    report = check_orbits(M_bias, R_bias, n, m, gauge="bias")
    assert report.dead == [9, 10] and [o.heads for o in report.orbits] == expected
    assert check_orbits(M_bias, R_bias, n, m).dead == []
    # no live head at all: an empty report, not a crash
    for gauge in ("spec", "bias"):
        empty = check_orbits(M, np.zeros_like(R), n, m, gauge=gauge)
        assert empty.orbits == [] and empty.dead == list(range(9)) and np.isnan(empty.head_error).all()

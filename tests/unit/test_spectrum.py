"""The orbit spectrum (`render.orbits.spectrum`) on layers with known answers: exact orbits give
zeros, a deformed group gives hand-computed moments, amplitudes, stabiliser-odd fractions and
within-group match errors; marginal orbits and near misses of the check (within a tenth of the tolerance)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from headmovies.render.orbits.check import check_orbits, is_marginal, shift_ov, shift_qk
from headmovies.render.orbits.spectrum import group_match, low_high, orbit_spectrum, panel_lines, stabiliser_odd

N, MS = 24, 2
THETA = 2 * np.pi * np.arange(N) / N


def cos_head(omega, score_amp, phi, amp, psi=0.3, odd=0.0):
    """M [n, n] = score_amp cos(theta_w b - phi) (+ odd cos(theta_1 b)) for every query a, and
    R [n, n] = amp cos(theta_w (c - b) - psi): a head at frequency w with score amplitude A,
    phase phi and OV plane (w, -w) amplitude |X^(w,-w)| = amp n / 2."""
    M = np.tile(score_amp * np.cos(omega * THETA - phi) + odd * np.cos(THETA), (N, 1))
    R = amp * np.cos(omega * (THETA[:, None] - THETA[None, :]) - psi)
    return M, R


def orbit_layer(omega, size, seed=0):
    """An exact orbit of `size` heads at frequency omega: a template fixed by the stabiliser
    (size Z_n) with a dominant (0, omega) QK part and stabiliser-invariant noise, shifted."""
    rng = np.random.default_rng(seed)
    M0, R0 = cos_head(omega, 1.5, 0.4, 2.0)
    noise_m, noise_r = 0.05 * rng.standard_normal((2, N, N))
    stab = range(0, N, size)
    M0 = M0 + np.mean([shift_qk(noise_m, s) for s in stab], 0)
    R0 = R0 + np.mean([shift_ov(noise_r, s, MS) for s in stab], 0)
    M = np.stack([shift_qk(M0, s) for s in range(size)])
    R = np.stack([shift_ov(R0, s, MS) for s in range(size)])
    return M, R


@pytest.mark.parametrize("omega, size", [(6, 4), (2, 12), (8, 3), (12, 2)])
def test_an_exact_orbit_has_a_zero_spectrum_and_no_odd_part(omega, size):
    M, R = orbit_layer(omega, size)
    (group,) = orbit_spectrum(M, R, N, MS)
    assert (group.omega, group.order, group.heads) == (omega, size, list(range(size)))
    assert group.spectrum.shape == (size - 1,)
    np.testing.assert_allclose(group.spectrum, 0, atol=1e-12)
    np.testing.assert_allclose(group.odd_qk, 0, atol=1e-12)
    np.testing.assert_allclose(group.odd_ov, 0, atol=1e-12)
    assert group.match["match_qk"] < 1e-12 and group.match["match_ov"] < 1e-12
    assert all(np.isnan(group.match[k]) for k in ("in_plane_qk", "in_plane_ov", "key_independent_ov"))
    # the template's amplitude, plus a little noise; w = n/2 is a real plane: r = 1.5 |cos(phi)|
    np.testing.assert_allclose(group.amplitude, 1.5 * (abs(np.cos(0.4)) if omega == 12 else 1), atol=0.05)
    report = check_orbits(M, R, N, MS)
    assert [o.size for o in report.orbits] == [size]
    assert report.groups[0].heads == group.heads


def test_a_deformed_square_has_the_hand_computed_spectrum():
    """Four heads at w = 6 (N = 4) on the square's phases 0, 90, 180, 270 degrees with OV weights
    1, 1, 1, 3: mu_1 = 1 + i - 1 - 3i = -2i, mu_2 = 1 - 1 + 1 - 3 = -2, mu_3 = 1 - i - 1 + 3i = 2i,
    so every |mu_k| / sum|rho| = 2 / 6. Head 0 also carries cos(theta_1 b) of amplitude 0.75 next to
    its w = 6 part of amplitude 1: shift 4 (the stabiliser's generator) turns frequency 1 by 60
    degrees, so its stabiliser mean is 0 and the odd fraction is 0.75 / sqrt(1 + 0.75^2) = 0.6."""
    heads = [cos_head(6, 1.0, k * np.pi / 2, a, odd=0.75 if k == 0 else 0.0) for k, a in enumerate((1, 1, 1, 3))]
    M = np.stack([h[0] for h in heads])
    R = np.stack([h[1] for h in heads])
    (group,) = orbit_spectrum(M, R, N, MS)
    assert (group.omega, group.order, group.heads) == (6, 4, [0, 1, 2, 3])
    np.testing.assert_allclose(group.spectrum, [1 / 3, 1 / 3, 1 / 3], atol=1e-12)
    np.testing.assert_allclose(group.amplitude, 1.0, atol=1e-12)
    np.testing.assert_allclose(np.exp(1j * group.phase), np.exp(1j * np.arange(4) * np.pi / 2), atol=1e-12)
    np.testing.assert_allclose(group.weight / group.weight[0], [1, 1, 1, 3], atol=1e-12)
    np.testing.assert_allclose(group.odd_qk, [0.6, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(group.odd_ov, 0, atol=1e-12)
    d = json.loads(json.dumps(group.to_dict()))
    assert d["spectrum"] == [0.3333, 0.3333, 0.3333] and d["odd_qk"][0] == 0.6


def test_a_phase_off_by_half_a_step_gives_its_moments():
    """Two heads at w = 12 (N = 2), equal weights, at phases 0 and pi + delta: mu_1 = 1 - e^{i delta},
    |mu_1| / 2 = |sin(delta / 2)|."""
    delta = 0.5
    heads = [cos_head(12, 0.8, p, 1.0) for p in (0.0, np.pi + delta)]
    (group,) = orbit_spectrum(np.stack([h[0] for h in heads]), np.stack([h[1] for h in heads]), N, MS)
    # w = n/2 is a real plane: cos(pi b - phi) = (-1)^b cos(phi), so r = |z| / n = 0.8 |cos(phi)|
    np.testing.assert_allclose(group.amplitude, [0.8, 0.8 * abs(np.cos(np.pi + delta))], atol=1e-12)
    assert group.order == 2 and group.spectrum.shape == (1,)
    assert 0 < group.spectrum[0] < 1


def test_stabiliser_odd_of_a_pair_is_half_the_difference():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3, N, N))
    odd = stabiliser_odd(X, N, 12, 1)
    want = [np.linalg.norm(x - shift_qk(x, 12)) / (2 * np.linalg.norm(x)) for x in X]
    np.testing.assert_allclose(odd, want, rtol=1e-12)
    assert stabiliser_odd(X, N, N, 1).tolist() == [0, 0, 0]  # trivial stabiliser: nothing to fix


def test_dead_heads_stay_out_of_the_groups_and_bad_shapes_are_refused():
    M, R = orbit_layer(6, 4)
    groups = orbit_spectrum(M, R, N, MS, live=np.array([True, True, True, False]))
    assert groups[0].heads == [0, 1, 2]
    assert orbit_spectrum(M[:0], R[:0], N, MS) == []
    with pytest.raises(ValueError, match="shape"):
        orbit_spectrum(M, R[:, :3], N, MS)


def test_marginal_is_within_a_tenth_of_the_tolerance():
    assert is_marginal(0.0197) and is_marginal(0.020006) and is_marginal(0.018) and is_marginal(0.022)
    assert not is_marginal(0.0179) and not is_marginal(0.0221) and not is_marginal(0.0)


@pytest.mark.parametrize("eps, verified, near", [(0.019, True, False), (0.021, False, True), (0.03, False, False)])
def test_the_check_marks_marginal_orbits_and_near_misses(eps, verified, near):
    """A pair at w = 12 whose second head's OV is scaled by (1 + eps): every match of the pair
    has OV error eps relative to one head or eps / (1 + eps) relative to the other, so the
    worst error is eps: 1.9 % verifies as marginal, 2.1 % is a near miss, 3 % neither."""
    M, R = orbit_layer(12, 2)
    R[1] *= 1 + eps
    report = check_orbits(M, R, N, MS)
    assert bool(report.orbits) == verified and bool(report.near_misses) == near
    d = report.to_dict()
    text = report.text()
    if verified:
        assert d["orbits"][0]["marginal"] is True and "marginal" in text
        assert report.orbits[0].worst_error == pytest.approx(eps, rel=1e-9)
    if near:
        assert d["near_misses"][0]["worst_error"] == pytest.approx(eps, rel=1e-5)
        assert "near miss" in text and report.unassigned == [0, 1]
    if not verified and not near:
        assert "marginal" not in text


def test_the_spectrum_figure_draws_each_group_over_epochs():
    """Two snapshots: the deformed square (every moment 1/3), then the exact one (0, at the floor)."""
    from headmovies.render.orbits.history_figures import FLOOR, orbit_spectrum_figure

    heads = [cos_head(6, 1.0, k * np.pi / 2, a) for k, a in enumerate((1, 1, 1, 3))]
    deformed = orbit_spectrum(np.stack([h[0] for h in heads]), np.stack([h[1] for h in heads]), N, MS)
    exact = orbit_spectrum(*orbit_layer(6, 4), N, MS)
    fig = orbit_spectrum_figure(np.array([0, 100]), [deformed, exact])
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["k = 1", "k = 2", "k = 3"]
    for line in lines:
        np.testing.assert_allclose(line.get_ydata(), [1 / 3, FLOOR])
    assert ax.get_yscale() == "log" and "ω = 6 (orbit size 4)" in ax.get_title()


def test_the_sweep_summary_carries_each_group_s_spectrum_in_brief():
    from headmovies.render.orbits.summary import orbit_summary

    heads = [cos_head(6, 1.0, k * np.pi / 2, a) for k, a in enumerate((1, 1, 1, 3))]
    M2, R2 = orbit_layer(2, 12)
    M = np.concatenate([np.stack([h[0] for h in heads]), M2])
    R = np.concatenate([np.stack([h[1] for h in heads]), R2])
    brief = {b["omega"]: b for b in orbit_summary(M, R, N, MS)["spectrum"]}
    assert brief[6] == {"omega": 6, "heads": 4, "low": 0.3333, "high": None, "r_max": 1.0}
    assert brief[2]["heads"] == 12 and brief[2]["low"] < 1e-9 and brief[2]["high"] < 1e-9


def test_a_run_trained_with_a_score_scale_reports_the_amplitude_its_softmax_sees(tmp_path):
    """The same weights stored with config score_scale=2: every r doubles, in the check, the
    one pass over the snapshots and the sweep summary; the moments do not change."""
    from headmovies.render.orbits.check_run import run_report
    from headmovies.render.orbits.stream import collect
    from headmovies.render.orbits.summary import sweep_summary
    from headmovies.runfile.reader import Run

    from equivariant import equivariant_run

    epochs = np.array([0, 100])
    plain = equivariant_run(tmp_path / "plain.h5", epochs, orbit_sizes=(4,), extra_heads=1)
    scaled = equivariant_run(
        tmp_path / "scaled.h5", epochs, orbit_sizes=(4,), extra_heads=1, config={"score_scale": 2.0}
    )
    out = {}
    for name, path in (("plain", plain), ("scaled", scaled)):
        with Run(path) as run:
            out[name] = (
                run_report(run).groups,
                collect(run, (), check=True).groups[-1],
                sweep_summary(run)["spectrum"],
            )
    # `orbits check` (run_report) gives each group its within-group match error; a movie's pass does not
    assert all(g.match for g in out["plain"][0]) and not any(g.match for g in out["plain"][1])
    for a, b in zip(out["plain"][0], out["scaled"][0]):
        np.testing.assert_allclose(b.amplitude, 2 * a.amplitude, rtol=1e-12)
        np.testing.assert_array_equal(b.spectrum, a.spectrum)
    for a, b in zip(out["plain"][1], out["scaled"][1]):
        np.testing.assert_allclose(b.amplitude, 2 * a.amplitude, rtol=1e-12)
    for a, b in zip(out["plain"][2], out["scaled"][2]):
        assert b["r_max"] == pytest.approx(2 * a["r_max"], rel=1e-3)


def noise_free_pair(score_amp=0.8, amp=1.0):
    """An exact pair at w = 12 (N = 2) of `cos_head` templates: head 1 is head 0 shifted by 1."""
    M0, R0 = cos_head(12, score_amp, 0.0, amp)
    return np.stack([M0, shift_qk(M0, 1)]), np.stack([R0, shift_ov(R0, 1, MS)])


def test_a_pair_scaled_in_its_plane_mismatches_there():
    """Head 1's QK scaled in its (0, 12) plane from amplitude 0.8 to 0.8 + d: under an odd shift
    head 0 lands on head 1 with error d / 0.8 (relative to head 0) and head 1 on head 0 with
    d / (0.8 + d); even shifts fix each head. All of it lies in the group's plane; the OV
    circuits match exactly."""
    d = 0.1
    M, R = noise_free_pair()
    M[1] *= (0.8 + d) / 0.8
    got = group_match(M - M.mean(-1, keepdims=True), R - R.mean(-2, keepdims=True), 12, MS)
    assert got["match_qk"] == pytest.approx(d / 0.8, rel=1e-12) and got["match_ov"] < 1e-12
    assert got["in_plane_qk"] == pytest.approx(1.0, abs=1e-12)
    assert np.isnan(got["in_plane_ov"]) and np.isnan(got["key_independent_ov"])


def test_a_key_independent_ov_part_is_found_outside_the_plane():
    """Head 1's OV gets beta_c = b cos(2 pi c / n) for every key (the part the bias gauge sets
    aside). Under an odd shift head 1 lands on head 0 with error ||beta 1^T|| / ||R_1||; under
    the even shift s = 6 it lands on itself, and the outputs' shift by 2 s = 12 flips beta: error
    2 ||beta 1^T|| / ||R_1||, the largest: at w = n/2 the template is amp cos(psi) (-1)^(c-b), so
    ||R_0|| = amp n cos(psi), ||beta 1^T|| = b n / sqrt 2, orthogonal to it, and the error is
    sqrt 2 b / sqrt(amp^2 cos^2 psi + b^2 / 2). All of the mismatch is key-independent."""
    b, amp = 0.1, 1.0
    M, R = noise_free_pair(amp=amp)
    R[1] += b * np.cos(THETA)[:, None]
    (group,) = orbit_spectrum(M, R, N, MS)
    got = group.match
    want = np.sqrt(2) * b / np.hypot(amp * np.cos(0.3), b / np.sqrt(2))
    assert got["match_ov"] == pytest.approx(want, rel=1e-12) and got["match_qk"] < 1e-12
    assert got["key_independent_ov"] == pytest.approx(1.0, abs=1e-12) and got["in_plane_ov"] == pytest.approx(
        0, abs=1e-12
    )
    assert np.isnan(got["in_plane_qk"])
    np.testing.assert_allclose(group.spectrum, 0, atol=1e-12)  # the spectrum cannot see it
    text = group.text()
    assert text.endswith(
        "within-group match error QK 0.0%, OV 14.8%; no QK mismatch; the OV mismatch lies 0% in its plane, "
        "100% in the key-independent OV part, 0% elsewhere"
    )
    d = json.loads(json.dumps(group.to_dict()))
    assert d["within_group_match"]["match_ov"] == 0.1476 and d["within_group_match"]["in_plane_qk"] is None


def loop_match(Mc, Rc, omega, m):
    """group_match by a plain loop over shifts and partners: each shifted head's best partner,
    its errors by difference, and the mismatch's parts by projecting with fft2."""
    G, n = Mc.shape[:2]
    v = (1 - m) * omega % n
    plane_qk, plane_ov, key_free = np.zeros((3, n, n), bool)
    plane_qk[0, [omega, -omega % n]] = True
    plane_ov[omega, v] = plane_ov[-omega % n, -v % n] = True
    key_free[:, 0] = ~plane_ov[:, 0]
    errors, power = [], np.zeros(5)  # ||D_QK||^2, ||D_OV||^2, in plane QK, OV, key-free OV
    for s in range(n):
        for g in range(G):
            DM = [shift_qk(Mc[g], s) - Mc[h] for h in range(G)]
            DR = [shift_ov(Rc[g], s, m) - Rc[h] for h in range(G)]
            nM, nR = np.linalg.norm(Mc[g]), np.linalg.norm(Rc[g])
            e = [(np.linalg.norm(DM[h]) / nM, np.linalg.norm(DR[h]) / nR) for h in range(G)]
            h = min(range(G), key=lambda h: max(e[h]))
            errors.append(e[h])
            FM, FR = np.abs(np.fft.fft2(DM[h])) ** 2 / n**2, np.abs(np.fft.fft2(DR[h])) ** 2 / n**2
            power += [FM.sum(), FR.sum(), FM[plane_qk].sum(), FR[plane_ov].sum(), FR[key_free].sum()]
    (qk, ov), shares = np.max(errors, 0), power[2:] / power[[0, 1, 1]]
    names = ("in_plane_qk", "in_plane_ov", "key_independent_ov")
    return {"match_qk": qk, "match_ov": ov, **dict(zip(names, shares))}


@pytest.mark.parametrize("n, omega, eps", [(24, 8, 0.3), (24, 8, 1e-5), (9, 3, 1e-5), (9, 4, 0.3), (9, 3, 0.0)])
def test_the_match_error_equals_a_plain_loop(n, omega, eps):
    """Random groups (a near orbit of 3 heads plus noise eps, and a fourth random head at eps =
    0.3): group_match equals the loop to 1e-10, also for errors near rounding. At eps = 0 on
    n = 9 the QK circuits form an exact orbit but the OV ones do not (their key-independent part
    turns with the outputs): match_qk is 0 to rounding, not the inner products' ~1e-8."""
    rng = np.random.default_rng(n + omega)
    a = 2 * np.pi * np.arange(n) / n
    M0 = np.cos(omega * a)[None, :] + 0.3 * np.cos(a[:, None] + 2 * a[None, :])
    R0 = np.cos(omega * (a[:, None] - a[None, :]) + 0.3) + 0.2 * np.cos(a)[:, None]
    M = np.stack([shift_qk(M0, s) for s in range(3)] + ([rng.standard_normal((n, n))] if eps == 0.3 else []))
    R = np.stack([shift_ov(R0, s, 2) for s in range(3)] + ([rng.standard_normal((n, n))] if eps == 0.3 else []))
    M, R = M + eps * rng.standard_normal(M.shape), R + eps * rng.standard_normal(R.shape)
    Mc, Rc = M - M.mean(-1, keepdims=True), R - R.mean(-2, keepdims=True)
    got, want = group_match(Mc, Rc, omega, 2), loop_match(Mc, Rc, omega, 2)
    if eps == 0:
        assert got["match_qk"] < 1e-12 and np.isnan(got["in_plane_qk"])
        del got["in_plane_qk"], want["in_plane_qk"]  # shares of a rounding-level mismatch
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_low_high_splits_the_spectrum_at_k_3_and_skips_missing_values():
    assert low_high([0.1, 0.3, 0.2, 0.05, 0.4]) == (0.3, 0.4)
    assert low_high([0.2]) == (0.2, None)
    assert low_high([None, float("nan"), 0.1, None]) == (0.1, None)
    assert low_high([]) == (None, None)
    # a missing entry keeps the others' k: 0.9 is k = 4's, not a low harmonic
    assert low_high([None, 0.5, 0.1, 0.9]) == (0.5, 0.9)
    assert low_high(np.array([np.nan, np.nan, np.nan, 0.2])) == (None, 0.2)


def hexagon_twice():
    """Twelve heads at w = 2 (N = 12), two on each vertex of a regular hexagon (phases 60 j degrees,
    equal OV weights): mu_k = 2 sum_j e^{i k pi j / 3} = 12 when 6 | k, else 0. So the spectrum is
    0 for k <= 3 (what the loss sees) and 1 at k = 6: a near-flat family in one point."""
    heads = [cos_head(2, 1.2, (j // 2) * np.pi / 3, 1.0) for j in range(12)]
    return np.stack([h[0] for h in heads]), np.stack([h[1] for h in heads])


def test_each_group_s_own_plane_carries_its_spectrum_in_the_panel_lines():
    from headmovies.render.core.projections import parse_panel

    M2, R2 = hexagon_twice()
    square = [cos_head(6, 1.0, k * np.pi / 2, a) for k, a in enumerate((1, 1, 1, 3))]  # every |mu_k| 1/3
    M = np.concatenate([M2, np.stack([h[0] for h in square])])
    R = np.concatenate([R2, np.stack([h[1] for h in square])])
    groups = orbit_spectrum(M, R, N, MS)
    np.testing.assert_allclose(groups[0].spectrum, [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0], atol=1e-12)
    panels = [parse_panel(p) for p in ("ov:2,-2", "qk:0,2", "qk:0,-6", "qk:0,5", "ov:-6,6", "qk:1,1", "ov:3,-2")]
    assert panel_lines(groups, panels, N, MS) == [
        "",  # the group at w = 2 is told once, in its QK panel
        "frequency group ω = 2: 12 heads\n|μ̂_k|/Σ|ρ| < 1e-6 (k ≤ 3), ≤ 1 (k ≥ 4)",
        "frequency group ω = 6: 4 heads\n|μ̂_k|/Σ|ρ| ≤ 0.33 (k ≤ 3)",  # (0, -6) is the same plane
        "frequency group ω = 5: empty\n(ω = 5 is no live head's dominant frequency)",
        "",  # the OV plane -(6, -6) of the group already told
        "",  # not a group's own plane (rotation frequency 2 but key frequency 1)
        "",  # OV plane of rotation frequency 4, not a group's (4, -4)
    ]
    pair = [cos_head(12, 0.8, 0.0, 1.0), cos_head(12, 0.8, np.pi, 3.0)]  # |mu_1| = |1 - 3|, over 4
    (g,) = orbit_spectrum(np.stack([h[0] for h in pair]), np.stack([h[1] for h in pair]), N, MS)
    assert panel_lines([g], [parse_panel("ov:12,12")], N, MS) == [
        "frequency group ω = 12: 2 heads\n|μ̂_k|/Σ|ρ| ≤ 0.5 (k ≤ 1)"  # w = n/2: (12, -12) is (12, 12)
    ]


def plane_head(n, m, omega, phi, amp):
    """M [n, n] = cos(2 pi omega b / n - phi) for every query a, and R [n, n] = amp cos(2 pi (u c
    + v b) / n) in the group's own OV plane (u, v) = (omega, (1 - m) omega)."""
    t = 2 * np.pi * np.arange(n) / n
    u, v = omega, (1 - m) * omega
    return np.tile(np.cos(omega * t - phi), (n, 1)), amp * np.cos(u * t[:, None] + v * t[None, :])


@pytest.mark.parametrize(
    "n, m, omega, phases, panels, want",
    [
        # m = 3, n = 10: the own OV plane of w = 2 is (2, -4); (2, -2) turns by 4, not a group's
        (
            10,
            3,
            2,
            [0.0, np.pi],  # two opposite heads of equal weight: mu_1 = mu_3 = 0, |mu_2| = |mu_4| = 1
            ["ov:2,-2", "ov:-2,4", "qk:0,3"],
            [
                "",
                "frequency group ω = 2: 2 heads\n|μ̂_k|/Σ|ρ| ≤ 1 (k ≤ 3), ≤ 1 (k ≥ 4)",
                "frequency group ω = 3: empty\n(ω = 3 is no live head's dominant frequency)",
            ],
        ),
        # m = 1, odd n = 9: the own OV plane of w = 3 is (3, 0); an exact triangle; no w = 9/2
        (
            9,
            1,
            3,
            [0.0, 2 * np.pi / 3, 4 * np.pi / 3],
            ["qk:0,4", "ov:6,0", "ov:3,-3"],
            [
                "frequency group ω = 4: empty\n(ω = 4 is no live head's dominant frequency)",
                "frequency group ω = 3: 3 heads\n|μ̂_k|/Σ|ρ| < 1e-6 (k ≤ 2)",
                "",
            ],
        ),
    ],
)
def test_panel_lines_find_the_own_planes_for_any_m_and_n(n, m, omega, phases, panels, want):
    from headmovies.render.core.projections import parse_panel

    heads = [plane_head(n, m, omega, phi, 1.0) for phi in phases]
    groups = orbit_spectrum(np.stack([h[0] for h in heads]), np.stack([h[1] for h in heads]), n, m, match=False)
    assert [g.omega for g in groups] == [omega]
    assert panel_lines(groups, [parse_panel(p, n) for p in panels], n, m) == want


def test_a_group_without_weight_in_its_ov_plane_has_no_spectrum_to_tell():
    """Heads with a zero OV circuit (live by default here): every |rho_h| is 0, the spectrum is
    NaN, and the panel says so."""
    from headmovies.render.core.projections import parse_panel

    heads = [plane_head(10, 3, 2, phi, 0.0) for phi in (0.0, 1.0)]
    (g,) = orbit_spectrum(np.stack([h[0] for h in heads]), np.stack([h[1] for h in heads]), 10, 3, match=False)
    assert np.isnan(g.spectrum).all() and low_high(g.spectrum) == (None, None)
    assert panel_lines([g], [parse_panel("qk:0,2")], 10, 3) == [
        "frequency group ω = 2: 2 heads\n|μ̂_k|/Σ|ρ| undefined (no OV weight)"
    ]

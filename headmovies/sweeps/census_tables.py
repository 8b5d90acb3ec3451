"""The tables of the orbit census (census.md, docs/sweeps.md): outcomes per recipe, every
orbit by size and frequency, recipes compared seed by seed, the early screen and runs stopped
early, from the census rows (`census_rows`) alone.

The screen asks whether the frequency groups of the fit phase predict the orbits: an orbit at
frequency ω has N_ω = n / gcd(ω, n) heads (docs/results/orbits.md, "Why orbits are rare here"),
so a group of c heads at ω "fits" when c is a positive multiple of N_ω, and "has room" when
c >= N_ω.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from headmovies.render.orbits.check_report import TOL, is_marginal
from headmovies.render.orbits.spectrum import low_high

if TYPE_CHECKING:
    from headmovies.sweeps.census_rows import Settings


def orbit_order(omega: int, n: int) -> int:
    """N_omega = n / gcd(omega, n): the heads of an orbit at frequency omega (its polygon's corners)."""
    return n // math.gcd(omega, n)


def groups_of(omegas: Sequence[int]) -> dict[int, int]:
    """{omega: live heads} from per-head frequencies (0 marks a dead head)."""
    return dict(sorted(Counter(int(w) for w in omegas if w).items()))


def fitting(groups: dict[int, int], n: int, rule: str = "fits") -> set[int]:
    """Frequencies whose group can be a union of orbits: rule "fits" (a positive multiple of
    N_omega heads) or "room" (at least N_omega heads)."""
    if rule == "fits":
        return {w for w, c in groups.items() if c >= orbit_order(w, n) and c % orbit_order(w, n) == 0}
    return {w for w, c in groups.items() if c >= orbit_order(w, n)}


def by_recipe(rows: list[dict]) -> dict[str, list[dict]]:
    """{recipe: its rows}, recipes in the order they first appear."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["recipe"], []).append(r)
    return out


def _pct(k: int, total: int) -> str:
    return f"{k} ({100 * k / total:.0f} %)" if total else "0"


def wilson_interval(k: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval (z = 1.96) for a share k / total of seeds: (low, high), as
    fractions. Unlike k/total +- z*SE it stays inside [0, 1] and is not empty at k = 0 or
    k = total, where small censuses live. Source: E. B. Wilson, JASA 22 (1927) 209-212."""
    if total <= 0:
        raise ValueError("total must be positive")
    p, z2 = k / total, z * z
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = z * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total)) / (1 + z2 / total)
    # it contains k / total exactly: at k = 0 or total the bound is k / total itself, which the
    # formula gives only to rounding (0/22 gave a low of 1.4e-17, above the share)
    return min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half))


def _rate(k: int, total: int) -> str:
    """k (share %; its 95 % Wilson interval)."""
    if not total:
        return "0"
    lo, hi = wilson_interval(k, total)
    return f"{k} ({100 * k / total:.0f} %; {100 * lo:.0f}–{100 * hi:.0f} %)"


def _spread(values: list, fmt: str) -> str:
    v = [x for x in values if x is not None]
    if not v:
        return "–"
    return f"{format(float(np.median(v)), fmt)} [{format(min(v), fmt)}, {format(max(v), fmt)}]"


def outcome_table(rows: list[dict]) -> str:
    """One line per recipe: seeds, outcome counts (default gauge, then bias gauge), accuracy and
    errors (median [min, max])."""
    out = [
        (
            "| recipe | seeds | outcomes (seeds) | any orbit | any orbit at 100 % train | bias gauge: outcomes "
            "| bias gauge: any orbit | train acc | held-out acc | eq error pooled | eq error worst input | dead heads |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for recipe, rs in by_recipe(rows).items():
        counts = Counter(r["outcome"] for r in rs).most_common()
        any_orbit = [r for r in rs if r["orbits"]]
        full = [r for r in any_orbit if (r["train_acc"] or 0) >= 1.0]
        bias = Counter(r["outcome_bias_gauge"] for r in rs).most_common()
        bias_any = sum(r["outcome_bias_gauge"] != "none" for r in rs)
        out.append(
            f"| {recipe} | {len(rs)} | "
            + ", ".join(f"{o} ×{k}" for o, k in counts)
            + f" | {_rate(len(any_orbit), len(rs))} | {_rate(len(full), len(rs))}"
            + " | "
            + ", ".join(f"{o} ×{k}" for o, k in bias)
            + f" | {_rate(bias_any, len(rs))}"
            f" | {_spread([100 * r['train_acc'] for r in rs if r['train_acc'] is not None], '.1f')} %"
            f" | {_spread([100 * r['heldout_acc'] for r in rs if r['heldout_acc'] is not None], '.1f')} %"
            f" | {_spread([r['eq_error_pooled'] for r in rs], '.1e')}"
            f" | {_spread([r['eq_error_worst_input'] for r in rs], '.1e')}"
            f" | {_spread([r['n_dead'] for r in rs], '.0f')} |"
        )
    return "\n".join(out)


def _marginal(items: list[tuple[dict, dict]]) -> str:
    """How many of these orbits are marginal: 'k' or 'k (seeds a, b)'. Rows before version 5
    lack the flag; it is computed from their worst error (6 significant digits) and tolerance."""
    flags = [(r, o.get("marginal", is_marginal(o["worst"], r.get("tol", TOL)))) for r, o in items]
    seeds = sorted({r["seed"] for r, m in flags if m})
    return f"{sum(m for _, m in flags)}" + (f" ({', '.join(map(str, seeds))})" if seeds else "")


def near_miss_list(rows: list[dict]) -> str:
    """Per recipe, orbits that miss the tolerance by less than a tenth of it (not counted as
    orbits), as 'seed: size at ω, worst error'; empty when none (or rows before version 5)."""
    out = []
    for recipe, rs in by_recipe(rows).items():
        misses = [
            f"seed {r['seed']}: {o['size']} at ω {o['omega']}, {100 * o['worst']:.3f} %"
            for r in rs
            for o in r.get("near_misses", [])
        ]
        if misses:
            out.append(f"- {recipe}: " + "; ".join(misses))
    return "\n".join(out)


def spectrum_table(rows: list[dict]) -> str:
    """Per recipe and frequency ω of the final snapshot's frequency groups of two or more heads:
    how many groups (seeds), heads, the low (k ≤ 3) and high (k ≥ 4) orbit spectrum, the score
    amplitude r and the stabiliser-odd fractions (median [min, max] over groups). Rows before
    version 5 carry no spectrum and are left out (counted in the last line)."""
    out = [
        (
            "| recipe | ω | orbit size N_ω | groups | heads | max_{k≤3} |μ̂_k|/Σ|ρ| | max_{k≥4} |μ̂_k|/Σ|ρ| "
            "| score amplitude r (max of the group) | stabiliser-odd QK | stabiliser-odd OV |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    old = 0
    for recipe, rs in by_recipe(rows).items():
        kinds: dict[int, list[dict]] = {}
        for r in rs:
            if "groups" not in r:
                old += 1
                continue
            for g in r["groups"]:
                if g["n_heads"] >= 2:
                    kinds.setdefault(g["omega"], []).append(g)
        for w, gs in sorted(kinds.items()):
            lows_highs = [low_high(g["spectrum"]) for g in gs]
            out.append(
                f"| {recipe} | {w} | {gs[0]['order']} | {len(gs)} | {_spread([g['n_heads'] for g in gs], '.0f')} "
                f"| {_spread([lo for lo, _ in lows_highs], '.3f')} | {_spread([hi for _, hi in lows_highs], '.3f')} "
                f"| {_spread([g['r'][1] for g in gs], '.2f')} "
                f"| {_spread([g['odd_qk'] for g in gs], '.3f')} | {_spread([g['odd_ov'] for g in gs], '.3f')} |"
            )
    if old:
        out.append(f"\n{old} rows of an older census version carry no spectrum (rerun the census on their sweeps).")
    return "\n".join(out)


def structure_table(rows: list[dict]) -> str:
    """Every verified orbit by recipe, size and frequency: how many, on which seeds, their
    worst errors and lock-in epochs."""
    out = [
        (
            "| recipe | orbit size | ω | orbits | seeds | worst error | marginal (within a tenth of the tolerance) "
            "| locked in at epoch | train acc of those seeds |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for recipe, rs in by_recipe(rows).items():
        kinds: dict[tuple[int, int], list[tuple[dict, dict]]] = {}
        for r in rs:
            for o in r["orbits"]:
                kinds.setdefault((o["size"], o["omega"]), []).append((r, o))
        if not kinds:
            out.append(f"| {recipe} | none | | 0 | | | | | |")
        for (size, w), items in sorted(kinds.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
            seeds = sorted({r["seed"] for r, _ in items})
            out.append(
                f"| {recipe} | {size} | {w} | {len(items)} | {', '.join(map(str, seeds))} "
                f"| {_spread([100 * o['worst'] for _, o in items], '.2f')} % "
                f"| {_marginal(items)} "
                f"| {_spread([o['locked_in'] for _, o in items], '.0f')} "
                f"| {_spread([100 * r['train_acc'] for r, _ in items], '.1f')} % |"
            )
    return "\n".join(out)


def agreement_table(rows: list[dict]) -> str:
    """For every pair of recipes sharing seeds: how many seeds end with the same orbit
    structure (sizes), and the seeds that differ."""
    groups = by_recipe(rows)
    names = list(groups)
    out = ["| recipe A | recipe B | seeds in both | same outcome | differ (seed: A vs B) |", "|---|---|---|---|---|"]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            A = {r["seed"]: r["outcome"] for r in groups[a]}
            B = {r["seed"]: r["outcome"] for r in groups[b]}
            both = sorted(set(A) & set(B))
            if not both:
                continue
            diff = [s for s in both if A[s] != B[s]]
            out.append(
                f"| {a} | {b} | {len(both)} | {_pct(len(both) - len(diff), len(both))} | "
                + (", ".join(f"{s}: {A[s]} vs {B[s]}" for s in diff) or "none")
                + " |"
            )
    return "\n".join(out) if len(out) > 2 else ""


def screen_stats(rows: list[dict], epoch: int, rule: str = "fits") -> dict:
    """How well the frequency groups at `epoch` predict the final orbits, over runs that have
    a snapshot there: heads live at both with an unchanged omega (fraction), final orbits whose
    omega group qualified at `epoch` under `rule` (recall), qualifying groups that ended as an
    orbit at that omega (precision), and seeds flagged (a qualifying group) vs seeds with an orbit."""
    key = str(epoch)
    same = live = 0
    orbits = orbits_hit = flagged_groups = flagged_hit = 0
    seeds = flagged_seeds = orbit_seeds = both = 0
    for r in rows:
        if key not in r["omega"] or int(key) == r["epochs"]:
            continue
        seeds += 1
        early, final = r["omega"][key], r["omega"][str(r["epochs"])]
        pairs = [(a, b) for a, b in zip(early, final) if a and b]
        live += len(pairs)
        same += sum(a == b for a, b in pairs)
        fit = fitting(groups_of(early), r["n"], rule)
        formed = {o["omega"] for o in r["orbits"]}
        orbits += len(r["orbits"])
        orbits_hit += sum(o["omega"] in fit for o in r["orbits"])
        flagged_groups += len(fit)
        flagged_hit += len(fit & formed)
        flagged_seeds += bool(fit)
        orbit_seeds += bool(formed)
        both += bool(fit) and bool(formed)
    return {
        "epoch": epoch,
        "runs": seeds,
        "omega_kept": same / live if live else None,
        "orbits": orbits,
        "recall": orbits_hit / orbits if orbits else None,
        "groups_flagged": flagged_groups,
        "precision": flagged_hit / flagged_groups if flagged_groups else None,
        "seeds_flagged": flagged_seeds,
        "seeds_with_orbit": orbit_seeds,
        "seeds_both": both,
    }


def screen_epochs_of(rows: list[dict]) -> list[int]:
    return sorted({int(e) for r in rows for e in r["omega"] if int(e) != r["epochs"]})


def screen_table(rows: list[dict]) -> str:
    """Per recipe and screen epoch: `screen_stats` under both rules."""
    out = [
        (
            "| recipe | epoch | runs | heads keeping their ω to the end | final orbits whose group fits (has room) "
            "| fitting groups that became an orbit | seeds flagged / with an orbit / both |"
        ),
        "|---|---|---|---|---|---|---|",
    ]

    def f(x):
        return "–" if x is None else f"{100 * x:.0f} %"

    for recipe, rs in by_recipe(rows).items():
        for e in screen_epochs_of(rs):
            s, room = screen_stats(rs, e, "fits"), screen_stats(rs, e, "room")
            recall = f"{f(s['recall'])} ({f(room['recall'])}) of {s['orbits']}" if s["orbits"] else "no orbit"
            out.append(
                f"| {recipe} | {e:,} | {s['runs']} | {f(s['omega_kept'])} | {recall} | {f(s['precision'])} of "
                f"{s['groups_flagged']} | {s['seeds_flagged']} / {s['seeds_with_orbit']} / {s['seeds_both']} |"
            )
    return "\n".join(out)


def largest_groups(rows: list[dict]) -> str:
    """Per recipe: the largest final frequency group among the omegas whose orbits have n/2
    heads (the source's 12-orbit: omega 2 or 10 when n = 24), as a count of seeds per group size."""
    out = []
    for recipe, rs in by_recipe(rows).items():
        best = []
        for r in rs:
            g = groups_of(r["omega"][str(r["epochs"])])
            best.append(max([c for w, c in g.items() if orbit_order(w, r["n"]) == r["n"] // 2] or [0]))
        hist = Counter(best)
        out.append(f"- {recipe}: " + ", ".join(f"{k} heads: {hist[k]}" for k in sorted(hist, reverse=True)))
    return "\n".join(out)


def complete_runs(rows: list[dict]) -> list[dict]:
    """Rows of runs trained to their last epoch (not stopped at --stop-at)."""
    return [r for r in rows if not r.get("stopped")]


def screened_table(rows: list[dict]) -> str:
    """Runs stopped early (`headmovies sweep --stop-at`): per recipe, the seeds whose groups at
    the stop epoch fit an orbit, by orbit order, largest first; the rest in one count."""
    out = []
    for recipe, rs in by_recipe([r for r in rows if r.get("stopped")]).items():
        by_order: dict[int, list[str]] = {}
        for r in rs:
            g = groups_of(r["omega"][str(r["epochs"])])
            for w in sorted(fitting(g, r["n"])):
                by_order.setdefault(orbit_order(w, r["n"]), []).append(f"{r['seed']} (ω {w}: {g[w]})")
        epochs = sorted({r["epochs"] for r in rs})
        out.append(
            f"- **{recipe}**: {len(rs)} runs stopped at epoch {', '.join(map(str, epochs))}; "
            f"{sum(not fitting(groups_of(r['omega'][str(r['epochs'])]), r['n']) for r in rs)} without a fitting group"
        )
        for order in sorted(by_order, reverse=True):
            out.append(f"  - a group fits {order}-orbits: seeds {', '.join(by_order[order])}")
    return "\n".join(out)


def census_markdown(rows: list[dict], settings: Settings) -> str:
    screened = screened_table(rows)
    rows_all, rows = rows, complete_runs(rows)
    parts = [
        "# Orbit census",
        "",
        (
            "Made by `headmovies orbits census` from the sweeps below (one row per run in `census.jsonl`). "
            "Outcome: sizes of the verified orbits (2 % tolerance, default gauge) of the last snapshot; "
            "bias gauge: the same check with each head's key-independent OV part set aside (`--gauge bias`); "
            "ω: the orbit's frequency. Values: median [min, max] over seeds. Shares of seeds come with "
            "their 95 % Wilson score interval (how far the share over all seeds may lie from this sample's)."
        ),
        "",
        "## Recipes",
        "",
    ]
    for recipe, s in settings.items():
        parts.append(
            f"- **{recipe}**: "
            + (
                "settings unknown (no census.settings.json beside the rows)"
                if s is None
                else " ".join(f"{k}={v}" for k, v in s.items()) or "the defaults of the headmovies that trained it"
            )
        )
    if rows:
        parts += ["", "## Outcomes", "", outcome_table(rows), "", "## Orbits", "", structure_table(rows), ""]
        near = near_miss_list(rows)
        if near:
            parts += [
                "Near misses (not orbits: worst error above the tolerance by less than a tenth of it):",
                "",
                near,
                "",
            ]
        parts += [
            "## Orbit spectrum of the final frequency groups",
            "",
            (
                "Per group of live heads at ω: |μ̂_k|/Σ|ρ_h| with μ̂_k = Σ_h |ρ_h| e^{ikφ_h} (0 for every k < N_ω "
                "on an exact orbit; docs/math.md, 'Orbit spectrum'), the QK score amplitude r and the "
                "stabiliser-odd fractions. Low k is what the equivariance loss sees."
            ),
            "",
            spectrum_table(rows),
            "",
        ]
        agree = agreement_table(rows)
        if agree:
            parts += ["## Recipes compared seed by seed", "", agree, ""]
        half = sorted({r["n"] for r in rows})
        omegas = ", ".join(
            f"ω ∈ {{{', '.join(str(w) for w in range(1, n // 2 + 1) if orbit_order(w, n) == n // 2)}}} for C_{n}"
            for n in half
        )
        parts += [
            "## Early screen: do the frequency groups predict the orbits?",
            "",
            "A group of c live heads at ω fits when c is a multiple of N_ω = n / gcd(ω, n) (has room: c ≥ N_ω).",
            "",
            screen_table(rows)
            if screen_epochs_of(rows)
            else "No run has a snapshot at the screen epochs (`--screen-epochs`) before its last one.",
            "",
            (
                f"## Largest final group at an ω whose orbits have n/2 heads (the source's 12-orbit; {omegas}), "
                "seeds per size"
            ),
            "",
            largest_groups(rows),
            "",
        ]
    if screened:
        parts += [
            "## Screened runs (stopped early), candidates for the full schedule",
            "",
            (
                "Continue candidates with the sweep's own command without --stop-at (its settings as "
                "recorded; a sweep refuses others):"
            ),
            "",
        ]
        for recipe in sorted({r["recipe"] for r in rows_all if r.get("stopped")}):
            sets = "".join(f" --set {k}={v}" for k, v in (settings.get(recipe) or {}).items())
            parts += [f"    headmovies sweep orbits --out PATH/TO/{recipe} --seeds SEEDS{sets}", ""]
        parts += [screened, ""]
    return "\n".join(parts)

"""The OV-coherent knob sweep (docs/results/ov-coherent.md, "The knobs"): every run file of one
or more `headmovies sweep ov-coherent` folders, grouped by setting (the config keys a run sets
away from the defaults), and per setting how often the two heads end with exactly reversed
preference orderings.

    python -m headmovies.sweeps.ov_coherent_knobs DIR [DIR ...] --out OUT

reads every DIR/*.h5 and writes OUT/knobs.md (the table), OUT/knobs.json (one row per run) and
OUT/knobs.png (reversal rate per setting, with 95 % Wilson intervals). Per run, from the run file
alone (`render.ov_coherent.analysis`): exact accuracy and worst class at the last snapshot,
reversed orders (yes/no), Kendall τ, the hard-attention agreement, the epoch from which the
orderings stay as they end (`orderings_settle_epoch`) and the epoch from which the accuracy
stays at 100 %; and the sharpening tests: d log(loss) / d log(k) at k = 1 with every head's
QK scores multiplied by k (< 0: the cross-entropy at that point prefers sharper attention),
over all classes and split into pairs {a,a} and {a,b}, and the exact loss at k = 2 over the
loss as trained.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from headmovies.errors import UserError
from headmovies.render.core.timeline import first_lasting
from headmovies.render.ov_coherent import analysis
from headmovies.runfile.reader import Run
from headmovies.sweeps.census_tables import wilson_interval
from headmovies.tasks.ov_coherent import CLASSES, WEIGHT_NAMES, Cases
from headmovies.train.config import config_dict
from headmovies.train.ov_coherent import OVCoherentConfig

ALMOST_ALL = 8  # reversed in at least this many of 10 seeds: the "almost all runs"
SHARPEN = 2.0  # the sharpening test multiplies every QK score by this
NOT_A_KNOB = ("seed",)


def setting_of(config: dict) -> dict:
    """The config keys of a run that differ from today's defaults (the seed aside), sorted:
    {} for a default run."""
    default = config_dict(OVCoherentConfig())
    keys = sorted(set(config) | set(default))
    return {k: config.get(k) for k in keys if k not in NOT_A_KNOB and config.get(k, default.get(k)) != default.get(k)}


def setting_text(setting: dict) -> str:
    """'default' or 'init_scale=0.1, lr=0.003' (values as a config writes them)."""
    if not setting:
        return "default"
    return ", ".join(f"{k}={_value(v)}" for k, v in setting.items())


def _value(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def sharpened_loss(
    weights: dict[str, np.ndarray], cases: Cases, factor: float, select: np.ndarray | None = None
) -> float:
    """Exact cross-entropy over the task distribution with every head's read-off QK scores
    multiplied by `factor` (W_Q scaled; OV circuit and readout unchanged): the expectation
    over all cases, or the probability-weighted sum over the cases where `select` [N] holds."""
    w = dict(weights, W_Q=np.asarray(weights["W_Q"], np.float64) * factor)
    z = analysis.logits(w, cases.counts)
    z = z - z.max(-1, keepdims=True)
    nll = np.log(np.exp(z).sum(-1)) - z[np.arange(len(cases)), cases.labels]
    if select is None:
        return float(cases.probs @ nll / cases.probs.sum())
    return float(cases.probs[select] @ nll[select])


def sharpening_slopes(weights: dict[str, np.ndarray], cases: Cases, h: float = 0.05) -> dict[str, float]:
    """d log(loss) / d log(k) at k = 1, k the factor on every QK score (central difference at
    k = exp(±h)): "all" classes, "equal" pairs {a,a} and "distinct" pairs {a,b}. Negative: the
    loss falls as the attention sharpens."""
    equal = np.array([a == b for a, b in CLASSES])[cases.labels]
    out = {}
    for key, sel in (("all", None), ("equal", equal), ("distinct", ~equal)):
        up, down = (sharpened_loss(weights, cases, math.exp(s * h), sel) for s in (1, -1))
        out[key] = (math.log(up) - math.log(down)) / (2 * h)
    return out


def run_row(path: str | Path) -> dict:
    """One run's measurements (see the module docstring), JSON-ready. UserError for a file that
    is not a complete ov-coherent run with two heads."""
    with Run(path) as run:
        analysis.require_run(run)
        if not run.complete:
            raise UserError(f"{path} is not complete; finish it (rerun its sweep) first")
        cases = analysis.run_cases(run)
        w = run.weights(-1, WEIGHT_NAMES)
        r = analysis.analyse(w, cases)
        if r.n_heads < 2:
            raise UserError(f"{path} has one head: no pair of orderings to compare")
        epochs, qk = analysis.qk_trajectory(run)
        opposite = np.array(
            [analysis.are_opposite(analysis.preference_ordering(q[0]), analysis.preference_ordering(q[1])) for q in qk]
        )
        m = run.metrics()
        loss = sharpened_loss(w, cases, 1.0)
        return {
            "file": str(path),
            "seed": run.seed,
            "setting": setting_text(setting_of(run.config)),
            "epochs": int(epochs[-1]),
            "acc": r.acc,
            "worst_class_acc": r.worst_class_acc,
            "exact": r.exact,
            "reversed": bool(r.opposite),
            "orderings": [h.ordering_text for h in r.heads[:2]],
            "kendall_tau": r.kendall_tau,
            "hard_attention_agreement": r.hard_attention_agreement,
            "settle_epoch": analysis.orderings_settle_epoch(epochs, qk),
            "reversed_from": first_lasting(epochs, opposite),
            "acc_100_from": first_lasting(m["epoch"], np.asarray(m["acc"]) >= 1 - 1e-12),
            "loss": loss,
            "sharpen_ratio": sharpened_loss(w, cases, SHARPEN) / loss,
            "sharpen_slope": sharpening_slopes(w, cases),
            "machine": run.provenance()["machine"],
        }


def is_complete(path: Path) -> bool:
    with Run(path) as run:
        return run.complete


def collect(dirs: list[str | Path], log=print) -> list[dict]:
    """Rows of every complete *.h5 in `dirs` (runs still training are left out and named by
    `log`), by setting (default first) then seed. UserError for a folder that does not exist or
    holds no run file."""
    rows = []
    for d in dirs:
        files = sorted(Path(d).glob("*.h5"))
        if not Path(d).is_dir() or not files:
            raise UserError(f"{d} holds no run files (*.h5); give folders made by `headmovies sweep ov-coherent`")
        for f in files:
            if is_complete(f):
                rows.append(run_row(f))
            else:
                log(f"left out (not complete): {f}")
    order = {s: i for i, s in enumerate(dict.fromkeys(r["setting"] for r in rows))}
    return sorted(rows, key=lambda r: (r["setting"] != "default", order[r["setting"]], r["seed"]))


def by_setting(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["setting"], []).append(r)
    return groups


def setting_stats(group: list[dict]) -> dict:
    """Per setting: runs, runs at 100 %, reversed at 100 % (count, seeds, Wilson interval),
    Kendall τ (mean, count < 0), hard-attention agreement (median), settle epoch (median, max),
    sharpening ratio at k = 2 (median; count > 1) and slope (median; count < 0), and whether it
    reaches ALMOST_ALL of 10."""
    n = len(group)
    solved = [r for r in group if r["acc"] >= 1 - 1e-12]
    rev = [r for r in solved if r["reversed"]]
    settle = [r["settle_epoch"] for r in group if r["settle_epoch"] is not None]
    taus = np.array([r["kendall_tau"] for r in group])
    return {
        "runs": n,
        "solved": len(solved),
        "reversed": len(rev),
        "reversed_seeds": [r["seed"] for r in rev],
        "interval": wilson_interval(len(rev), n),
        "tau_mean": float(taus.mean()),
        "tau_negative": int((taus < 0).sum()),
        "hard_median": float(np.median([r["hard_attention_agreement"] for r in group])),
        "settle_median": float(np.median(settle)) if settle else math.nan,
        "settle_max": max(settle) if settle else None,
        "sharpen_median": float(np.median([r["sharpen_ratio"] for r in group])),
        "sharpen_up": sum(r["sharpen_ratio"] > 1 for r in group),
        "slope_median": float(np.median([r["sharpen_slope"]["all"] for r in group])),
        "slope_negative": sum(r["sharpen_slope"]["all"] < 0 for r in group),
        "almost_all": len(rev) >= math.ceil(ALMOST_ALL * n / 10),
    }


def knobs_table(rows: list[dict]) -> str:
    """Markdown: one line per setting."""
    head = (
        "| setting | runs | 100 % accurate | reversed at 100 % | reversed seeds | Kendall τ: mean (< 0) | "
        "hard attention: median | orders settle: median (latest) | d log loss / d log QK: median (< 0) |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, group in by_setting(rows).items():
        s = setting_stats(group)
        seeds = ", ".join(map(str, s["reversed_seeds"])) or "none"
        lines.append(
            f"| {name} | {s['runs']} | {s['solved']} | **{s['reversed']}/{s['runs']}** | {seeds} | "
            f"{s['tau_mean']:+.2f} ({s['tau_negative']}) | {s['hard_median']:.0%} | "
            f"{s['settle_median']:,.0f} ({s['settle_max'] or 0:,}) | {s['slope_median']:+.1f} ({s['slope_negative']}) |"
        )
    return "\n".join(lines) + "\n"


def rate_figure(rows: list[dict]):
    """Reversal rate (reversed at 100 % / runs) per setting, with 95 % Wilson intervals, the
    default's rate and the issue's 8-of-10 mark."""
    from matplotlib.figure import Figure

    groups = by_setting(rows)
    names = list(groups)
    stats = [setting_stats(groups[k]) for k in names]
    fig = Figure(figsize=(8.4, 0.3 * len(names) + 1.3), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(names))[::-1]
    rate = np.array([s["reversed"] / s["runs"] for s in stats])
    lo = np.array([s["interval"][0] for s in stats])
    hi = np.array([s["interval"][1] for s in stats])
    colours = ["0.35" if k == "default" else ("C3" if s["almost_all"] else "C0") for k, s in zip(names, stats)]
    ax.barh(y, rate, color=colours, height=0.6)
    ax.errorbar(rate, y, xerr=[rate - lo, hi - rate], fmt="none", ecolor="k", elinewidth=0.8, capsize=2)
    for yi, s in zip(y, stats):
        solved = "" if s["solved"] == s["runs"] else f" ({s['solved']} at 100 %)"
        ax.text(1.02, yi, f"{s['reversed']}/{s['runs']}{solved}", va="center", fontsize=8)
    if "default" in groups:
        ax.axvline(rate[names.index("default")], color="0.35", ls=":", lw=1)
    ax.axvline(ALMOST_ALL / 10, color="C3", ls="--", lw=1)
    ax.text(ALMOST_ALL / 10, -0.6, " 8 of 10", color="C3", fontsize=8, va="bottom")
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlim(0, 1.42)
    ax.set_xticks(np.linspace(0, 1, 6))
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.set_xlabel(
        "share of seeds with exactly reversed orders at 100 % accuracy (95 % Wilson interval)", fontsize=9, loc="left"
    )
    ax.set_title("OV-coherent, 2 heads × d_head 1: reversal rate per setting", fontsize=10)
    return fig


def write_knobs(dirs: list[str | Path], out: str | Path, log=print) -> list[dict]:
    """knobs.md, knobs.json and knobs.png of the runs in `dirs`, into `out`; returns the rows.
    Everything is read before anything is written."""
    from headmovies.render.core.outputs import prepare_out_dir, save_figure, write_text

    rows = collect(dirs, log)
    fig = rate_figure(rows)
    out = prepare_out_dir(Path(out))
    write_text(out / "knobs.json", json.dumps(rows, indent=1) + "\n")
    write_text(out / "knobs.md", knobs_table(rows))
    save_figure(fig, out, "knobs", ("png",), dpi=100)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headmovies.sweeps.ov_coherent_knobs", description=__doc__)
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="folders of `headmovies sweep ov-coherent`")
    parser.add_argument("--out", required=True, metavar="OUT", help="folder for knobs.{md,json,png}")
    args = parser.parse_args(argv)
    try:
        rows = write_knobs(args.dirs, args.out, log=lambda m: print(m, file=sys.stderr))
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(knobs_table(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

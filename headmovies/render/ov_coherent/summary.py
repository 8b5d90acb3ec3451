"""Summaries of ov-coherent runs (Source 004): per-run analysis sheets, the summary table,
training curves, the QK planes and the QK-plane movie, written into one folder by
`headmovies ov-coherent report` (`write_report`); and a sweep row's summary of one run
(`sweep_summary`, `SWEEP_OUTCOME`, docs/sweeps.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from headmovies.render.core.outputs import prepare_out_dir, save_figure, unique_names, write_text
from headmovies.render.core.timeline import EVENT_HOLD_S
from headmovies.render.ov_coherent import analysis
from headmovies.render.ov_coherent.analysis import Analysis
from headmovies.runfile.reader import Run
from headmovies.tasks import ov_coherent as ov_task


def summary_table(rows: list[dict]) -> str:
    """Markdown table, one row per run."""
    head = (
        "| run | seed | heads × d_head | L | epochs | accuracy | worst class | head orderings "
        "(QK from read-off) | opposite | Kendall τ | acc, head ablated | hard-attention agreement |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        orders = "; ".join(f"h{h['head']}: {h['ordering_text']}" for h in r["heads"])
        abl = ", ".join(f"h{h['head']} {h['ablated_acc']:.1%}" for h in r["heads"])
        opp = {True: "yes", False: "no", None: "n/a"}[r["opposite"]]
        tau = "n/a" if r["kendall_tau"] is None else f"{r['kendall_tau']:+.2f}"
        lines.append(
            f"| {r['name']} | {r['seed']} | {r['n_heads']} × {r['d_head']} | {r['seq_len']} | "
            f"{r['epoch']:,} | {r['acc']:.2%} | {r['worst_class_acc']:.2%} | {orders} | {opp} | {tau} | "
            f"{abl} | {r['hard_attention_agreement']:.1%} |"
        )
    return "\n".join(lines) + "\n"


def summary_text(rows: list[dict]) -> str:
    """The table plus a few lines in words: each run's orderings, and the 2 x d_head-1 tally."""
    out = [summary_table(rows).rstrip()]
    for r in rows:
        if r["opposite"] is not None:
            out.append(
                f"{r['name']}: {r['acc']:.2%} accurate; head 1 {r['heads'][0]['ordering_text']}, head 2 "
                f"{r['heads'][1]['ordering_text']}: {'opposite' if r['opposite'] else 'NOT opposite'}"
            )
    two = [r for r in rows if r["n_heads"] == 2 and r["d_head"] == 1]
    if two:
        taus = np.array([r["kendall_tau"] for r in two])
        out.append(
            f"2 heads of d_head 1: {sum(r['acc'] >= 1 - 1e-12 for r in two)}/{len(two)} runs at 100 % "
            f"accuracy, {sum(bool(r['opposite']) for r in two)}/{len(two)} with opposite orderings "
            f"(Kendall tau between the heads: mean {taus.mean():+.2f}, {np.sum(taus < 0)}/{len(two)} negative)"
        )
    return "\n".join(out) + "\n"


def write_report(
    paths: list[Path],
    out: Path,
    movie: str = "first",
    formats=("mp4", "webm", "gif", "png", "html"),
    fps: float = 24.0,
    hold_s: float = 2.0,
    trail: float | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    event_hold_s: float = EVENT_HOLD_S,
) -> list[dict]:
    """Analyse the final snapshot of each run and write the report into `out` (docs/movie.md):
    summary.md, summary.json, training.png, orderings.png, <name>/analysis.{png,json} and, for
    the first run with >= 2 heads (movie="first"), every such run ("all") or none ("none"),
    <name>/qk_plane.{mp4,webm,gif,png,html}. Every run is opened and checked before anything
    is written. Returns the rows (one dict per run)."""
    from tqdm import tqdm

    from headmovies.render.ov_coherent import figures
    from headmovies.render.ov_coherent.movie import make_movie

    runs = []
    try:
        for path in paths:
            r = Run(path)
            runs.append(r)
            analysis.require_run(r)
        prepare_out_dir(out)
        rows, curves, planes = [], [], []
        names = unique_names(paths)
        cases_by_task: dict[tuple, ov_task.Cases] = {}
        for r, name in tqdm(list(zip(runs, names)), desc="analyse", unit="run", disable=len(runs) < 2 or not progress):
            L = int(r.config.get("seq_len", 10))
            key = (L, str(r.config.get("signal_weights", ov_task.UNIFORM_SIGNAL)))
            if key not in cases_by_task:
                cases_by_task[key] = analysis.run_cases(r)
            cases = cases_by_task[key]
            w = r.weights(-1, ov_task.WEIGHT_NAMES)
            result = analysis.analyse(w, cases)
            row = {
                "name": name,
                "path": str(r.path),
                "seed": r.seed,
                "seq_len": L,
                "epoch": int(r.epochs[-1]),
                "complete": r.complete,
                **result.to_dict(),
            }
            rows.append(row)
            run_dir = prepare_out_dir(out / name)
            write_text(run_dir / "analysis.json", json.dumps(row, indent=1) + "\n")
            save_figure(
                figures.analysis_figure(
                    result,
                    w,
                    cases,
                    f"{name} ({result.n_heads} × d_head {result.d_head}, seed {r.seed}, epoch {row['epoch']:,})",
                ),
                run_dir,
                "analysis",
                ("png",),
                dpi=110,
            )
            curves.append((name, r.metrics()))
            if result.n_heads >= 2:
                planes.append((name, analysis.readoff_qk(w), result.opposite))
        save_figure(figures.training_figure(curves), out, "training", ("png",), dpi=110)
        if planes:
            save_figure(figures.orderings_figure(planes), out, "orderings", ("png",), dpi=110)
        write_text(out / "summary.json", json.dumps(rows, indent=1) + "\n")
        write_text(out / "summary.md", summary_table(rows))
        if movie != "none":
            multi = [(r, n) for r, n in zip(runs, names) if r.weights(0, ["W_Q"])["W_Q"].shape[0] >= 2]
            if not multi:
                log("no movie: no run has 2 or more heads")
            for r, name in multi[: 1 if movie == "first" else None]:
                res = make_movie(r, out / name, name, formats, fps, hold_s, trail, progress, event_hold_s)
                w, h = res.size
                log(
                    f"movie for {name}: {res.frames} frames, {w}x{h} px, {res.fps:g} fps: "
                    + ", ".join(str(p) for p in res.paths.values())
                )
    finally:
        for r in runs:
            r.close()
    return rows


SWEEP_OUTCOME = (
    "'opposite': 100 % accurate with exactly opposite QK preference orderings in heads 1 and 2; "
    "'opposed (τ < 0)': 100 %, Kendall τ between them < 0; 'not opposed': 100 %, τ >= 0; "
    "'solved': 100 % with one head; 'not solved': below 100 %"
)


SWEEP_DETAIL = (
    "orderings: head 1's and head 2's preference orderings of the signal tokens at the last "
    "snapshot, Kendall τ between them, the hard-attention agreement (the share of predictions "
    "that 'all or nothing' attention explains) and the epoch from which the orderings stay as "
    "they end; empty for rows recorded before these were"
)


def orderings_detail(summary: dict) -> str:
    """'1234 / 4321, τ -1.00, hard 87.5 %, settled at 1,250' from a sweep row's summary ('' for a
    row without orderings or Kendall τ, e.g. one head or a row written before they existed)."""
    if summary.get("kendall_tau") is None or len(summary.get("orderings", [])) < 2:
        return ""
    orders = " / ".join("".join(c for c in o if c.isdigit()) for o in summary["orderings"][:2])
    settle = summary.get("orderings_settle_epoch")
    return f"{orders}, τ {summary['kendall_tau']:+.2f}, hard {summary['hard_attention_agreement']:.1%}" + (
        "" if settle is None else f", settled at {settle:,}"
    )


def outcome(result: Analysis) -> str:
    """The SWEEP_OUTCOME label of an `analysis.analyse` result."""
    if result.acc < 1 - 1e-12:
        return "not solved"
    if result.opposite is None:
        return "solved"
    if result.opposite:
        return "opposite"
    return "opposed (τ < 0)" if result.kendall_tau is not None and result.kendall_tau < 0 else "not opposed"


def sweep_summary(run: Run) -> dict:
    """A sweep row's summary of an ov-coherent run (`analysis.analyse` of its final snapshot,
    exact over the task distribution): accuracy, worst class, each head's ordering and accuracy
    with it ablated, opposite orderings, Kendall τ, hard-attention agreement, the epoch from
    which the two heads' orderings stay as they end ("orderings_settle_epoch", over every
    snapshot; None with one head), and "outcome"."""
    analysis.require_run(run)
    r = analysis.analyse(run.weights(-1, ov_task.WEIGHT_NAMES), analysis.run_cases(run))
    epochs, qk = analysis.qk_trajectory(run)
    return {
        "epoch": int(run.epochs[-1]),
        "outcome": outcome(r),
        "acc": r.acc,
        "worst_class_acc": r.worst_class_acc,
        "orderings": [h.ordering_text for h in r.heads],
        "ablated_acc": [h.ablated_acc for h in r.heads],
        "opposite": r.opposite,
        "kendall_tau": r.kendall_tau,
        "hard_attention_agreement": r.hard_attention_agreement,
        "orderings_settle_epoch": analysis.orderings_settle_epoch(epochs, qk),
    }

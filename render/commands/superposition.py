"""`python -m render superposition RUN [RUN ...] --out DIR`: analyses, figures, table and movie
of OV-coherent superposition runs (seed 004, SPEC §3), from the run files alone."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from tqdm import tqdm

from render import superposition as S
from render.reader import Run
from runfile import UserError

HELP = "OV-coherent superposition (seed 004): accuracy, QK orderings, ablations, figures, QK-plane movie"
DESCRIPTION = """\
Analyse the final snapshot of each ov-coherent RUN: exact read-off accuracy (overall and per
class), each head's QK preference ordering of the signal tokens 1-4, whether the first two heads'
orderings are opposite, attention by pair, OV tables, accuracy with each head ablated, and how
often hard (all-or-nothing) attention explains the model's predictions.

Writes into DIR: summary.md and summary.json (the table across runs), training.png,
orderings.png, and per run <name>/analysis.png and <name>/analysis.json; with --movie, the
QK-plane movie <name>/qk_plane.{mp4,webm,gif,png,html} (needs 2 or more heads)."""


def add_arguments(parser) -> None:
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="ov-coherent run files (.h5)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder (created)")
    parser.add_argument("--movie", choices=("first", "all", "none"), default="first",
                        help="QK-plane movie for the first run with >= 2 heads, every such run, or none "
                             "(default first)")
    parser.add_argument("--formats", default="mp4,webm,gif,png,html",
                        help="movie formats, comma-separated subset of mp4,webm,gif,png,html (default: all)")
    parser.add_argument("--fps", type=float, default=24.0, help="movie frames per second (default 24)")
    parser.add_argument("--hold", type=float, default=2.0, metavar="S",
                        help="seconds the last frame is held before the loop restarts (default 2)")
    parser.add_argument("--trail", type=int, default=1000, metavar="STEPS",
                        help="movie trails span this many optimizer steps (default 1000)")


def _names(paths: list[Path]) -> list[str]:
    """Output sub-folder per run: the file stem, made unique."""
    names, seen = [], {}
    for p in paths:
        name = p.stem
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return names


def _save_fig(fig, path: Path) -> None:
    import matplotlib.pyplot as plt
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def summary_table(rows: list[dict]) -> str:
    """Markdown table, one row per run."""
    head = ("| run | seed | heads × d_head | L | steps | accuracy | worst class | head orderings "
            "(QK from read-off) | opposite | Kendall τ | acc, head ablated | hard-attention agreement |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        orders = "; ".join(f"h{h['head']}: {h['ordering_text']}" for h in r["heads"])
        abl = ", ".join(f"h{h['head']} {h['ablated_acc']:.1%}" for h in r["heads"])
        opp = {True: "yes", False: "no", None: "n/a"}[r["opposite"]]
        tau = "n/a" if r["kendall_tau"] is None else f"{r['kendall_tau']:+.2f}"
        lines.append(f"| {r['name']} | {r['seed']} | {r['n_heads']} × {r['d_head']} | {r['seq_len']} | "
                     f"{r['steps']} | {r['acc']:.2%} | {r['worst_class_acc']:.2%} | {orders} | {opp} | {tau} | "
                     f"{abl} | {r['hard_attention_agreement']:.1%} |")
    return "\n".join(lines) + "\n"


def _movie(run: Run, out_dir: Path, args, label: str) -> str:
    """Render the QK-plane movie of `run` into out_dir/qk_plane.*; returns a one-line note."""
    from render.encode import encode, parse_formats
    from render.superposition_figures import QKPlaneMovie
    epochs, qk = S.qk_trajectory(run)
    m = run.metrics()
    acc = np.interp(epochs, m["epoch"], m["acc"]) if "acc" in m else None
    movie = QKPlaneMovie(epochs, qk, acc, trail=args.trail, title=f"{label}: read-off QK, head 1 vs head 2")
    bar = tqdm(total=len(movie) + int(round(args.hold * args.fps)), desc=f"movie {label}", unit="frame",
               dynamic_ncols=True)
    try:
        result = encode(movie.frames(), out_dir, "qk_plane", fps=args.fps, hold_s=args.hold,
                        formats=parse_formats(args.formats), on_frame=bar.update,
                        on_stage=bar.set_postfix_str)
    finally:
        bar.close()
        movie.close()
    w, h = result.size
    files = ", ".join(str(p) for p in result.paths.values())
    return f"movie for {label}: {result.frames} frames, {w}x{h} px, {result.fps:g} fps: {files}"


def run(args) -> int:
    from render.encode import parse_formats  # the shared encoder; imported when used
    parse_formats(args.formats)
    if args.fps <= 0 or args.hold < 0 or args.trail < 0:
        raise UserError("--fps must be > 0, --hold >= 0 and --trail >= 0")
    if args.out.exists() and not args.out.is_dir():
        raise UserError(f"--out {args.out} exists and is not a folder")
    runs = []
    try:
        for path in args.runs:  # open and check every run before writing anything
            r = Run(path)
            runs.append(r)
            S.require_run(r)
        args.out.mkdir(parents=True, exist_ok=True)
        if not os.access(args.out, os.W_OK):
            raise UserError(f"--out {args.out} is not writable")
        from render import superposition_figures as F
        rows, curves, planes, notes = [], [], [], []
        names = _names(args.runs)
        cases_by_len: dict[int, S.Cases] = {}
        for r, name in tqdm(list(zip(runs, names)), desc="analyse", unit="run", disable=len(runs) < 2):
            L = int(r.config.get("seq_len", 10))
            cases = cases_by_len.setdefault(L, S.task_cases(L))
            w = r.weights(-1, S.WEIGHT_NAMES)
            result = S.analyse(w, cases)
            row = {"name": name, "path": str(r.path), "seed": r.seed, "seq_len": L,
                   "steps": int(r.epochs[-1]), "complete": r.complete, **result}
            rows.append(row)
            run_dir = args.out / name
            run_dir.mkdir(exist_ok=True)
            _write_text(run_dir / "analysis.json", json.dumps(row, indent=1) + "\n")
            _save_fig(F.analysis_figure(result, w, cases, f"{name} ({result['n_heads']} × d_head "
                                        f"{result['d_head']}, seed {r.seed}, step {row['steps']})"),
                      run_dir / "analysis.png")
            curves.append((name, r.metrics()))
            if result["n_heads"] >= 2:
                planes.append((name, S.readoff_qk(w), result["opposite"]))
        _save_fig(F.training_figure(curves), args.out / "training.png")
        if planes:
            _save_fig(F.orderings_figure(planes), args.out / "orderings.png")
        _write_text(args.out / "summary.json", json.dumps(rows, indent=1) + "\n")
        _write_text(args.out / "summary.md", summary_table(rows))
        if args.movie != "none":
            multi = [(r, n) for r, n in zip(runs, names) if r.weights(0, ["W_Q"])["W_Q"].shape[0] >= 2]
            if not multi:
                notes.append("no movie: no run has 2 or more heads")
            for r, name in multi[: 1 if args.movie == "first" else None]:
                notes.append(_movie(r, args.out / name, args, name))
    finally:
        for r in runs:
            r.close()
    print(summary_table(rows), end="")
    for r in rows:
        if r["opposite"] is not None:
            print(f"{r['name']}: {r['acc']:.2%} accurate; head 1 {r['heads'][0]['ordering_text']}, head 2 "
                  f"{r['heads'][1]['ordering_text']}: {'opposite' if r['opposite'] else 'NOT opposite'}")
    two = [r for r in rows if r["n_heads"] == 2 and r["d_head"] == 1]
    if two:
        taus = np.array([r["kendall_tau"] for r in two])
        print(f"2 heads of d_head 1: {sum(r['acc'] >= 1 - 1e-12 for r in two)}/{len(two)} runs at 100 % accuracy, "
              f"{sum(bool(r['opposite']) for r in two)}/{len(two)} with opposite orderings "
              f"(Kendall tau between the heads: mean {taus.mean():+.2f}, {np.sum(taus < 0)}/{len(two)} negative)")
    for note in notes:
        print(note)
    print(f"wrote {args.out}/summary.md, summary.json, training.png"
          + (", orderings.png" if planes else "") + " and per-run analysis.{png,json}")
    return 0

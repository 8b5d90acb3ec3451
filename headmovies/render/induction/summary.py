"""Summaries of induction runs (Source 003): per-run analyses, tables, figures and attention
movies, and tables across runs (docs/results/induction.md), written into one folder by
`headmovies induction report` (`write_report`); and a sweep row's summary of one run
(`sweep_summary`, `SWEEP_OUTCOME`, docs/sweeps.md)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from headmovies.errors import plural
from headmovies.render.core.movie_options import FORMATS
from headmovies.render.core.outputs import prepare_out_dir, save_figure, unique_names, write_text
from headmovies.render.core.timeline import EVENT_HOLD_S
from headmovies.render.induction import analysis as ind
from headmovies.render.induction import numpy_model
from headmovies.render.induction.analysis import Analysis
from headmovies.runfile.reader import Run
from headmovies.tasks.induction import BLOCK_LENGTHS, correct_completion, decode, encode_prompt, positions_of


def _fmt(v, spec=".3f") -> str:
    return "—" if v is None else format(v, spec)


def run_markdown(r: Analysis) -> str:
    """The per-run tables as Markdown."""
    source_scores = ind.SOURCE_SCORES.get(r.experiment, {})
    source_heads = source_scores.get("heads", []) if r.config.get("n_heads") == 4 else []
    out = [
        f"# {r.experiment}, seed {r.seed} (epoch {r.epoch:,})",
        "",
        (
            f"Accuracy on predictable positions (targets {r.config['block_len']}..{r.config['seq_len'] - 1}) "
            f"of fresh sequences: **{r.accuracy:.2%}**. Positions enter {positions_of(r.config)}; "
            f"blocks {'of distinct letters' if r.config.get('distinct', True) else 'with repeats allowed'}."
        ),
        "",
    ]
    if r.smear_sigmoid_alpha is not None:
        out += [
            "Smeared keys, sigmoid(alpha) per head (1 = own key only): "
            + ", ".join(f"L0H{h} {v:.3f}" for h, v in enumerate(r.smear_sigmoid_alpha)),
            "",
        ]
    out += [
        "## OV copying scores",
        "",
        (
            "Σλ/Σ|λ| is Elhage et al.'s copying score; mean Re(λ/|λ|) is the source's wording (nonzero "
            "eigenvalues only). Heads are 0-based (the source's Head 1 is L0H0)."
        ),
        "",
        "| circuit | Σλ/Σ\\|λ\\| | mean Re(λ/\\|λ\\|) | source 003 printed |",
        "|---|---|---|---|",
    ]
    i = 0
    for row in r.copying:
        source = None
        if row["head"] is not None and i < len(source_heads):
            source, i = source_heads[i], i + 1
        elif row["circuit"].startswith("direct"):
            source = source_scores.get("direct")
        elif row["circuit"] == "L0 sum of heads":
            source = source_scores.get("sum_of_heads")
        out.append(
            f"| {row['circuit']} | {row['copying']:+.3f} | {row['source_mean_sign']:+.3f} | {_fmt(source, '+.3f')} |"
        )
    L = r.config["block_len"]
    out += [
        "",
        "## Mean attention by offset (queries at positions ≥ block length)",
        "",
        "| head | most attention at offset | its weight | " + " | ".join(f"{d} back" for d in range(L + 2)) + " |",
        "|---|---|---|" + "---|" * (L + 2),
    ]
    for h in r.heads:
        out.append(
            f"| {h.head} | {h.top_offset} | {h.top_offset_attention:.2f} | "
            + " | ".join(f"{v:.2f}" for v in h.offset_attention)
            + " |"
        )
    out += [
        "",
        "## Greedy completions to 24 letters",
        "",
        "| prompt | completion | correct | ok | source 003's completion | repeats in a row |",
        "|---|---|---|---|---|---|",
    ]
    for c in r.completions:
        ok = {True: "yes", False: "no", None: "n/a"}[c.is_correct]
        out.append(
            f"| {c.prompt} | {c.completion} | {c.correct or 'N/A'} | {ok} | {c.source or '—'} | {c.immediate_repeats} |"
        )
    lengths = sorted(r.block_length_accuracy, key=int)
    out += [
        "",
        "## Accuracy by block length (fresh sequences)",
        "",
        "| model | " + " | ".join(f"L={k}" for k in lengths) + " |",
        "|---|" + "---|" * len(lengths),
    ]
    out.append("| full model | " + " | ".join(f"{r.block_length_accuracy[k]:.1%}" for k in lengths) + " |")
    for name, ab in (r.ablations or {}).items():
        out.append(
            f"| {name.replace('_', ' ')} | " + " | ".join(f"{ab.block_length_accuracy[k]:.1%}" for k in lengths) + " |"
        )
    if r.composition is not None:
        comp = r.composition
        for key, title in (
            (
                "k",
                f"K-composition score ‖W_QK(L1) W_OV(L0)ᵀ‖/(‖W_QK‖‖W_OV‖) (random baseline {comp['k_baseline']:.3f})",
            ),
            ("q", f"Q-composition score (random baseline {comp['q_baseline']:.3f})"),
            (
                "k_token",
                (
                    "token-space K-composition Σλ/Σ|λ| of W_E W_Q(L1) (W_E W_OV(L0) W_K(L1))ᵀ "
                    "(the source's eigenvalue test)"
                ),
            ),
        ):
            m = np.array(comp[key])
            out += [
                "",
                f"## {title}",
                "",
                "| layer 0 → layer 1 | " + " | ".join(f"L1H{j}" for j in range(m.shape[1])) + " |",
                "|---|" + "---|" * m.shape[1],
            ]
            for a in range(m.shape[0]):
                out.append(f"| L0H{a} | " + " | ".join(f"{v:+.3f}" for v in m[a]) + " |")
    return "\n".join(out) + "\n"


def summary_markdown(results: list[Analysis]) -> str:
    """One row per run: accuracy, block lengths, copying signs, completions."""
    head = (
        "| run | variant | seed | positions | accuracy | L=4 | L=5 | L=6 | L=7 | L=8 | head copying Σλ/Σ|λ| | "
        "direct path | source prompts right | repeats in a row |"
    )
    lines = [head.replace("Σ|λ|", "Σ\\|λ\\|"), "|" + "---|" * 14]
    for r in results:
        heads = " ".join(f"{row['copying']:+.2f}" for row in r.copying if row["head"] is not None)
        direct = r.copying[-1]["copying"]
        graded = [c for c in r.completions if c.is_correct is not None]
        right = sum(bool(c.is_correct) for c in graded)
        bl = r.block_length_accuracy
        lines.append(
            f"| {r.name} | {r.experiment.removeprefix('induction-')} | {r.seed} | "
            f"{positions_of(r.config)} | {r.accuracy:.1%} | "
            + " | ".join(f"{bl[k]:.1%}" for k in ("4", "5", "6", "7", "8"))
            + f" | {heads} | {direct:+.3f} | "
            f"{right}/{len(graded)} | {sum(c.immediate_repeats for c in r.completions)} |"
        )
    return "\n".join(lines) + "\n"


def grouped_markdown(results: list[Analysis]) -> str:
    """Runs grouped by (variant, positions, distinct letters), over their seeds: the numbers the
    comparison with source 003 in docs/results/induction.md quotes. Ranges are min..max over seeds."""
    groups: dict[tuple, list[Analysis]] = {}
    for r in results:
        c = r.config
        groups.setdefault((r.experiment, positions_of(c), c.get("distinct", True)), []).append(r)

    def rng(vals, spec):
        lo, hi = min(vals), max(vals)
        return format(lo, spec) if abs(hi - lo) < 5e-4 else f"{format(lo, spec)}..{format(hi, spec)}"

    head = (
        "| variant | positions | seeds | accuracy L=6 | mean accuracy L=4,5,7,8 | heads copying (>+0.5) / "
        "anti-copying (<−0.5), per layer | direct path Σλ/Σ\\|λ\\| | ABCDEF right | ABCDEFABCDEF, "
        "XYZRSTXYZRST right | AAABBBAAABBB right | letters repeated in a row (other 6 prompts) | "
        "no K-composition accuracy |"
    )
    lines = [head, "|" + "---|" * 12]
    for (exp, pos, distinct), rs in groups.items():
        counts = []
        for r in rs:
            per_layer = []
            for li in range(r.n_layers):
                sc = [row["copying"] for row in r.copying if row["layer"] == li and row["head"] is not None]
                per_layer.append(f"{sum(v > 0.5 for v in sc)}/{sum(v < -0.5 for v in sc)}")
            counts.append(" · ".join(per_layer))
        comps = [c for r in rs for c in r.completions]

        def right(prompts, comps=comps):
            ok = [c.is_correct for c in comps if c.prompt in prompts]
            return f"{sum(bool(v) for v in ok)}/{len(ok)}"

        repeats = sum(c.immediate_repeats for c in comps if c.prompt != "AAABBBAAABBB")
        ood = [np.mean([r.block_length_accuracy[k] for k in ("4", "5", "7", "8")]) for r in rs]
        nok = [r.ablations["no_k_composition"].accuracy for r in rs if r.ablations]
        lines.append(
            f"| {exp.removeprefix('induction-')}{'' if distinct else ' (repeats)'} | {pos} | "
            f"{len(rs)} | {rng([r.accuracy for r in rs], '.1%')} | {rng(ood, '.1%')} | "
            f"{', '.join(counts)} | {rng([r.copying[-1]['copying'] for r in rs], '+.3f')} | "
            f"{right({'ABCDEF'})} | {right({'ABCDEFABCDEF', 'XYZRSTXYZRST'})} | "
            f"{right({'AAABBBAAABBB'})} | {repeats} | {rng(nok, '.1%') if nok else '—'} |"
        )
    return "\n".join(lines) + "\n"


def completions(paths: list[Path], prompt: str) -> list[str]:
    """One line per run: its greedy completion of `prompt` to the context length."""
    lines = []
    for path in paths:
        with Run(path) as run:
            model = numpy_model.model_at(run)
            tokens = encode_prompt(prompt, run.config["n_vocab"], run.config["seq_len"])
            completion = decode(numpy_model.greedy_complete(model, tokens, run.config["seq_len"]))
            correct = correct_completion(prompt, run.config["block_len"], run.config["seq_len"])
            lines.append(
                f"{path.name} ({run.experiment}, epoch {run.epochs[-1]:,}): {prompt} -> {completion}"
                f"   (correct: {correct if correct is not None else 'N/A'})"
            )
    return lines


def _figures(r: Analysis, history: dict, metrics: dict, folder: Path) -> None:
    from headmovies.render.induction import figures

    save_figure(figures.attention_figure(r), folder, "attention", dpi=110)
    save_figure(figures.copying_figure(r), folder, "copying", dpi=110)
    save_figure(figures.block_length_figure(r), folder, "block_length", dpi=110)
    save_figure(figures.training_figure(r, history, metrics), folder, "training", dpi=110)
    if r.composition is not None:
        save_figure(figures.composition_figure(r), folder, "composition", dpi=110)
        save_figure(figures.attention_figure(r, "no_k_composition"), folder, "attention_no_k_composition", dpi=110)


def write_report(
    paths: list[Path],
    out: Path,
    movie: bool = True,
    formats=FORMATS,
    fps: float = 24.0,
    hold_s: float = 2.0,
    sequences: int = 1024,
    progress: bool = True,
    log: Callable[[str], None] = print,
    event_hold_s: float = EVENT_HOLD_S,
) -> list[Analysis]:
    """Analyse the last snapshot of each run and write the report (every run is checked before
    anything is written): <name>/analysis.{md,json}, figures as .png and .svg, the attention
    movie (unless `movie` is false), and summary.{md,json} across runs. Returns the results."""
    from headmovies.render.induction.movie import make_movie

    for path in paths:
        with Run(path) as run:
            numpy_model.check_run(run)
    prepare_out_dir(out)
    results = []
    for path, name in zip(paths, unique_names(paths)):
        folder = prepare_out_dir(out / name)
        with Run(path) as run:
            log(
                f"{path}: {run.experiment}, {plural(len(run), 'snapshot')} to epoch {run.epochs[-1]:,}"
                + ("" if run.complete else " (incomplete run)")
            )
            r = dataclasses.replace(ind.analyse(run, n_sequences=sequences), name=name)
            history = ind.over_training(run, progress=progress)
            metrics = run.metrics()
            config = run.config
        write_text(folder / "analysis.json", json.dumps(r.to_dict(), indent=1) + "\n")
        write_text(folder / "analysis.md", run_markdown(r))
        _figures(r, history, metrics, folder)
        if movie:
            res = make_movie(
                history,
                r,
                metrics,
                folder,
                name,
                formats,
                fps,
                hold_s,
                progress,
                config=config,
                event_hold_s=event_hold_s,
            )
            log(
                f"  movie: {res.frames} frames {res.size[0]}x{res.size[1]} -> "
                + ", ".join(p.name for p in res.paths.values())
            )
        log(
            f"  {folder}: accuracy {r.accuracy:.2%}, block lengths "
            + ", ".join(f"{k}: {v:.0%}" for k, v in r.block_length_accuracy.items())
        )
        results.append(r)
    write_text(out / "summary.json", json.dumps([r.to_dict() for r in results], indent=1) + "\n")
    write_text(
        out / "summary.md",
        "# Induction runs\n\n" + summary_markdown(results) + "\n## Over seeds\n\n" + grouped_markdown(results),
    )
    return results


LEARNED = 0.9  # accuracy from which a block length counts as solved, for the sweep outcome
SWEEP_OUTCOME = (
    f"'induction': accuracy >= {LEARNED:.0%} at the trained block length and on average at the others "
    f"({', '.join(map(str, BLOCK_LENGTHS))}); 'trained length only': at the trained length only; "
    "'not learned': neither"
)


def outcome(accuracy: float, block_length_accuracy: dict, block_len: int) -> str:
    """'induction', 'trained length only' or 'not learned' (SWEEP_OUTCOME): a head that looks
    a fixed number of positions back solves only the trained block length."""
    others = [v for k, v in block_length_accuracy.items() if int(k) != block_len]
    if accuracy < LEARNED:
        return "not learned"
    return "induction" if others and np.mean(others) >= LEARNED else "trained length only"


def sweep_summary(run: Run) -> dict:
    """A sweep row's summary of an induction run (`analysis.analyse` of its final snapshot):
    accuracy on predictable positions, accuracy by block length, each circuit's copying score
    Σλ/Σ|λ|, source prompts completed right, accuracies without K/Q-composition (2 layers), and
    "outcome" (`outcome`)."""
    r = ind.analyse(run)
    graded = [c for c in r.completions if c.is_correct is not None]
    out = {
        "epoch": r.epoch,
        "outcome": outcome(r.accuracy, r.block_length_accuracy, r.config["block_len"]),
        "accuracy": r.accuracy,
        "block_length_accuracy": r.block_length_accuracy,
        "copying": {row["circuit"]: row["copying"] for row in r.copying},
        "prompts_right": f"{sum(bool(c.is_correct) for c in graded)}/{len(graded)}",
    }
    if r.ablations is not None:
        out["ablated_accuracy"] = {k: v.accuracy for k, v in r.ablations.items()}
    return out

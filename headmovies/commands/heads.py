"""`headmovies heads RUN [--epoch E] [--json]`: what each head does at one snapshot, from the
probe's scores in the run file (docs/recording.md, "The probe")."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from headmovies.errors import UserError

NAME = "heads"
HELP = "each head's probe scores at a snapshot (previous-token, duplicate-token, induction)"
DESCRIPTION = """\
Prints every head of a run, labelled L{layer}H{head}, with its scores on the probe at one
snapshot (the last by default): previous-token, duplicate-token and induction, TransformerLens's
head detectors (the fraction of the head's attention on the pairs each pattern names; a
perfect induction head scores 0.5 on the repeated probe), then the strongest head for each
score and the in-context score (probe loss on the second copy minus the first, nats).
Runs recorded with a probe have them: a Recorder's default and the built-in induction
experiments. docs/recording.md, "The probe"."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, metavar="RUN", help="run file (.h5)")
    p.add_argument("--epoch", type=int, metavar="E", help="the snapshot at epoch E (default: the last)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _number(x: float) -> float | None:
    return None if not math.isfinite(x) else round(float(x), 6)


def report(path: Path, epoch: int | None) -> dict:
    """{"run", "epoch", "snapshot", "snapshots", "complete", "scores": [names],
    "heads": [{"head": "L0H1", "layer", "index", name: score, ...}], "strongest": {name: {"head",
    "score"}}, "in_context_score": nats or None}.
    UserError for a run without probe records or an epoch that is no snapshot's."""
    from headmovies.runfile.reader import Run
    from headmovies.train.head_scores import SCORES, strongest

    with Run(path) as run:
        scores = run.head_scores()
        if not scores:
            why = (
                "it was recorded without a probe (Recorder(..., probe=None), a model without W_E, or a version "
                "before the probe)"
                if run.experiment == "recorded"
                else f"{run.experiment} runs record none (built-in induction runs and a Recorder's default probe do)"
            )
            raise UserError(f"{path} holds no probe scores: {why}")
        epochs = [int(e) for e in run.epochs]
        t = len(epochs) - 1
        if epoch is not None:
            if epoch not in epochs:
                near = min(epochs, key=lambda e: abs(e - epoch))
                raise UserError(f"{path} has no snapshot at epoch {epoch}; the nearest is at {near}")
            t = epochs.index(epoch)
        ics = run.in_context_scores()
        complete = run.complete
    at = {name: scores[name][t] for name in SCORES if name in scores}
    L, H = next(iter(at.values())).shape
    heads = []
    for layer in range(L):
        for head in range(H):
            if all(not math.isfinite(at[n][layer, head]) for n in at):
                continue  # a layer with fewer heads (NaN padding)
            row = {"head": f"L{layer}H{head}", "layer": layer, "index": head}
            row |= {n: _number(at[n][layer, head]) for n in at}
            heads.append(row)
    best = {n: {"head": f"L{lh[0]}H{lh[1]}", "score": _number(lh[2])} for n, lh in strongest(at).items()}
    return {
        "run": str(path),
        "epoch": epochs[t],
        "snapshot": t + 1,  # counted from 1, as the text says
        "snapshots": len(epochs),
        "complete": complete,  # false: training still writing, or stopped before its end
        "scores": list(at),
        "heads": heads,
        "strongest": best,
        "in_context_score": None if ics is None else _number(ics[t]),
    }


def run(args: argparse.Namespace) -> int:
    out = report(args.run, args.epoch)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    from headmovies.runfile.probe_records import STRONG

    names = out["scores"]
    so_far = "" if out["complete"] else " so far: the run is still being written, or was stopped"
    print(f"{out['run']}: epoch {out['epoch']:,} (snapshot {out['snapshot']} of {out['snapshots']}{so_far})")
    print("head    " + "  ".join(f"{n:>15}" for n in names))
    for row in out["heads"]:
        cells = ("—" if row[n] is None else f"{row[n]:.3f}" for n in names)
        print(f"{row['head']:<8}" + "  ".join(f"{c:>15}" for c in cells))
    for n, best in out["strongest"].items():
        strong = [row["head"] for row in out["heads"] if row[n] is not None and row[n] >= STRONG[n]]
        also = f"; at or above {STRONG[n]:g}: {', '.join(strong)}" if strong else f"; none at or above {STRONG[n]:g}"
        print(f"strongest {n}: {best['head']} ({best['score']:.3f}){also}")
    print(
        "(a perfect head scores 1 for previous_token and duplicate_token and 0.5 for induction, where only the "
        "probe's second copy can attend to a token after an earlier copy; half of that counts as strong)"
    )
    if out["in_context_score"] is not None:
        print(f"in-context score: {out['in_context_score']:+.3f} nats (probe loss, second copy minus first)")
    return 0

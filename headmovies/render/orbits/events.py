"""The orbit movie's timeline (events and progress curves) and its text alternative, from the
run file and the orbit check of every snapshot (docs/movie.md, "Timeline").

Events: the snapshot schedule's switch, the start of the second phase (`refine_start`: weak
heads are pruned, the equivariance penalty grows), and each final orbit's verification (the
epoch from which it stays verified, `history.OrbitHistory.locked_in`). Curves: heads in each
final orbit while it is verified (stacked, in the orbit's colour) and the logged equivariance
error (log scale).
"""
from __future__ import annotations

import numpy as np

from headmovies.render.core.projections import Panel
from headmovies.runfile.reader import Run
from headmovies.render.core.timeline import Curve, Event, Timeline, schedule_events
from headmovies.render.orbits.check import format_error
from headmovies.render.orbits.history import OrbitHistory
from headmovies.render.orbits.head_styles import Track

EQ_COLOUR = "#6a6a6a"


def refine_event(run: Run, history: OrbitHistory | None = None) -> list[Event]:
    """The second phase's start as an event, from the run's config (orbits experiment keys
    refine_start, refine_prune, refine_eq_weight, refine_ov_bias_weight); [] when the run has no
    second phase."""
    cfg = run.config
    start = int(cfg.get("refine_start", 0) or 0)
    if not 0 < start < int(cfg.get("epochs", 0)) or start > run.epochs[-1]:
        return []
    what = ["phase 2"]
    text = f"epoch {start:,}: phase 2 starts"
    details = []
    if float(cfg.get("refine_prune", 0) or 0) > 0:
        what.append("pruning")
        pruned = ""
        if history is not None:
            i = int(np.searchsorted(history.epochs, start, side="right"))
            if i < len(history):
                k = int(history.dead[i].sum())
                pruned = f" ({k} head{'s' if k != 1 else ''} dead after it)"
        details.append(f"heads with OV below {float(cfg['refine_prune']):.0%} of the largest are pruned{pruned}")
    if "refine_eq_weight" in cfg:
        details.append(f"the equivariance weight ramps to {float(cfg['refine_eq_weight']):g}")
    if float(cfg.get("refine_ov_bias_weight", 0) or 0) > 0:
        what.append("OV-bias penalty")
        details.append(f"the OV-bias penalty (μ = {float(cfg['refine_ov_bias_weight']):g}) starts")
    if details:
        text += ": " + "; ".join(details)
    return [Event(start, ", ".join(what), text)]


def orbit_events(run: Run, history: OrbitHistory, tracks: list[Track]) -> list[Event]:
    """Schedule switch, phase change and every final orbit's verification, in epoch order."""
    events = schedule_events(run.config, run.epochs) + refine_event(run, history)
    for tr in tracks:
        events.append(Event(tr.since, f"{tr.name()} verified",
                            f"epoch {tr.since:,}: heads {tr.head_list()} form a verified {tr.name()} "
                            f"(worst error {format_error(tr.error_at_since, history.tol)})",
                            colour=tr.colour, phase=False))
    return sorted(events, key=lambda e: e.epoch)


def orbit_timeline(run: Run, history: OrbitHistory, tracks: list[Track]) -> Timeline:
    """The strip: events, heads in each final orbit while verified (stacked step areas, left
    axis up to a quarter above the heads in final orbits) and the equivariance error (right
    axis, log) when logged."""
    H = history.dead.shape[1]
    curves = [Curve(history.epochs, tr.verified * len(tr.heads), f"{tr.name()}", tr.colour, step=True, fill=True,
                    stack=True) for tr in tracks]
    met = run.metrics()
    if "eq_error_pooled" in met and len(met["eq_error_pooled"]):
        curves.append(Curve(met["epoch"], met["eq_error_pooled"], "equivariance error (pooled)", EQ_COLOUR,
                            axis="right"))
    top = max([sum(len(tr.heads) for tr in tracks)] + [1])
    return Timeline(int(run.epochs[0]), int(run.epochs[-1]), orbit_events(run, history, tracks), curves,
                    left_label="heads in\norbits", left_lim=(0, min(H, 1.25 * top)), right_label="eq. error",
                    right_log=True)


def _task(run: Run, n: int) -> str:
    if run.experiment == "orbits":
        return f"addition mod {n} (each of three tokens is replaced by the sum of the other two)"
    return f"the {run.experiment} task (C_{n})"


def figcaption(run: Run, n_heads: int, history: OrbitHistory | None, tracks: list[Track], panels: list[Panel],
               n: int) -> str:
    """The movie's text alternative (the snippet's <figcaption>): what trained, what the
    panels show, what formed and when (from the orbit check of every snapshot, `history`;
    None: the orbits are not told), and how training ended. Plain text, one paragraph."""
    H = n_heads
    cfg = run.config
    epochs = int(run.epochs[-1])
    penalty = " under an equivariance penalty" if float(cfg.get("eq_weight", 0) or 0) > 0 else ""
    planned = int(cfg.get("epochs", epochs) or epochs)
    so_far = "" if run.complete else f" so far (of {planned:,}; the run is unfinished)"
    parts = [f"{H} heads of one attention layer ({run.experiment} run {run.path.name}, seed {run.seed}) trained "
             f"{epochs:,} epochs{so_far}{penalty} on {_task(run, n)}."]
    planes = ", ".join(f"{p.circuit.upper()} ({p.u}, {p.v})" for p in panels)
    parts.append(f"Each dot is one head: the Fourier coefficient of its QK or OV circuit in one plane per panel "
                 f"({planes}); shifting every token by s turns the dots of an orbit into each other.")
    if history is None:
        pass
    elif tracks:
        said = [f"a {tr.name()} (heads {tr.head_list()}) is verified from epoch {tr.since:,}" for tr in tracks]
        sentence = said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]
        parts.append(sentence[0].upper() + sentence[1:] + "; before that its heads are drawn pale.")
    else:
        parts.append("No orbit is verified at the final snapshot.")
    refine = refine_event(run, history)
    if refine:
        e = refine[0]
        parts.append(f"At epoch {e.epoch:,} " + e.text.split(": ", 1)[1] + ".")
    met = run.metrics()
    final = []
    for key, words, fmt in (("train_acc", "train accuracy", "{:.1%}"), ("heldout_acc", "held-out accuracy", "{:.1%}"),
                            ("eq_error_pooled", "equivariance error (pooled)", "{:.2g}"),
                            ("eq_error_worst_input", "at the worst input", "{:.2g}")):
        if key in met and len(met[key]):
            final.append(f"{words} {fmt.format(float(met[key][-1]))}")
    if final:
        parts.append(("At the end: " if run.complete else "At the last snapshot: ") + ", ".join(final) + ".")
    return " ".join(parts)

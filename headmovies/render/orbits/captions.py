"""The words around an orbit picture: the header over the panels, each snapshot's caption (its
logged metrics), the axis labels, and the movie's text alternative (the snippet's
<figcaption>). Shared by the movie, the still figures and the viewer; training events are
worded in `events`. Everything here takes values (`stream.RunInfo`, the orbit history), not
the run file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from headmovies.render.core.projections import Panel
from headmovies.render.orbits.events import imposed_event, refine_event, verified_event
from headmovies.render.orbits.head_styles import Track
from headmovies.render.orbits.history import OrbitHistory
from headmovies.render.orbits.stream import RunInfo

AXIS_LABELS = ("real part of the coefficient", "imaginary part")


def metrics_caption(metrics: dict) -> Callable[[int], str]:
    """Per-epoch text from the logged metrics (`Run.metrics()`: train / held-out accuracy, both
    equivariance errors: pooled and worst input, docs/math.md); "" at epochs not logged."""
    if "epoch" not in metrics:
        return lambda epoch: ""
    index = {int(e): i for i, e in enumerate(metrics["epoch"])}
    parts = [
        ("train_acc", "train {:.1%}"),
        ("heldout_acc", "held-out {:.1%}"),
        ("eq_error_pooled", "eq. error pooled {:.1e}"),
        ("eq_error_worst_input", "worst input {:.1e}"),
    ]
    parts = [(k, f) for k, f in parts if k in metrics]

    def caption(epoch: int) -> str:
        i = index.get(int(epoch))
        return "" if i is None else "   ".join(f.format(metrics[k][i]) for k, f in parts)

    return caption


def task_words(experiment: str, n: int) -> str:
    """The task, in a few words: 'addition mod 24' for the orbits experiment."""
    return f"addition mod {n}" if experiment == "orbits" else f"the {experiment} task"


def imposed_words(config: dict) -> str:
    """'orbits imposed at epoch E' for an imposed-orbit run (config impose_orbit_at), else ''."""
    at = int(config.get("impose_orbit_at", 0) or 0)
    return f"orbits imposed at epoch {at:,}" if at > 0 else ""


def header_text(info: RunInfo, n: int, m: int, n_heads: int, trail_epochs: float) -> str:
    """Two lines: the run (an imposed-orbit run says "orbits imposed at epoch E"), and how to
    read a dot."""
    imposed = imposed_words(info.config)
    return (
        f"{info.file} ({info.experiment}, seed {info.seed}): {n_heads} heads of one attention layer learning "
        f"{task_words(info.experiment, n)}; the group C_{n} shifts tokens by s and outputs by {m}s"
        + (f"; {imposed} (projected, not emergent)" if imposed else "")
        + "\n"
        f"Each dot is one head: X^(u,v), the Fourier coefficient of its QK circuit (query u, key v) or "
        f"OV circuit (output u, input v); trails: last {trail_epochs:g} epochs"
    )


def _task_in_full(experiment: str, n: int) -> str:
    if experiment == "orbits":
        return f"addition mod {n} (each of three tokens is replaced by the sum of the other two)"
    return f"the {experiment} task (C_{n})"


def figcaption(
    info: RunInfo,
    n_heads: int,
    history: OrbitHistory | None,
    tracks: Sequence[Track],
    panels: Sequence[Panel],
    n: int,
    spectrum: Sequence[str] = (),
) -> str:
    """The movie's text alternative (the snippet's <figcaption>): what trained, what the
    panels show, the held events in the words of the timeline (`events`: phase changes, and
    each orbit's verification from the orbit check of every snapshot, `history`; None: the
    orbits are not told), the final orbit spectrum of the groups whose planes the panels show
    (`spectrum`: the last frame's panel lines, `spectrum.panel_lines`; '' entries skipped), and
    how training ended. Plain text, one paragraph."""
    cfg = info.config
    epochs = int(info.epochs[-1])
    penalty = " under an equivariance penalty" if float(cfg.get("eq_weight", 0) or 0) > 0 else ""
    planned = int(cfg.get("epochs", epochs) or epochs)
    so_far = "" if info.complete else f" so far (of {planned:,}; the run is unfinished)"
    parts = [
        (
            f"{n_heads} heads of one attention layer ({info.experiment} run {info.file}, seed {info.seed}) trained "
            f"{epochs:,} epochs{so_far}{penalty} on {_task_in_full(info.experiment, n)}."
        )
    ]
    planes = ", ".join(f"{p.circuit.upper()} ({p.u}, {p.v})" for p in panels)
    parts.append(
        f"Each dot is one head: the Fourier coefficient of its QK or OV circuit in one plane per panel "
        f"({planes}); shifting every token by s turns the dots of an orbit into each other."
    )
    imposed = imposed_words(cfg)
    if imposed:
        parts.append(
            f"An experiment: {imposed}, each frequency group of fitting size projected onto its nearest exact "
            "orbit; the orbits after it did not form on their own."
        )
    events = (
        refine_event(cfg, epochs, history)
        + imposed_event(cfg, epochs)
        + ([verified_event(tr, history.tol) for tr in tracks] if history is not None else [])
    )
    for epoch in sorted({e.epoch for e in events}):
        parts.append(f"At epoch {epoch:,} " + "; ".join(e.words for e in events if e.epoch == epoch) + ".")
    if history is not None:
        parts.append(
            "Before its verification an orbit's heads are grey, like every other live head."
            if tracks
            else "No orbit is verified at the final snapshot."
        )
    said = [line.replace("\n", ", ") for line in spectrum if line]
    if said:
        parts.append(
            "One panel per frequency group whose own plane is shown (its QK panel, if there is one) gives, "
            "bottom left, the group's orbit spectrum "
            "|μ̂_k|/Σ|ρ| over its heads' QK phases and OV weights (0 for an exact orbit); at the last snapshot: "
            + "; ".join(said)
            + "."
        )
    met = info.metrics
    final = []
    for key, words, fmt in (
        ("train_acc", "train accuracy", "{:.1%}"),
        ("heldout_acc", "held-out accuracy", "{:.1%}"),
        ("eq_error_pooled", "equivariance error (pooled)", "{:.2g}"),
        ("eq_error_worst_input", "at the worst input", "{:.2g}"),
    ):
        if key in met and len(met[key]):
            final.append(f"{words} {fmt.format(float(met[key][-1]))}")
    if final:
        parts.append(("At the end: " if info.complete else "At the last snapshot: ") + ", ".join(final) + ".")
    return " ".join(parts)

"""The training events of an orbit run, each worded once (docs/movie.md, "Timeline"): the movie's
timeline strip, the figcaption and the viewer's timeline all say them in these words.

Events: the snapshot schedule's switch (`render.core.timeline.schedule_events`, shared by
every experiment), the equivariance penalty switching on (`penalty_event`), the imposed-orbit
projection (`impose_orbit_at`), the start of the second phase (`refine_start`: weak heads are
pruned, the equivariance penalty grows, the OV-bias penalty starts) and each final orbit's
verification (the epoch from which it stays verified, `history.OrbitHistory.locked_in`). Each is
an `Event`: a short label for the strip, and `words`, the sentence undated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from headmovies.render.core.timeline import Epochs, Event, schedule_events
from headmovies.render.orbits.check import format_error
from headmovies.render.orbits.head_styles import Track
from headmovies.render.orbits.history import OrbitHistory


def refine_event(config: dict, through: int, history: OrbitHistory | None = None) -> list[Event]:
    """The second phase's start as an event, from the run's config (orbits experiment keys
    refine_start, refine_prune, refine_eq_weight, refine_ov_bias_weight); [] when the run has no
    second phase or it starts after epoch `through`. With `history`, the heads dead after it."""
    cfg = config
    start = int(cfg.get("refine_start", 0) or 0)
    if not 0 < start < int(cfg.get("epochs", 0)) or start > through:
        return []
    what = ["phase 2"]
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
    words = "phase 2 starts" + (": " + "; ".join(details) if details else "")
    return [Event(start, ", ".join(what), words=words)]


def imposed_event(config: dict, through: int) -> list[Event]:
    """The imposed-orbit experiment's projection (config impose_orbit_at, train/orbits/impose.py)
    as an event: "orbits imposed at epoch E"; [] when the run imposes none by epoch `through`."""
    at = int(config.get("impose_orbit_at", 0) or 0)
    if not 0 < at <= through:
        return []
    return [
        Event(
            at,
            "orbits imposed",
            words="orbits imposed: each frequency group of fitting size is projected onto its nearest exact "
            "orbit (an experiment; these orbits did not form on their own)",
        )
    ]


def penalty_event(config: dict, through: int) -> list[Event]:
    """The equivariance penalty switching on as an event, from the run's config (orbits
    experiment keys eq_start, eq_weight, eq_ramp): the weight λ is 0 before eq_start, then
    ramps to eq_weight; the losses and errors jump there. [] when it is on from the start, off,
    or starts after epoch `through`. Not held."""
    try:
        start, weight = int(config["eq_start"]), float(config.get("eq_weight", 0) or 0)
    except (KeyError, TypeError, ValueError):
        return []
    if not 0 < start <= through or weight <= 0 or start >= int(config.get("epochs", start + 1)):
        return []
    ramp = int(config.get("eq_ramp", 0) or 0)
    how = f", ramping to λ = {weight:g} over {ramp:,} epochs" if ramp > 0 else f" at λ = {weight:g}"
    return [Event(start, "equivariance penalty on", hold=False, words=f"the equivariance penalty starts{how}")]


def phase_marks(config: dict, epochs: Epochs) -> list[Event]:
    """The changes of the training itself that the curves show (penalty on, phase 2), for the
    `curves` figure: from the config, within the logged epochs."""
    through = int(epochs[-1]) if len(epochs) else 0
    return sorted(penalty_event(config, through) + refine_event(config, through), key=lambda e: e.epoch)


def verified_event(track: Track, tol: float) -> Event:
    """A final orbit's verification (from `track.since` on it stays verified), in its colour."""
    return Event(
        track.since,
        f"{track.name()} verified",
        colour=track.colour,
        phase=False,
        words=f"heads {track.head_list()} form a verified {track.name()} "
        f"(worst error {format_error(track.error_at_since, tol)})",
    )


def training_events(
    config: dict, epochs: Epochs | None = None, history: OrbitHistory | None = None, tracks: Sequence[Track] = ()
) -> list[Event]:
    """Schedule switch, phase change and each track's verification, in epoch order. `epochs`:
    the snapshots shown (events after the last are left out; None: the whole planned run, as
    the live viewer's timeline spans it)."""
    through = int(epochs[-1]) if epochs is not None and len(epochs) else int(config.get("epochs", 0))
    events = (
        schedule_events(config, epochs)
        + penalty_event(config, through)
        + refine_event(config, through, history)
        + imposed_event(config, through)
    )
    if history is not None:
        events += [verified_event(tr, history.tol) for tr in tracks]
    return sorted(events, key=lambda e: e.epoch)

"""Each experiment family's part in a sweep: how a finished run becomes a sweep row's summary,
and what the outcome labels that the sweep's census counts mean (docs/sweeps.md).

    family -> FamilySummary(sweep_summary, outcome_text[, detail, detail_text]), from
              render/<family>/summary.py

A new family adds its line here (docs/extending.md); tests/unit/test_layout.py checks that every
family in `headmovies.tasks` has one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from headmovies import tasks
from headmovies.render.induction import summary as induction
from headmovies.render.orbits import summary as orbits
from headmovies.render.ov_coherent import summary as ov_coherent
from headmovies.runfile.reader import Run


class FamilySummary(NamedTuple):
    sweep_summary: Callable[[Run], dict]  # an open run file -> JSON-ready dict with an "outcome" label
    outcome_text: str  # one sentence: what the outcome labels mean (SWEEP_OUTCOME)
    detail: Callable[[dict], str] | None = None  # a row's summary -> a short text beside its outcome
    detail_text: str = ""  # one sentence: what that text says (its column's heading, then its meaning)


SUMMARIES: dict[str, FamilySummary] = {
    "induction": FamilySummary(induction.sweep_summary, induction.SWEEP_OUTCOME),
    "orbits": FamilySummary(orbits.sweep_summary, orbits.SWEEP_OUTCOME, orbits.spectrum_detail, orbits.SWEEP_DETAIL),
    "ov_coherent": FamilySummary(
        ov_coherent.sweep_summary, ov_coherent.SWEEP_OUTCOME, ov_coherent.orderings_detail, ov_coherent.SWEEP_DETAIL
    ),
}


def summary_of(experiment: str) -> FamilySummary:
    """The FamilySummary of a registered experiment's family (e.g. 'induction-2l' -> induction's).
    KeyError for an experiment no family names."""
    return SUMMARIES[tasks.experiments()[experiment]]

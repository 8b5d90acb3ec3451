"""The OV-coherent analysis of one snapshot, typed (`analysis.analyse` returns it): what the
report, the figures and a sweep's row read. `to_dict()` is the JSON form written to
analysis.json and summary.json (the same keys, in the same order, as the fields)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class HeadResult:
    """One head. head: its number from 1; qk_readoff [12]: its read-off QK row over the tokens;
    qk_signal_minus_noise [4]: the signal tokens' scores above the noise tokens' mean;
    ordering: the signal tokens by preference (e.g. [1, 2, 3, 4]) and ordering_text in words
    ("1 > 2 > 3 > 4 > noise"); ablated_acc and ablated_class_acc [10]: the model's accuracy
    with this head ablated, overall and per class; ov_signal [10 classes][4 signal tokens]:
    its centred OV table on the signal tokens."""

    head: int
    qk_readoff: list[float]
    qk_signal_minus_noise: list[float]
    ordering: list[int]
    ordering_text: str
    ablated_acc: float
    ablated_class_acc: list[float]
    ov_signal: list[list[float]]


@dataclass(frozen=True)
class Analysis:
    """One snapshot. acc, class_acc [10], worst_class_acc: accuracy (exact over the task's cases
    when `exact`); n_heads, d_head: the model's shape; heads: one HeadResult each; opposite:
    whether the first two heads' orderings are reversed (None with one head) and kendall_tau
    their rank correlation (None with one head); attention_by_pair [H][4][4]: each head's
    attention on the signal token pairs; class_contributions [10][2]: each class's logit
    contribution in the decision plane; hard_attention_agreement, hard_attention_acc: how often
    the all-or-nothing attention explanation gives the model's prediction, and its accuracy."""

    acc: float
    class_acc: list[float]
    worst_class_acc: float
    exact: bool
    n_heads: int
    d_head: int
    heads: list[HeadResult]
    opposite: bool | None
    kendall_tau: float | None
    attention_by_pair: list
    class_contributions: list
    hard_attention_agreement: float
    hard_attention_acc: float

    def to_dict(self) -> dict:
        """JSON-ready: the fields in order, each head as a dict."""
        return dataclasses.asdict(self)

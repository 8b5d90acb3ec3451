"""The induction analysis of one run's final snapshot, typed (`analysis.analyse` returns it):
what the report, the figures, the movie's caption and a sweep's row read. `to_dict()` is the
JSON form written to analysis.json and summary.json (the same keys, in the same order, as the
fields; the optional ones left out when absent, the attention arrays never written)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class HeadResult:
    """One head's mean attention by offset (queries at positions >= block length). head:
    "L0H2" (layer 0, head 2, 0-based); top_offset: how many positions back it attends most,
    top_offset_attention its weight there; offset_attention [block_len + 2]: its weight 0, 1, ...
    positions back."""

    head: str
    top_offset: int
    top_offset_attention: float
    offset_attention: list[float]


@dataclass(frozen=True)
class Completion:
    """One greedy completion to the context length. correct: the right completion (None where
    none exists) and is_correct whether ours is it (None then); source: source 003's printed
    completion (None if not printed); immediate_repeats: completed letters equal to the one
    before."""

    prompt: str
    completion: str
    correct: str | None
    is_correct: bool | None
    source: str | None
    immediate_repeats: int


@dataclass(frozen=True)
class Ablation:
    """The model with a composition removed: accuracy on predictable positions, and by block
    length ({"4": ..., "8": ...})."""

    accuracy: float
    block_length_accuracy: dict[str, float]


_OPTIONAL = ("smear_sigmoid_alpha", "composition", "ablations", "name")


@dataclass(frozen=True)
class Analysis:
    """One run's final snapshot. experiment, run (its path), seed, epoch, complete, n_layers,
    config: the run's; accuracy: on predictable positions of fresh sequences; copying: the
    rows of `circuit_scores.copying_table` (dicts: circuit, layer, head, copying,
    source_mean_sign, eigenvalues); completions: one per source prompt; block_length_accuracy:
    {"4": ..., "8": ...}; heads: one HeadResult each, layer by layer. Only some runs have
    smear_sigmoid_alpha [H] (smeared keys), composition ({"k", "q", "k_token"} [H, H] lists and
    their baselines) and ablations (two layers). attention: mean attention arrays
    {"model": [n_layers, H, T, T], "no_k_composition": ... for two layers} float64, not JSON;
    name: the report's name of the run (set by the report)."""

    experiment: str
    run: str
    seed: int | None
    epoch: int
    complete: bool
    n_layers: int
    config: dict
    accuracy: float
    copying: list[dict]
    completions: list[Completion]
    block_length_accuracy: dict[str, float]
    heads: list[HeadResult]
    smear_sigmoid_alpha: list[float] | None = None
    composition: dict | None = None
    ablations: dict[str, Ablation] | None = None
    attention: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    name: str | None = None

    def to_dict(self) -> dict:
        """JSON-ready: the fields in order, without attention and without absent optional ones."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "attention" or (v is None and f.name in _OPTIONAL):
                continue
            if f.name in ("completions", "heads"):
                v = [dataclasses.asdict(x) for x in v]
            elif f.name == "ablations":
                v = {k: dataclasses.asdict(a) for k, a in v.items()}
            out[f.name] = v
        return out

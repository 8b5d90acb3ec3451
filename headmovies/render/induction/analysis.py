"""Induction-head analyses (source 003; docs/math.md, "Induction analyses") from the weights stored in a run file.

The analyses of the source's write-up, on the trainer's model run in numpy
(`numpy_model`): OV copying scores (`circuit_scores`), average attention patterns, greedy
completions, accuracy by block length, and for two layers K-composition scores and the model
with K-composition (or Q-composition) removed; `analyse` gathers them for the final snapshot,
`over_training` for every snapshot. Needs only numpy.

Heads are labelled TransformerLens-style, 0-based: "L0H2" is layer 0, head 2 (the source counts
heads and layers from 1).

Its typed result (`Analysis`, with `HeadResult`, `Completion`, `Ablation`) is what the report,
the figures, the movie's caption and a sweep's row read; `Analysis.to_dict()` is the JSON form
written to analysis.json and summary.json (the same keys, in the same order, as the fields; the
optional ones left out when absent, the attention arrays never written).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from headmovies.render.induction.circuit_scores import composition_scores, copying_table
from headmovies.render.induction.numpy_model import (
    Model,
    check_run,
    forward,
    greedy_complete,
    mean_attention,
    model_at,
    n_layers,
    offset_profile,
)
from headmovies.tasks.induction import (
    BLOCK_LENGTHS,
    SOURCE_PROMPTS,
    correct_completion,
    decode,
    encode_prompt,
    positions_of,
    sample_sequences,
)


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


# Greedy completions printed in source 003, verbatim. The source's 2-layer section prints the
# prompt "ABCXYZABCDEF" twice: once with correct completion ABCDEFABCDEF (so the prompt was
# ABCDEFABCDEF, as read here) and once as out of distribution.
SOURCE_COMPLETIONS = {
    "induction-1l": {
        "ABCDEF": "ECECECECECECECECEC",
        "ABCDEFABCDEF": "CFCFCFCFCFCF",
        "XYZRSTXYZRST": "TSTSZSTSTSZST",
        "ABCDEFXYZRST": "FEFEFEFEFEFE",
        "QWERTYXYZRST": "YTYTYTYTYTYT",
    },
    "induction-smeared": {
        "ABCDEF": "EFEFEFEFEFEFEFEFEF",
        "ABCDEFABCDEF": "ABCDEFABCDEF",
        "XYZRSTXYZRST": "XYZRSTXYZRST",
        "ABCDEFXYZRST": "FXYZRSTFXYZR",
        "QWERTYXYZRST": "YXYXYXYXYXYX",
    },
    "induction-2l": {"ABCDEFABCDEF": "ABCDEFABBCEF", "AAABBBAAABBB": "ABABABABABAB", "ABCXYZABCDEF": "ABCXYZABCYYZ"},
}
# OV copying scores printed in source 003 (its "sum k/|k|"; by its values, Sigma lambda / Sigma |lambda|).
SOURCE_SCORES: dict[str, dict[str, Any]] = {
    "induction-1l": {
        "heads": [0.6860927, 0.85695416, 0.98481447, 0.5779195],
        "sum_of_heads": 0.9997909,
        "direct": -0.9995849,
    },
    "induction-smeared": {"heads": [-0.71228284, 1.0, 1.0, -0.856813], "direct": -0.9998577},
    "induction-2l": {
        "heads": [-0.9999998, -0.94031566, -0.9329939, -0.9999997, 0.9998253, 0.9999484, 0.99989885, 0.99702746],
        "direct": -0.9995,
    },
}


def predictable_accuracy(logits: np.ndarray, tokens: np.ndarray, block_len: int) -> float:
    """Fraction of targets at positions [block_len, T) predicted by the logits one step before."""
    return float((logits[:, block_len - 1 : -1].argmax(-1) == tokens[:, block_len:]).mean())


def block_length_accuracy(
    model: Model, cfg: dict, lengths=BLOCK_LENGTHS, n: int = 1024, seed: int = 0, **ablation
) -> dict[int, float]:
    """{block length: accuracy on predictable positions} on n fresh sequences of each block
    length (distinct letters when the run's config says so). A head that attends to a fixed
    offset of 5 solves only length 6; an induction head solves them all."""
    out = {}
    for L in lengths:
        rng = np.random.default_rng([seed, L])
        tokens = sample_sequences(rng, n, cfg["n_vocab"], cfg["seq_len"], L, cfg.get("distinct", True))
        out[int(L)] = predictable_accuracy(forward(model, tokens, **ablation), tokens, L)
    return out


def immediate_repeats(completion: str, prompt: str) -> int:
    """How often a completed letter equals the letter just before it (the source's "never
    repeats the same token twice in a row")."""
    seq = prompt[-1:] + completion
    return sum(a == b for a, b in itertools.pairwise(seq))


def completions_table(model: Model, cfg: dict, experiment: str, prompts=SOURCE_PROMPTS) -> list[Completion]:
    """Greedy completions to the context length of each prompt, beside the correct completion
    (None where none exists) and source 003's completion for this variant (None if not printed)."""
    T, L = model.W_pos.shape[0], cfg.get("block_len", 6)
    rows = []
    for prompt in prompts:
        ours = decode(greedy_complete(model, encode_prompt(prompt, cfg["n_vocab"], T), T))
        correct = correct_completion(prompt, L, T)
        rows.append(
            Completion(
                prompt=prompt,
                completion=ours,
                correct=correct,
                is_correct=None if correct is None else ours == correct,
                source=SOURCE_COMPLETIONS.get(experiment, {}).get(prompt),
                immediate_repeats=immediate_repeats(ours, prompt),
            )
        )
    return rows


def _str_keys(d: dict) -> dict:
    return {str(k): v for k, v in d.items()}  # JSON object keys


def analyse(run, n_sequences: int = 1024, seed: int = 0) -> Analysis:
    """Every final-snapshot analysis of an induction run (`Analysis`; its `to_dict()` is
    the JSON form, block lengths as string keys), with the mean attention arrays
    ({"model": [n_layers, H, T, T], "no_k_composition": ... for two layers} float64)."""
    model = model_at(run)
    cfg, weights = run.config, model.weights
    nl = n_layers(weights)
    T, L = cfg["seq_len"], cfg["block_len"]
    tokens = sample_sequences(np.random.default_rng(seed), n_sequences, cfg["n_vocab"], T, L, cfg.get("distinct", True))
    logits = forward(model, tokens)
    att = {"model": mean_attention(model, tokens)}
    prof = offset_profile(att["model"], start=L)  # (n_layers, H, T)
    heads = [
        HeadResult(
            head=f"L{li}H{h}",
            top_offset=int(np.nanargmax(prof[li, h])),
            top_offset_attention=float(np.nanmax(prof[li, h])),
            offset_attention=[float(v) for v in prof[li, h, : L + 2]],
        )
        for li in range(nl)
        for h in range(prof.shape[1])
    ]
    smear = None
    if "blocks.0.attn.alpha" in weights:
        smear = [float(1 / (1 + np.exp(-a))) for a in weights["blocks.0.attn.alpha"]]
    composition = ablations = None
    if nl >= 2:
        comp = composition_scores(weights, 0, 1)
        composition = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in comp.items()}
        removed = {
            "no_k_composition": {"k_composition": False},
            "no_q_composition": {"q_composition": False},
            "no_qk_composition": {"k_composition": False, "q_composition": False},
        }
        ablations = {
            name: Ablation(
                accuracy=predictable_accuracy(forward(model, tokens, **kw), tokens, L),
                block_length_accuracy=_str_keys(block_length_accuracy(model, cfg, n=n_sequences, seed=seed, **kw)),
            )
            for name, kw in removed.items()
        }
        att["no_k_composition"] = mean_attention(model, tokens, k_composition=False)
    return Analysis(
        experiment=run.experiment,
        run=str(run.path),
        seed=run.seed,
        epoch=int(run.epochs[-1]),
        complete=run.complete,
        n_layers=nl,
        config=cfg,
        accuracy=predictable_accuracy(logits, tokens, L),
        copying=copying_table(weights),
        completions=completions_table(model, cfg, run.experiment),
        block_length_accuracy=_str_keys(block_length_accuracy(model, cfg, n=n_sequences, seed=seed)),
        heads=heads,
        smear_sigmoid_alpha=smear,
        composition=composition,
        ablations=ablations,
        attention=att,
    )


def over_training(run, n_sequences: int = 256, seed: int = 0, progress: bool = True) -> dict:
    """Per snapshot: copying scores of every row of `copying_table` and each head's mean
    attention on a fixed set of n_sequences fresh sequences.

    Returns {"epoch": int64 [S], "circuits": [names], "copying": [S, C], "source_mean_sign": [S, C],
    "attention": float32 [S, n_layers, H, T, T]}.
    """
    from tqdm import tqdm

    W_pos = check_run(run)
    cfg = run.config
    positions = positions_of(cfg)
    tokens = sample_sequences(
        np.random.default_rng(seed),
        n_sequences,
        cfg["n_vocab"],
        cfg["seq_len"],
        cfg["block_len"],
        cfg.get("distinct", True),
    )
    epochs, cop, sms, att, names = [], [], [], [], None
    bar = {"desc": "snapshots", "unit": "snap", "disable": None if progress else True, "leave": False}
    for epoch, w in tqdm(run.iter_weights(), total=len(run), **bar):
        rows = copying_table(w)
        names = [r["circuit"] for r in rows]
        epochs.append(epoch)
        cop.append([r["copying"] for r in rows])
        sms.append([r["source_mean_sign"] for r in rows])
        att.append(mean_attention(Model(w, W_pos, positions), tokens).astype(np.float32))
    return {
        "epoch": np.array(epochs, np.int64),
        "circuits": names,
        "copying": np.array(cop),
        "source_mean_sign": np.array(sms),
        "attention": np.stack(att),
    }

"""Analyses of an OV-coherent superposition run (source 004; docs/math.md, "OV-coherent analyses")
from its stored weights alone.

Source: L. Greenspan, "An OV-Coherent Toy Model of Attention Head Superposition" (AI Alignment
Forum, 2023; source 004): with 2 heads of d_head 1 the model names the pair {A, B} of signal
tokens perfectly, and "in almost all runs" the two heads rank the signal tokens in opposite
QK preference orders. Every quantity here is computed with numpy from W_E, W_Q, W_K, W_V, W_O,
W_U (TransformerLens names), never from the training code.

The task (`headmovies.tasks.ov_coherent`): tokens 0 = read-off, 1-4 = signal,
5-11 = noise; a sequence of length L holds A, B (uniform on 1-4, independent), L-3 uniform noise
tokens and the read-off last; 10 classes (A, B) with A <= B. The read-off query sees every token
and no positions, so its output depends only on the key-token counts: the whole distribution is
the finite set of (class, noise multiset) cases returned by `task_cases`, each with its exact
probability. Accuracies below are exact expectations over the task distribution.

Model at the read-off: logits = W_E[0] W_U + sum_h z_h W_O[h] W_U, z_h = sum_b att_h[b] W_E[b] W_V[h],
att_h = softmax over the keys of the read-off's QK row M_h[0, :] (docs/math.md, "QK and OV circuits";
render.core.circuits).
"Ablating" a head removes its term z_h W_O[h] W_U (zero ablation).

`analyse` returns the typed result (`Analysis`, one `HeadResult` a head) that the report, the
figures and a sweep's row read; `Analysis.to_dict()` is the JSON form written to analysis.json
and summary.json (the same keys, in the same order, as the fields).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from headmovies.errors import UserError
from headmovies.render.core.circuits import ov_circuit, qk_circuit
from headmovies.tasks.ov_coherent import (
    CLASSES,
    D_VOCAB,
    EXPERIMENTS,
    N_CLASSES,
    NOISE,
    READOFF,
    SIGNAL,
    WEIGHT_NAMES,
    Cases,
)


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


EXPERIMENT = EXPERIMENTS[0]


def check_weights(weights: dict[str, np.ndarray]) -> None:
    """Raise UserError unless the weights have this task's shapes (12 tokens, 10 classes)."""
    missing = [n for n in WEIGHT_NAMES if n not in weights]
    if missing:
        raise UserError(f"weights {missing} are missing; an {EXPERIMENT} run stores {WEIGHT_NAMES}")
    if weights["W_E"].shape[0] != D_VOCAB or weights["W_U"].shape[-1] != N_CLASSES:
        raise UserError(
            f"W_E {weights['W_E'].shape} / W_U {weights['W_U'].shape} do not fit "
            f"{D_VOCAB} tokens and {N_CLASSES} classes: not an {EXPERIMENT} run"
        )


def readoff_qk(weights: dict[str, np.ndarray]) -> np.ndarray:
    """The read-off's QK row M_h[0, :] [n_heads, 12]: attention score onto each key token,
    scaled as the layer scales it (docs/math.md, "QK and OV circuits"). Only differences within a row matter."""
    return qk_circuit(weights["W_E"], weights["W_Q"], weights["W_K"])[..., READOFF, :]


def ov_tables(weights: dict[str, np.ndarray], centred: bool = True) -> np.ndarray:
    """OV table [n_heads, 10 classes, 12 key tokens]: logit added to class c per unit of attention
    on token b, R_h[c, b] (docs/math.md, "QK and OV circuits"); centred over classes (the output
    softmax ignores the mean)."""
    R = ov_circuit(weights["W_E"], weights["W_V"], weights["W_O"], weights["W_U"])
    return R - R.mean(axis=-2, keepdims=True) if centred else R


def direct_logits(weights: dict[str, np.ndarray]) -> np.ndarray:
    """Logits the read-off's own residual adds, W_E[0] W_U [10]."""
    return np.asarray(weights["W_E"], np.float64)[READOFF] @ np.asarray(weights["W_U"], np.float64)


def attention(weights: dict[str, np.ndarray], counts: np.ndarray) -> np.ndarray:
    """Attention of the read-off on each key *token* [N, n_heads, 12] (a token that occurs k
    times gets the sum over its k positions), from key counts [N, 12]."""
    s = readoff_qk(weights)  # (H, V)
    w = counts[:, None, :] * np.exp(s - s.max(-1, keepdims=True))  # (N, H, V)
    return w / w.sum(-1, keepdims=True)


def head_logits(weights: dict[str, np.ndarray], counts: np.ndarray) -> np.ndarray:
    """Each head's contribution to the logits [N, n_heads, 10] (uncentred)."""
    R = ov_tables(weights, centred=False)  # (H, C, V)
    return np.einsum("nhv,hcv->nhc", attention(weights, counts), R)


def logits(weights: dict[str, np.ndarray], counts: np.ndarray, ablate: tuple[int, ...] = ()) -> np.ndarray:
    """Read-off logits [N, 10] for key counts [N, 12], with the heads in `ablate` removed."""
    per_head = head_logits(weights, counts)
    keep = [h for h in range(per_head.shape[1]) if h not in ablate]
    return direct_logits(weights) + per_head[:, keep].sum(1)


def accuracy(pred: np.ndarray, cases: Cases) -> tuple[float, np.ndarray]:
    """(overall accuracy, per-class accuracy [10]) of predicted classes [N], probability-weighted."""
    correct = (pred == cases.labels) * cases.probs
    mass = np.bincount(cases.labels, cases.probs, N_CLASSES)
    per_class = np.bincount(cases.labels, correct, N_CLASSES) / np.where(mass > 0, mass, 1)
    return float(correct.sum() / cases.probs.sum()), per_class


def preference_ordering(qk_row: np.ndarray) -> tuple[int, ...]:
    """Signal tokens 1-4 by descending QK score from the read-off (the head's "preference
    ordering", source 004). qk_row [12]."""
    sig = np.array(SIGNAL)
    return tuple(int(t) for t in sig[np.argsort(-qk_row[sig], kind="stable")])


def are_opposite(order_a: tuple[int, ...], order_b: tuple[int, ...]) -> bool:
    """True iff one head ranks the signal tokens in exactly the reverse order of the other."""
    return tuple(order_a) == tuple(reversed(order_b))


def kendall_tau(qk_a: np.ndarray, qk_b: np.ndarray) -> float:
    """Kendall's tau between two heads' QK scores on the signal tokens 1-4 (rows [12]): +1 same
    ordering, -1 exactly opposite; (concordant - discordant pairs) / 6, a tied pair counts 0."""
    sig = list(SIGNAL)
    a, b = qk_a[sig], qk_b[sig]
    i, j = np.triu_indices(len(sig), 1)
    return float(np.sum(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])) / len(i))


def format_ordering(qk_row: np.ndarray) -> str:
    """E.g. '1 > 2 > 3 > 4 > noise' with 'noise' placed by the mean noise score."""
    order = preference_ordering(qk_row)
    noise = qk_row[list(NOISE)].mean()
    parts, placed = [], False
    for t in order:
        if not placed and noise > qk_row[t]:
            parts.append("noise")
            placed = True
        parts.append(str(t))
    if not placed:
        parts.append("noise")
    return " > ".join(parts)


def attention_by_pair(weights: dict[str, np.ndarray], cases: Cases) -> np.ndarray:
    """Mean attention of the read-off given the pair present [n_heads, 4, 4]: entry [h, a-1, b-1]
    is head h's attention on token a (all its copies) when the pair is {a, b}; for a == b it is
    the attention on both copies. Averaged over the noise with its probabilities."""
    att = attention(weights, cases.counts)  # (N, H, V)
    H = att.shape[1]
    out = np.zeros((H, len(SIGNAL), len(SIGNAL)))
    for c, (a, b) in enumerate(CLASSES):
        sel = cases.labels == c
        p = cases.probs[sel] / cases.probs[sel].sum()
        mean = np.einsum("n,nhv->hv", p, att[sel])  # (H, V)
        out[:, a - 1, b - 1] = mean[:, a]
        out[:, b - 1, a - 1] = mean[:, b]
    return out


def class_contributions(weights: dict[str, np.ndarray], cases: Cases) -> np.ndarray:
    """Each head's mean contribution to the correct class's logit [10 classes, n_heads], over the
    sequences of that class; logits centred over classes per head (gauge). Point c of the plane
    figure is (head 1, head 2) of row c: both > 0 is constructive interference."""
    per_head = head_logits(weights, cases.counts)  # (N, H, C)
    per_head = per_head - per_head.mean(-1, keepdims=True)
    own = per_head[np.arange(len(cases)), :, cases.labels]  # (N, H)
    out = np.zeros((N_CLASSES, per_head.shape[1]))
    for c in range(N_CLASSES):
        sel = cases.labels == c
        out[c] = cases.probs[sel] @ own[sel] / cases.probs[sel].sum()
    return out


def head_outputs(weights: dict[str, np.ndarray], counts: np.ndarray) -> np.ndarray:
    """What each head writes before W_O, z [N, n_heads, d_head] (for d_head 1 a scalar per head)."""
    v = np.einsum("pd,hde->hpe", np.asarray(weights["W_E"], np.float64), np.asarray(weights["W_V"], np.float64))
    return np.einsum("nhv,hve->nhe", attention(weights, counts), v)


def readout_directions(weights: dict[str, np.ndarray]) -> np.ndarray:
    """W_O[h] W_U [n_heads, d_head, 10]: logits per unit of each head's output z."""
    return np.asarray(weights["W_O"], np.float64) @ np.asarray(weights["W_U"], np.float64)


def hard_attention_predictions(
    weights: dict[str, np.ndarray], cases: Cases, ablate: tuple[int, ...] = ()
) -> np.ndarray:
    """Predicted classes [N] if every head attended only to the present token it ranks highest
    (the source's "all or nothing" attention): logits = W_E[0] W_U + sum_h R_h[:, top_h]. Compared
    with the model's predictions, this tells how far orderings + OV tables explain the model."""
    s = readoff_qk(weights)  # (H, V)
    present = cases.counts[:, None, :] > 0  # (N, 1, V)
    top = np.where(present, s[None], -np.inf).argmax(-1)  # (N, H)
    R = ov_tables(weights, centred=False)  # (H, C, V)
    out = np.broadcast_to(direct_logits(weights), (len(cases), N_CLASSES)).copy()
    for h in range(s.shape[0]):
        if h not in ablate:
            out += R[h][:, top[:, h]].T
    return out.argmax(-1)


def analyse(weights: dict[str, np.ndarray], cases: Cases) -> Analysis:
    """Everything the report and the figures show for one snapshot (`Analysis`):
    accuracy (overall, per class), per head the read-off QK row, ordering (tuple and words) and
    accuracy with that head ablated, whether the first two heads' orderings are opposite, the
    attention by pair, OV tables on the signal tokens, class contributions, and the agreement of
    the hard-attention explanation with the model."""
    check_weights(weights)
    H = weights["W_Q"].shape[0]
    pred = logits(weights, cases.counts).argmax(-1)
    acc, per_class = accuracy(pred, cases)
    qk = readoff_qk(weights)
    R = ov_tables(weights)
    heads = []
    for h in range(H):
        abl_acc, abl_class = accuracy(logits(weights, cases.counts, ablate=(h,)).argmax(-1), cases)
        heads.append(
            HeadResult(
                head=h + 1,
                qk_readoff=qk[h].tolist(),
                qk_signal_minus_noise=(qk[h, list(SIGNAL)] - qk[h, list(NOISE)].mean()).tolist(),
                ordering=list(preference_ordering(qk[h])),
                ordering_text=format_ordering(qk[h]),
                ablated_acc=abl_acc,
                ablated_class_acc=abl_class.tolist(),
                ov_signal=R[h][:, list(SIGNAL)].tolist(),
            )
        )
    hard = hard_attention_predictions(weights, cases)
    agree = float(((hard == pred) * cases.probs).sum() / cases.probs.sum())
    return Analysis(
        acc=acc,
        class_acc=per_class.tolist(),
        worst_class_acc=float(per_class.min()),
        exact=bool(cases.exact),
        n_heads=H,
        d_head=int(weights["W_Q"].shape[-1]),
        heads=heads,
        opposite=are_opposite(tuple(heads[0].ordering), tuple(heads[1].ordering)) if H >= 2 else None,
        kendall_tau=kendall_tau(qk[0], qk[1]) if H >= 2 else None,
        attention_by_pair=attention_by_pair(weights, cases).tolist(),
        class_contributions=class_contributions(weights, cases).tolist(),
        hard_attention_agreement=agree,
        hard_attention_acc=accuracy(hard, cases)[0],
    )


def qk_trajectory(run, chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(epochs [T], read-off QK rows [T, n_heads, 12]) over every snapshot of `run`
    (a `runfile.reader.Run`), read chunk by chunk."""
    epochs, rows = [], []
    for epoch, w in run.iter_weights(["W_E", "W_Q", "W_K"], chunk=chunk):
        epochs.append(epoch)
        rows.append(readoff_qk(w))
    return np.array(epochs, np.int64), np.array(rows)


def orderings_settle_epoch(epochs: np.ndarray, qk: np.ndarray) -> int | None:
    """The epoch of the first snapshot from which the first two heads' preference orderings
    (`preference_ordering`, both heads together) never change again, i.e. equal the final
    snapshot's, from epochs [T] and read-off QK rows qk [T, n_heads, 12]; None with one head.
    Its resolution is the snapshot schedule's (docs/math.md, "Snapshot schedule")."""
    if qk.shape[1] < 2 or not len(epochs):
        return None
    pairs = [(preference_ordering(q[0]), preference_ordering(q[1])) for q in qk]
    same = np.array([p == pairs[-1] for p in pairs])
    changed = np.flatnonzero(~same)
    return int(epochs[changed[-1] + 1]) if len(changed) else int(epochs[0])


def run_cases(run) -> Cases:
    """The task distribution of `run` (a reader.Run): its seq_len and signal_weights (the
    defaults for runs that do not store them), exact or the seeded sample (seed 0)."""
    from headmovies.tasks.ov_coherent import UNIFORM_SIGNAL, task_cases

    cfg = run.config
    return task_cases(int(cfg.get("seq_len", 10)), signal_weights=str(cfg.get("signal_weights", UNIFORM_SIGNAL)))


def require_run(run) -> None:
    """Raise UserError unless `run` (a reader.Run) is an ov-coherent run with the weights needed."""
    if run.experiment != EXPERIMENT:
        raise UserError(
            f"{run.path} is a run of {run.experiment!r}, not {EXPERIMENT!r}; "
            f"train one with `headmovies train {EXPERIMENT}`"
        )
    run.require(*WEIGHT_NAMES)

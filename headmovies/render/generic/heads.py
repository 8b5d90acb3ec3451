"""The heads of any run file: its attention layers and each head's centred token-space circuits,
snapshot by snapshot (a recorded run, docs/recording.md, or a built-in one).

Layers: `blocks.{l}.attn.W_Q` ... (TransformerLens names, as the Recorder and the induction
experiment store them) or a single layer's `W_Q` ... at the top level (the orbit experiment).
Circuits (render/core/circuits.py, docs/math.md): QK M_h = W_E W_Q[h] W_K[h]^T W_E^T / sqrt(d_head)
[n, n] and OV R_h = (W_E W_V[h] W_O[h] W_U)^T [n_out, n], centred as the softmaxes ignore, on
the first `tokens` token values (and output classes) only. Without W_E, tokens are the
residual stream's basis vectors (W_E = identity); without W_U, OV is read off in the residual
stream (W_U = identity).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from headmovies.errors import RunFileError, warn
from headmovies.render.core.circuits import centre_ov, centre_qk, ov_circuit, qk_circuit
from headmovies.runfile.reader import Run

HEAD_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")
MAX_TOKENS = 128  # token values (and output classes) of the circuits drawn: memory stays bounded


@dataclass(frozen=True)
class Heads:
    """The layers of a run. prefixes: per layer the weight-name prefix ('blocks.0.attn.' or '');
    n_heads: per layer; labels: one per head of all layers ('L0H3'); tokens, outputs: the
    circuits' sizes (n, n_out); group_order: p when the tokens carry Z_p (the run's
    `group_order` attribute, or n of a built-in symmetric run), else None."""

    prefixes: tuple[str, ...]
    n_heads: tuple[int, ...]
    tokens: int
    outputs: int
    group_order: int | None

    @property
    def labels(self) -> list[str]:
        return [f"L{layer}H{h}" for layer, n in enumerate(self.n_heads) for h in range(n)]

    @property
    def total(self) -> int:
        return sum(self.n_heads)

    def names(self) -> list[str]:
        """The weights read per snapshot."""
        extra = [n for n in ("W_E", "W_U") if n in self.stored]
        return extra + [p + k for p in self.prefixes for k in HEAD_WEIGHTS]

    stored: tuple[str, ...] = ()


def missing_embeddings(names: set[str] | dict, p: int) -> str:
    """'' when the weights `names` include W_E and W_U; else what drawing the group Z_p without
    them means (the identity stands in: the residual stream's basis vectors for the tokens or
    the output classes), worded to follow a run's name."""
    missing = [k for k in ("W_E", "W_U") if k not in names]
    if not missing:
        return ""
    stand_in = " and ".join(w for k, w in (("W_E", "tokens"), ("W_U", "output classes")) if k in missing)
    return (
        f"stores no {' or '.join(missing)}: Z_{p} is laid on the residual stream's first {p} basis vectors "
        f"in place of {stand_in}, so its planes may mean little (docs/recording.md, 'What is recorded')"
    )


def find_heads(run: Run, group_order: int | None = None, max_tokens: int = MAX_TOKENS) -> Heads:
    """The heads of `run` (`group_order` overrides the run's own). RunFileError when it holds
    no attention layer's W_Q, W_K, W_V, W_O."""
    names = set(run.weight_names)
    prefixes: list[str] = []
    while all(f"blocks.{len(prefixes)}.attn.{k}" in names for k in HEAD_WEIGHTS):
        prefixes.append(f"blocks.{len(prefixes)}.attn.")
    if not prefixes and all(k in names for k in HEAD_WEIGHTS):
        prefixes = [""]
    if not prefixes:
        raise RunFileError(
            f"{run.path} holds no attention layer (W_Q, W_K, W_V, W_O or blocks.0.attn.W_Q ...); "
            f"it holds {sorted(names)[:8]}"
        )
    attrs = run.attrs()
    p = group_order or attrs.get("group_order") or (run.n if run.experiment == "orbits" else None)
    d_model = run.shape(prefixes[0] + "W_Q")[1]
    n = run.shape("W_E")[0] if "W_E" in names else d_model
    n_out = run.shape("W_U")[1] if "W_U" in names else d_model
    if p is not None:
        p = int(p)
        if p > min(n, n_out):
            raise RunFileError(f"group order {p} is more than the run's {min(n, n_out)} token values")
        if problem := missing_embeddings(names, p):
            warn(f"{run.path.name} {problem}")
        n = n_out = p  # the group's tokens 0..p-1 (others, such as '=', left out)
    stored = tuple(k for k in ("W_E", "W_U") if k in names)
    return Heads(
        tuple(prefixes),
        tuple(run.shape(pre + "W_Q")[0] for pre in prefixes),
        min(n, max_tokens),
        min(n_out, max_tokens),
        p,
        stored,
    )


def head_circuits(heads: Heads, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{'qk': [H_total, n, n], 'ov': [H_total, n_out, n]}: every head's centred circuits (float64)."""
    qk, ov = [], []
    for pre in heads.prefixes:
        W_Q = weights[pre + "W_Q"]
        d_model = W_Q.shape[1]
        E = weights["W_E"][: heads.tokens] if "W_E" in weights else np.eye(d_model)[: heads.tokens]
        U = weights["W_U"][:, : heads.outputs] if "W_U" in weights else np.eye(d_model)[:, : heads.outputs]
        qk.append(centre_qk(qk_circuit(E, W_Q, weights[pre + "W_K"])))
        ov.append(centre_ov(ov_circuit(E, weights[pre + "W_V"], weights[pre + "W_O"], U)))
    return {"qk": np.concatenate(qk), "ov": np.concatenate(ov)}


def iter_circuits(run: Run, heads: Heads, indices: np.ndarray | None = None) -> Iterator[tuple[int, dict]]:
    """(epoch, `head_circuits`) for each snapshot (or the given indices), read in chunks."""
    for epoch, weights in run.iter_weights(heads.names(), indices=indices):
        yield epoch, head_circuits(heads, weights)

"""Adapters: every attention layer's per-head weights of a user's PyTorch model, in the run
file's names and shapes (docs/run-file.md; TransformerLens's conventions):

    blocks.{l}.attn.W_Q, W_K, W_V   [n_heads, d_model, d_head]   (q = x W_Q[h], per head)
    blocks.{l}.attn.W_O             [n_heads, d_head, d_model]   (out = sum_h z_h W_O[h])
    W_E [d_vocab, d_model], W_U [d_model, d_vocab_out], W_pos [n_ctx, d_model]   (when found)

Layers are numbered in the order the model's modules are listed. What is recognised
(`find_adapter`): a TransformerLens `HookedTransformer` (duck-typed: `model.blocks[i].attn.W_Q`
..., attention-only or with MLPs, grouped-query keys expanded per head as TransformerLens
expands them); `torch.nn.MultiheadAttention` (`in_proj_weight` or separate q/k/v projections,
`out_proj`); a fused `c_attn` with `c_proj` and a head count: nanoGPT's
`CausalSelfAttention` (`nn.Linear`, weight [3 d_model, d_model]) and Hugging Face GPT-2's
`Conv1D` (weight [d_model, 3 d_model], transposed); anything else through a function returning
{layer: {"W_Q": ..., "W_K": ..., "W_V": ..., "W_O": ...}} plus optional "W_E", "W_U".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from headmovies.errors import ModelError

TOKENS = 1024  # token values of W_E (rows) and W_U (columns) stored by default: renderers draw 128

HEAD_WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")
Weights = dict[str, np.ndarray]


def _np(t: Any) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().to("cpu", torch.float32).numpy()
    return np.array(t, dtype=np.float32)  # a copy: later training steps do not change it


def _split_heads(W_in: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[n_heads*d_head, d_in] (a Linear's weight, rows = outputs) -> [n_heads, d_in, d_head]."""
    out, d_in = W_in.shape
    return W_in.reshape(n_heads, out // n_heads, d_in).transpose(1, 2)


def _split_out(W_out: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[d_model, n_heads*d_head] (out_proj's weight) -> W_O [n_heads, d_head, d_model]."""
    d_model, inner = W_out.shape
    return W_out.T.reshape(n_heads, inner // n_heads, d_model)


def _heads_tl(attn: nn.Module) -> dict[str, torch.Tensor]:
    return {k: getattr(attn, k) for k in HEAD_WEIGHTS}


def _heads_mha(attn: nn.MultiheadAttention) -> dict[str, torch.Tensor]:
    H, E = attn.num_heads, attn.embed_dim
    if attn.in_proj_weight is not None:
        Wq, Wk, Wv = attn.in_proj_weight[:E], attn.in_proj_weight[E : 2 * E], attn.in_proj_weight[2 * E :]
    else:
        Wq, Wk, Wv = attn.q_proj_weight, attn.k_proj_weight, attn.v_proj_weight
    return {
        "W_Q": _split_heads(Wq, H),
        "W_K": _split_heads(Wk, H),
        "W_V": _split_heads(Wv, H),
        "W_O": _split_out(attn.out_proj.weight, H),
    }


def _n_heads(attn: nn.Module) -> int | None:
    for name in ("n_head", "num_heads", "n_heads"):
        value = getattr(attn, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _heads_fused(attn: Any) -> dict[str, torch.Tensor]:
    H = _n_heads(attn)
    assert H is not None
    W: torch.Tensor = attn.c_attn.weight
    P: torch.Tensor = attn.c_proj.weight
    if isinstance(attn.c_attn, nn.Linear):  # nanoGPT: y = x W^T, W [3E, E]
        E = W.shape[1]
        Wq, Wk, Wv = W[:E], W[E : 2 * E], W[2 * E :]
        return {
            "W_Q": _split_heads(Wq, H),
            "W_K": _split_heads(Wk, H),
            "W_V": _split_heads(Wv, H),
            "W_O": _split_out(P, H),
        }
    E = W.shape[0]  # GPT-2's Conv1D: y = x W, W [E, 3E]
    Wq, Wk, Wv = W[:, :E], W[:, E : 2 * E], W[:, 2 * E :]
    return {
        "W_Q": _split_heads(Wq.T, H),
        "W_K": _split_heads(Wk.T, H),
        "W_V": _split_heads(Wv.T, H),
        "W_O": _split_out(P.T, H),
    }


def _kind(module: nn.Module) -> tuple[str, Callable[[Any], dict[str, torch.Tensor]]] | None:
    """What kind of attention `module` is, with its per-head reader; None if it is none."""
    if isinstance(module, nn.MultiheadAttention):
        return "torch.nn.MultiheadAttention", _heads_mha
    tensors = [getattr(module, k, None) for k in HEAD_WEIGHTS]
    if all(isinstance(t, torch.Tensor) and t.ndim == 3 for t in tensors):
        return "TransformerLens attention", _heads_tl
    c_attn, c_proj = getattr(module, "c_attn", None), getattr(module, "c_proj", None)
    if c_attn is not None and c_proj is not None and _n_heads(module) and hasattr(c_attn, "weight"):
        if isinstance(c_attn, nn.Linear):
            return "nanoGPT CausalSelfAttention (fused c_attn)", _heads_fused
        return "GPT-2 attention (Conv1D c_attn)", _heads_fused
    return None


class Adapter:
    """Reads one model's head weights. `read()`: the weights now, by run-file name (float32
    copies; ModelError when an attention module found at the start was replaced since, or the
    weights no longer fit together); `description`: what was found (e.g. "TransformerLens attention: 2 layers x 4
    heads"); `layers`: each layer's module name; `modules`: the attention modules in layer
    order (empty for a weights function), where the probe reads their patterns."""

    def __init__(
        self, read: Callable[[], Weights], description: str, layers: list[str], modules: tuple[nn.Module, ...] = ()
    ):
        self.read, self.description, self.layers = read, description, layers
        self.modules = modules


def _embeddings(model: nn.Module) -> Callable[[], dict[str, torch.Tensor]]:
    """W_E, W_U and W_pos of the model, as far as found (TransformerLens attributes, else
    nanoGPT's and GPT-2's wte, wpe and lm_head)."""

    def read() -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for name in ("W_E", "W_U", "W_pos"):
            value = getattr(model, name, None)
            if isinstance(value, torch.Tensor):
                out[name] = value
        pos = getattr(getattr(model, "pos_embed", None), "W_pos", None)  # TransformerBridge's PosEmbedBridge
        if isinstance(pos, torch.Tensor):
            out.setdefault("W_pos", pos)
        modules = dict(model.named_modules())
        for key, module in modules.items():
            last = key.rsplit(".", 1)[-1]
            if isinstance(module, nn.Embedding) and last in ("wte", "tok_embeddings", "embed_tokens"):
                out.setdefault("W_E", module.weight)
            elif isinstance(module, nn.Embedding) and last == "wpe":
                out.setdefault("W_pos", module.weight)
            elif isinstance(module, nn.Linear) and last in ("lm_head", "unembed"):
                out.setdefault("W_U", module.weight.T)
        return out

    return read


def _check(weights: Weights, where: str) -> Weights:
    """ModelError unless each layer's W_Q, W_K, W_V [H, d_model, d_head] and W_O [H, d_head,
    d_model] agree, and W_E, W_U (when given) fit d_model."""
    d_models = set()
    for key, w in weights.items():
        if key.endswith(("W_Q", "W_K", "W_V")) and w.ndim == 3:
            d_models.add(w.shape[1])
    for key, w in weights.items():
        layer = key.rsplit(".", 1)[0]
        name = key.rsplit(".", 1)[-1]
        if name in HEAD_WEIGHTS:
            q = weights[f"{layer}.W_Q"]
            good = w.ndim == 3 and (
                w.shape == q.shape if name != "W_O" else w.shape == (q.shape[0], q.shape[2], q.shape[1])
            )
            if q.ndim != 3 or not good:
                raise ModelError(
                    f"{where}: {key} has shape {list(w.shape)}; expected [n_heads, d_model, d_head] for W_Q, W_K, "
                    f"W_V and [n_heads, d_head, d_model] for W_O (W_Q: {list(q.shape)})"
                )
    for name, axis in (("W_E", 1), ("W_U", 0)):
        if name in weights and (weights[name].ndim != 2 or weights[name].shape[axis] not in d_models):
            raise ModelError(
                f"{where}: {name} has shape {list(weights[name].shape)}, which does not fit d_model {sorted(d_models)}"
            )
    return weights


def from_function(fn: Callable[[], dict]) -> Adapter:
    """An adapter for a user function returning {layer: {"W_Q", "W_K", "W_V", "W_O"}} (layer: an
    int or a name; numpy arrays or tensors, shapes as above) plus optional "W_E", "W_U", "W_pos"
    at the top level. ModelError for anything else."""

    def read() -> Weights:
        found = fn()
        if not isinstance(found, dict):
            raise ModelError(f"the weights function returned {type(found).__name__}, not a dict of layers")
        out: Weights = {}
        layers = [k for k in found if k not in ("W_E", "W_U", "W_pos")]
        if not layers:
            raise ModelError("the weights function returned no layer: expected {layer: {'W_Q': ..., ...}}")
        for i, layer in enumerate(layers):
            heads = found[layer]
            missing = [k for k in HEAD_WEIGHTS if not isinstance(heads, dict) or k not in heads]
            if missing:
                raise ModelError(f"the weights function's layer {layer!r} lacks {missing}")
            for k in HEAD_WEIGHTS:
                out[f"blocks.{i}.attn.{k}"] = _np(heads[k])
        for k in ("W_E", "W_U", "W_pos"):
            if found.get(k) is not None:
                out[k] = _np(found[k])
        return _check(out, "the weights function")

    return Adapter(read, "a weights function", [])


def find_adapter(model: Any) -> Adapter:
    """The adapter of `model`: a callable that is not a torch module is a weights function
    (`from_function`); a module is searched for attention layers (module docstring). ModelError,
    one line naming what the model holds, when it has none."""
    if isinstance(model, type):  # a class is callable, but it is no weights function
        raise ModelError(f"cannot record the class {model.__name__}: give a model built from it, {model.__name__}(...)")
    if not isinstance(model, nn.Module):
        if callable(model):
            return from_function(model)
        raise ModelError(f"cannot record a {type(model).__name__}: give a torch.nn.Module or a weights function")
    found: list[tuple[str, nn.Module, str, Callable]] = []
    skip: tuple[str, ...] = ()
    for name, module in model.named_modules():
        if skip and name.startswith(skip):
            continue  # inside an attention layer already found (MultiheadAttention's out_proj, ...)
        kind = _kind(module)
        if kind is not None:
            found.append((name, module, *kind))
            skip = (*skip, f"{name}.") if name else ("",)
    if not found:
        counts = Counter(type(m).__name__ for m in model.modules())
        held = ", ".join(f"{k} x{v}" for k, v in counts.most_common(8))
        raise ModelError(
            f"no attention layer found in {type(model).__name__} (it holds {held}); the adapters know "
            "TransformerLens blocks[i].attn.W_Q..., torch.nn.MultiheadAttention and a fused c_attn with c_proj "
            "and n_head (nanoGPT, GPT-2); pass a weights function returning {layer: {'W_Q': ..., ...}} instead"
        )
    embeddings = _embeddings(model)
    kinds = sorted({kind for *_, kind, _ in found})
    n_heads = {int(reader(module)["W_Q"].shape[0]) for _, module, _, reader in found}
    heads = "/".join(str(h) for h in sorted(n_heads))
    description = f"{', '.join(kinds)}: {len(found)} layer{'s' if len(found) > 1 else ''} x {heads} heads"

    @torch.no_grad()
    def read() -> Weights:
        out: Weights = {}
        for name, module, _, _ in found:  # a layer replaced since: its old module trains no more
            try:
                now = model.get_submodule(name) if name else model
            except AttributeError:
                now = None
            if now is not module:
                raise ModelError(
                    f"{type(model).__name__}.{name} was replaced by another module ({type(now).__name__}) since the "
                    "Recorder found it: the recording would go on reading the detached one; record the changed "
                    "model into a new file, or put the original module back and resume=True"
                )
        for i, (_, module, _, reader) in enumerate(found):
            for k, w in reader(module).items():
                out[f"blocks.{i}.attn.{k}"] = _np(w)
        for k, w in embeddings().items():
            out[k] = _np(w)
        return _check(out, type(model).__name__)

    return Adapter(read, description, [name for name, *_ in found], tuple(module for _, module, *_ in found))


def keep_tokens(weights: dict[str, np.ndarray], tokens: int) -> dict[str, np.ndarray]:
    """`weights` with W_E [d_vocab, d_model] cut to its first `tokens` rows and W_U
    [d_model, d_vocab_out] to its first `tokens` columns (the token values and output classes
    the circuits are drawn on); the rest unchanged. A 50,304-token vocabulary at d_model 256 is
    52 MB a snapshot per matrix whole, 1 MB cut to 1,024 tokens."""
    out = dict(weights)
    if "W_E" in out:
        out["W_E"] = out["W_E"][:tokens]
    if "W_U" in out:
        out["W_U"] = out["W_U"][:, :tokens]
    return out

"""The probe: run a model on a fixed batch of tokens at a snapshot and read every head's
attention pattern, without changing its training by one bit.

`Probe.run()` puts the model in eval mode under `torch.no_grad()`, calls it on the probe tokens
with hooks installed only for that call, and restores each module's training flag and every
RNG state (python `random`, numpy's global RNG, torch's CPU and CUDA generators), so a loop
trains to the same bits with and without it (tests/integration/test_probe.py).

Where each attention layer's pattern [batch, head, query, key] comes from:

- TransformerLens (`attn.hook_pattern`, a HookPoint): its output, TransformerLens's own pattern;
- `torch.nn.MultiheadAttention`: the module called again on its captured inputs with
  `need_weights=True, average_attn_weights=False` (torch's own per-head weights);
- nanoGPT `CausalSelfAttention` and Hugging Face GPT-2 attention (fused kernels, no pattern):
  recomputed from the captured attention input x [B, T, d_model] through the layer's own
  `c_attn` (W_Q, W_K and their biases): softmax(causal(q k^T / sqrt(d_head)));
- a module whose forward takes `return_pattern=True` and then returns (output, pattern) (the
  built-in induction models): called again so.

Scores from the patterns are `head_scores` (TransformerLens's detectors).
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from headmovies.errors import ModelError
from headmovies.train.head_scores import SCORES, detection_patterns, head_scores, in_context_score

PATTERN_SEQUENCES = 2  # probe sequences whose full patterns are stored (all are scored)
MAX_POSITIONS = 64  # the default probe's length: 2 x 32 tokens, or the model's context if shorter
DEFAULT_BATCH = 8  # the built-in trainers' probe sequences (the Recorder's default probe: record/probing.py)


def _fused_pattern(module: Any, x: torch.Tensor, qkv: torch.Tensor | None = None) -> torch.Tensor:
    """nanoGPT / GPT-2 attention's pattern [B, H, T, T] from its input x [B, T, d_model]; `qkv`:
    `module.c_attn(x)` [B, T, 3 d_model] when the forward already computed it (else computed here)."""
    H = next(
        getattr(module, k) for k in ("n_head", "num_heads", "n_heads") if isinstance(getattr(module, k, None), int)
    )
    B, T, C = x.shape
    if qkv is None or tuple(qkv.shape) != (B, T, 3 * C):
        qkv = module.c_attn(x)
    q, k, _ = qkv.split(C, dim=2)  # (B, T, C) each, biases included
    q = q.view(B, T, H, C // H).transpose(1, 2)  # (B, nh, T, hs)
    k = k.view(B, T, H, C // H).transpose(1, 2)
    att = q @ k.transpose(-2, -1)
    if getattr(module, "scale_attn_weights", True):
        att = att / math.sqrt(C // H)
    if getattr(module, "scale_attn_by_inverse_layer_idx", False):
        att = att / float(getattr(module, "layer_idx", 0) + 1)
    causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    return att.masked_fill(~causal, float("-inf")).softmax(dim=-1)


_MHA_ARGS = (
    "query",
    "key",
    "value",
    "key_padding_mask",
    "need_weights",
    "attn_mask",
    "average_attn_weights",
    "is_causal",
)


class _Capture:
    """Hooks on one attention layer that keep its pattern of the probe's forward."""

    def __init__(self, module: nn.Module):
        self.module, self.inside = module, False
        self.pattern: torch.Tensor | None = None
        self.x: torch.Tensor | None = None  # a fused layer's input and c_attn output, within its forward
        self.qkv: torch.Tensor | None = None
        self.handles: list[Any] = []

    def install(self) -> None:
        m = self.module
        hook_pattern = getattr(m, "hook_pattern", None)
        if isinstance(hook_pattern, nn.Module):
            self.handles.append(hook_pattern.register_forward_hook(self._keep_output))
        elif isinstance(m, nn.MultiheadAttention):
            self.handles.append(m.register_forward_hook(self._mha, with_kwargs=True))
        elif "return_pattern" in inspect.signature(m.forward).parameters:
            self.handles.append(m.register_forward_hook(self._own, with_kwargs=True))
        elif hasattr(m, "c_attn"):
            # The layer's input, then its own c_attn output (q, k, v: not computed a second time).
            self.handles.append(m.register_forward_pre_hook(self._fused_input, with_kwargs=True))
            if isinstance(m.c_attn, nn.Module):
                self.handles.append(m.c_attn.register_forward_hook(self._fused_qkv))
            self.handles.append(m.register_forward_hook(self._fused, with_kwargs=True))
        else:
            raise ModelError(f"the probe cannot read attention patterns of {type(m).__name__}")

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    @staticmethod
    def _input(args: tuple, kwargs: dict) -> torch.Tensor:
        x = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
        if not isinstance(x, torch.Tensor):
            raise ModelError("the probe found no input tensor of an attention layer")
        return x

    def _keep_output(self, module, args, output) -> None:
        self.pattern = output.detach()

    def _fused_input(self, module, args, kwargs) -> None:
        self.x, self.qkv, self.inside = self._input(args, kwargs), None, True

    def _fused_qkv(self, module, args, output) -> None:
        if self.inside and self.qkv is None and isinstance(output, torch.Tensor):
            self.qkv = output

    def _fused(self, module, args, kwargs, output) -> None:
        self.inside = False
        if self.x is not None:
            self.pattern = _fused_pattern(module, self.x, self.qkv)
        self.x = self.qkv = None

    def _own(self, module, args, kwargs, output) -> None:
        if self.inside:
            return
        self.inside = True
        try:
            self.pattern = module(*args, **(kwargs | {"return_pattern": True}))[1].detach()
        finally:
            self.inside = False

    def _mha(self, module, args, kwargs, output) -> None:
        if self.inside:
            return
        call = dict(zip(_MHA_ARGS, args, strict=False)) | kwargs
        call.update(need_weights=True, average_attn_weights=False)
        self.inside = True
        try:
            _, weights = module(**call)
        finally:
            self.inside = False
        self.pattern = weights.detach()


def _logits(output: Any) -> torch.Tensor | None:
    """The logits a forward returned: a tensor, the first tensor of a tuple, `["logits"]` or `.logits`."""
    if isinstance(output, (tuple, list)):
        output = next((o for o in output if isinstance(o, torch.Tensor)), None)
    elif isinstance(output, dict):
        output = output.get("logits")
    elif not isinstance(output, torch.Tensor):
        output = getattr(output, "logits", None)
    return output if isinstance(output, torch.Tensor) else None


class Probe:
    """A fixed probe batch run through `model` (module docstring).

    attention: the model's attention layers in layer order (the adapter's); tokens: int64
    [B, P] probe sequences (two copies of P/2 tokens for the in-context score); forward:
    `forward(tokens) -> output` (default `model(tokens)`); logits among its output are found
    as `_logits` says, and taken as logits when [B, P, vocab_out] (vocab_out: W_U's columns;
    None: no in-context score). `run()` returns one snapshot's record: "scores/<name>" [L, H] float32
    per score of `head_scores.SCORES`, "patterns" [S, L, H, P, P] float16 (the first S =
    PATTERN_SEQUENCES sequences), "in_context_score" [] float32 (NaN without logits [B, P, V]).
    Layers with fewer heads than the most are NaN-padded."""

    def __init__(
        self,
        model: nn.Module,
        attention: Sequence[nn.Module],
        tokens: np.ndarray,
        forward: Callable[[torch.Tensor], Any] | None = None,
        vocab_out: int | None = None,
    ):
        tokens = np.asarray(tokens)
        if tokens.ndim == 1:
            tokens = tokens[None]
        if tokens.ndim != 2 or tokens.shape[1] < 2 or not np.issubdtype(tokens.dtype, np.integer) or tokens.min() < 0:
            raise ModelError(
                f"a probe is non-negative int tokens [batch, positions], got {tokens.dtype} {list(tokens.shape)}"
            )
        self.model, self.tokens = model, tokens.astype(np.int64)
        self.forward = forward if forward is not None else model
        self.captures = [_Capture(m) for m in attention]
        self.vocab_out = vocab_out
        self._detection: tuple[np.ndarray, dict[str, np.ndarray]] | None = None  # (tokens, their D) once computed

    def run(self) -> dict[str, np.ndarray]:
        """One snapshot's probe record (class docstring); training mode and RNG states as before."""
        modes = [(m, m.training) for m in self.model.modules()]
        states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        try:
            device = next(self.model.parameters()).device
        except StopIteration:
            device = torch.device("cpu")
        try:
            for c in self.captures:
                c.pattern = None
                c.install()
            self.model.eval()
            with torch.no_grad():
                output = self.forward(torch.as_tensor(self.tokens, device=device))
                patterns = [c.pattern for c in self.captures]
        finally:
            for c in self.captures:
                c.remove()
            for m, mode in modes:
                m.training = mode
            random.setstate(states[0])
            np.random.set_state(states[1])
            torch.set_rng_state(states[2])
            if cuda is not None:
                torch.cuda.set_rng_state_all(cuda)
        if any(p is None for p in patterns):
            missing = [i for i, p in enumerate(patterns) if p is None]
            raise ModelError(f"the probe's forward did not run attention layer(s) {missing}")
        return self._record([p for p in patterns if p is not None], _logits(output))

    def _record(self, patterns: list[torch.Tensor], logits: torch.Tensor | None) -> dict[str, np.ndarray]:
        B, P = self.tokens.shape
        H = max(p.shape[1] for p in patterns)
        A = np.full((B, len(patterns), H, P, P), np.nan, np.float32)
        for layer, p in enumerate(patterns):
            A[:, layer, : p.shape[1]] = p.float().cpu().numpy()
        if self._detection is None or self._detection[0] is not self.tokens:  # the tokens are fixed: D is
            self._detection = (self.tokens, detection_patterns(self.tokens))  # computed once, not per snapshot
        scores = head_scores(A, self.tokens, self._detection[1])
        record = {f"scores/{name}": scores[name].astype(np.float32) for name in SCORES}
        record["patterns"] = A[:PATTERN_SEQUENCES].astype(np.float16)
        ics = np.nan
        shape = (B, P, self.vocab_out)
        if logits is not None and tuple(logits.shape) == shape and P % 2 == 0 and P >= 4:
            ics = in_context_score(logits.float().cpu().numpy(), self.tokens)
        record["in_context_score"] = np.array(ics, np.float32)
        return record

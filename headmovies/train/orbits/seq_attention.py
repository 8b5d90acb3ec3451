"""The attention of `losses.seq_eq_loss` on token sequences, from the circuits to the logits, as
one autograd Function (`SeqAttention`) whose backward is written out by hand.

It runs the operations autograd would run for the plain form (index_select, softmax as
e / e.sum(-1), scatter_add per key token, one product with the OV circuit), on the same tensors
in the same memory layouts, so its values and gradients are the plain form's bit for bit
(tests/integration/test_pipeline.py). What it saves: the softmax backward reuses the forward's
attention for e / s (autograd computes it again) and folds two passes; the term's large
tensors (the attention per key token [pB, L, H, n] and its gradient, ~7 MB at the default
shapes, and the scores, attention and their gradients [pB, L, H, L], ~1.8 MB each) live in
buffers reused from step to step, where fresh ones cost a page fault per 4 kB each time (the
allocator hands memory of these sizes back to the system). Times: docs/benchmarks.md.
"""

from __future__ import annotations

import os
import threading

import torch
from torch.autograd.function import once_differentiable

# free buffers by shape, dtype and device; a forward takes those its backward needs and the
# backward gives them back, so that terms in flight together (a batch of runs builds one per
# instance before one backward) each hold their own
_FREE: dict[tuple, list[torch.Tensor]] = {}
_LOCK = threading.Lock()
_KEEP = 4  # free buffers kept per shape ...
_KEEP_BYTES = 256 * 2**20  # ... and in all (the default shapes keep about 14 MB)
_kept = 0  # bytes of the free buffers


def _reset_after_fork() -> None:
    global _LOCK, _kept
    _LOCK, _kept = threading.Lock(), 0
    _FREE.clear()


os.register_at_fork(after_in_child=_reset_after_fork)


def _take(shape: tuple, like: torch.Tensor) -> torch.Tensor:
    """A buffer of `shape` (contents undefined) with like's dtype and device."""
    global _kept
    key = (*shape, like.dtype, like.device)
    with _LOCK:
        free = _FREE.get(key)
        if free:
            buf = free.pop()
            _kept -= buf.nbytes
            return buf
    return like.new_empty(shape)


def _give(buf: torch.Tensor) -> None:
    """Keep `buf` for a later `_take`, unless that would keep more than _KEEP or _KEEP_BYTES, or
    it was made under torch.inference_mode (it cannot be written outside)."""
    global _kept
    if buf.is_inference():
        return
    key = (*buf.shape, buf.dtype, buf.device)
    with _LOCK:
        free = _FREE.setdefault(key, [])
        if len(free) < _KEEP and _kept + buf.nbytes <= _KEEP_BYTES:
            free.append(buf)
            _kept += buf.nbytes


def _attend(M2: torch.Tensor, OV2: torch.Tensor, cell: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """SeqAttention's forward: (e, s, att, on_token, logits), the first four in pool buffers."""
    pB, L, H, _ = index.shape
    n = OV2.shape[0] // H
    # softmax over keys j in the memory order (pB, L, H, L) that the per-token sum reads
    cells = torch.index_select(M2, 1, cell, out=_take((H, pB * L * L), M2))  # (H, pB, L, L)
    score = _take(index.shape, M2).copy_(cells.view(H, pB, L, L).permute(1, 2, 0, 3))  # .contiguous()
    _give(cells)
    e = score.sub_(score.amax(-1, keepdim=True)).exp_()
    s = e.sum(-1, keepdim=True)
    att = torch.div(e, s, out=_take(index.shape, M2))
    # attention per key token: on_token[p, i, h, t_j] += att[p, i, h, j], j in order
    on_token = _take((pB, L, H, n), M2).zero_().scatter_add_(3, index, att)
    return e, s, att, on_token, on_token.view(pB * L, H * n) @ OV2


def _plain(M2: torch.Tensor, OV2: torch.Tensor, cell: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """SeqAttention's logits through autograd's own operations (no buffers): the form whose
    gradients the hand-written backward reproduces, differentiated where a gradient needs a
    graph of its own (create_graph)."""
    pB, L, H, _ = index.shape
    score = M2.index_select(1, cell).view(H, pB, L, L).permute(1, 2, 0, 3)
    e = (score - score.amax(-1, keepdim=True).detach()).exp()
    att = e / e.sum(-1, keepdim=True)
    on_token = att.new_zeros(pB, L, H, OV2.shape[0] // H).scatter_add(3, index, att)
    return on_token.view(pB * L, -1) @ OV2


class SeqAttention(torch.autograd.Function):
    """Logits [pB * L, n_out] of the layer on pB sequences of length L, without a residual.

    M2: the QK table as [H, n * n] (query-major cells); OV2: the key-major OV circuit as
    [H * n, n_out]; cell [pB * L * L] (int64): the QK cell (t_i * n + t_j) of each (sequence,
    query i, key j); index [pB, L, H, L] (int64): the token of key j, expanded over queries and
    heads. Backward gives (dM2, dOV2). The first backward reuses the forward's buffers; a second
    one (retain_graph) computes them again, the same bits; with create_graph the gradients are
    `_plain`'s, through autograd, so that they can be differentiated again."""

    @staticmethod
    def forward(ctx, M2: torch.Tensor, OV2: torch.Tensor, cell: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        e, s, att, on_token, logits = _attend(M2, OV2, cell, index)
        if any(ctx.needs_input_grad):
            ctx.save_for_backward(M2, OV2, cell, index)
            ctx.kept = (e, s, att, on_token)  # not saved tensors: the backward writes over them
        else:
            for buf in (e, att, on_token):
                _give(buf)
        return logits

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        M2, OV2, cell, index = ctx.saved_tensors
        kept, ctx.kept = ctx.kept, None
        if torch.is_grad_enabled():  # create_graph: gradients with a graph, from the plain form
            if kept is not None:
                for buf in (kept[0], kept[2], kept[3]):
                    _give(buf)
            need = ctx.needs_input_grad[:2]
            wrt = [x for x, k in zip((M2, OV2), need) if k]
            got = iter(torch.autograd.grad(_plain(M2, OV2, cell, index), wrt, g, create_graph=True))
            return (next(got) if need[0] else None, next(got) if need[1] else None, None, None)
        e, s, att, on_token = kept if kept is not None else _attend(M2, OV2, cell, index)[:4]
        pB, L, H, n = on_token.shape
        # the product's backward as autograd's mm takes it (mat1.t() @ grad, grad @ mat2.t())
        dOV2 = on_token.view(pB * L, H * n).t().mm(g)
        d_token = torch.mm(g, OV2.t(), out=on_token.view(pB * L, H * n))  # on_token is read: reuse it
        d_att = torch.gather(d_token.view(pB, L, H, n), 3, index, out=_take(index.shape, M2))  # scatter_add's
        _give(on_token)
        # att = e / s, s = e.sum(-1): autograd's division backward, d_e = d_att / s (direct) and
        # d_s = sum_j -d_att * ((e / s) / s), in which e / s is att, bit for bit; -a * b = -(a * b)
        # and a sum of negated terms is the negated sum, exactly
        t = att.div_(s).mul_(d_att)
        d_s = t.sum(-1, keepdim=True).neg_()
        d_score = torch.div(d_att, s, out=t).add_(d_s).mul_(e)  # + d_s from the sum, x e from exp
        # (H, pB * L * L), as autograd's reshape copies it
        d_cells = d_att.view(H, pB, L, L).copy_(d_score.permute(2, 0, 1, 3)).view(H, -1)
        dM2 = torch.zeros_like(M2).index_add_(1, cell, d_cells)  # index_select's backward
        for buf in (e, att, d_att):
            _give(buf)
        return dM2, dOV2, None, None


class FusedSeqAttention(torch.autograd.Function):
    """`SeqAttention`'s logits to float32 rounding (not its bits), from the OV circuit's factors
    (config grid_kernel = "fused"): logits = sum_h sum_j A[h, i, j] v_h[t_j] (W_O W_U)_h, the
    attention applied to the d_head-dimensional values instead of the n_out-wide OV rows. Every
    tensor is laid out (head, ..., sequence) with the pB sequences last, so each pass runs along
    whole rows of sequences: the softmax's max and sums over the L keys add whole slices (torch's
    reductions over a last axis of L = 6 are slow), and the products over keys and value
    dimensions are a few multiply-adds of [H, L, pB] slices.

    M2 [H, n * n]: the QK table by head and cell (query * n + key); V2 [H * d_head, n]: the
    values v[h, t] (rows (h, e)); OU2 [H * d_head, n_out]: W_O W_U, rows (h, e); cell
    [L * L * pB] (int64): the QK cell of (key j, query i, sequence p); tok [L * pB]: the token of
    (key j, sequence p). Returns logits [L * pB, n_out] (query major); backward gives
    (dM2, dV2, dOU2)."""

    @staticmethod
    def forward(ctx, M2, V2, OU2, cell, tok):
        H = M2.shape[0]
        dh = V2.shape[0] // H
        L = cell.shape[0] // tok.shape[0]
        pB = tok.shape[0] // L
        att = M2.index_select(1, cell).view(H, L, L, pB)  # (h, j, i, p) scores
        att = att.sub_(att.amax(1, keepdim=True)).exp_()
        att /= att.sum(1, keepdim=True)
        value = V2.index_select(1, tok).view(H, dh, L, pB)  # (h, e, j, p)
        z = value[:, :, 0, None, :] * att[:, None, 0, :, :]  # (h, e, i, p)
        for j in range(1, L):
            z.addcmul_(value[:, :, j, None, :], att[:, None, j, :, :])
        ctx.save_for_backward(att, value, z, OU2, cell, tok)
        ctx.n = M2.shape[1], V2.shape[1]
        return z.view(H * dh, L * pB).t() @ OU2

    @staticmethod
    @once_differentiable  # its formulas read the saved tensors as constants
    def backward(ctx, g):
        att, value, z, OU2, cell, tok = ctx.saved_tensors
        H, dh, L, pB = value.shape
        dOU2 = z.view(H * dh, L * pB) @ g
        dz = (OU2 @ g.t()).view(H, dh, L, pB)  # (h, e, i, p)
        d_att = value[:, 0, :, None, :] * dz[:, 0, None, :, :]  # (h, j, i, p)
        for e in range(1, dh):
            d_att.addcmul_(value[:, e, :, None, :], dz[:, e, None, :, :])
        d_value = att[:, None, :, 0, :] * dz[:, :, None, 0, :]  # (h, e, j, p)
        for i in range(1, L):
            d_value.addcmul_(att[:, None, :, i, :], dz[:, :, None, i, :])
        dV2 = value.new_zeros(H * dh, ctx.n[1]).index_add_(1, tok, d_value.view(H * dh, L * pB))
        t = d_att.mul_(att)
        d_score = t.addcmul_(att, t.sum(1, keepdim=True), value=-1)  # softmax backward: A (d - sum_j A d)
        dM2 = att.new_zeros(H, ctx.n[0]).index_add_(1, cell, d_score.view(H, -1))
        return dM2, dV2, dOU2, None, None

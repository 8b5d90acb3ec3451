"""A tiny causal model of `torch.nn.MultiheadAttention` layers with W_E and W_U, for the tests
that record a run with the probe (9 tokens, d_model 8, 2 heads a layer; an untrained model, so
its scores are whatever the random weights give)."""

from __future__ import annotations

import torch
from torch import nn


class TinyAttentionModel(nn.Module):
    def __init__(self, layers: int = 2):
        super().__init__()
        self.W_E = nn.Parameter(torch.randn(9, 8))
        self.attn = nn.ModuleList(nn.MultiheadAttention(8, 2, batch_first=True) for _ in range(layers))
        self.W_U = nn.Parameter(torch.randn(8, 9))

    def forward(self, tokens):
        x = self.W_E[tokens]  # (B, T, 8)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        for a in self.attn:
            x = x + a(x, x, x, attn_mask=mask, need_weights=False)[0]
        return x @ self.W_U  # (B, T, 9)

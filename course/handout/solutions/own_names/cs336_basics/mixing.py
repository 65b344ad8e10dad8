"""Attention: the scaled dot-product kernel and causal multi-head self-attention."""

import math

import torch
from torch import nn

from .failures import ConfigError, ShapeMismatch
from .primitives import Dense, stable_softmax


def attend(queries, keys, values, allowed=None):
    """softmax(Q K^T / sqrt(d_k)) V over any leading dims; ``allowed`` True = may attend."""
    if queries.shape[-1] != keys.shape[-1]:
        raise ShapeMismatch(f"queries have d_k={queries.shape[-1]} but keys {keys.shape[-1]}")
    logits = torch.einsum("...qd,...kd->...qk", queries, keys) / math.sqrt(queries.shape[-1])
    if allowed is not None:
        logits = torch.where(allowed, logits, torch.finfo(logits.dtype).min)
    return torch.einsum("...qk,...kd->...qd", stable_softmax(logits, dim=-1), values)


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, rotary=None, device=None, dtype=None):
        super().__init__()
        if width % heads:
            raise ConfigError(f"width {width} is not divisible by {heads} heads")
        self.heads, self.rotary = heads, rotary
        self.wq, self.wk, self.wv, self.wo = (Dense(width, width, device, dtype) for _ in range(4))

    def forward(self, x, positions=None):
        length = x.shape[-2]

        def heads_first(t):
            return t.reshape(*t.shape[:-1], self.heads, -1).movedim(-2, -3)

        q, k, v = heads_first(self.wq(x)), heads_first(self.wk(x)), heads_first(self.wv(x))
        if self.rotary is not None:
            if positions is None:
                positions = torch.arange(length, device=x.device)
            q = self.rotary(q, positions[..., None, :])
            k = self.rotary(k, positions[..., None, :])
        future = torch.triu(torch.ones(length, length, dtype=torch.bool, device=x.device), 1)
        mixed = attend(q, k, v, ~future)
        return self.wo(mixed.movedim(-3, -2).reshape(*x.shape[:-1], -1))

"""Parameterised building blocks: dense maps, lookups, RMS normalisation, MLPs."""

import math

import torch
from torch import nn

from .failures import UnknownToken

# Documentation-only annotations (no runtime checker understands them, and none needs to).
Activations = "float tensor (..., width)"
TokenIds = "integer tensor (...)"


def _truncated(shape, std, device, dtype):
    tensor = torch.empty(shape, device=device, dtype=dtype)
    return nn.init.trunc_normal_(tensor, mean=0.0, std=std, a=-3 * std, b=3 * std)


class Dense(nn.Module):
    """y = x W^T with W stored as ``w`` of shape (d_out, d_in)."""

    def __init__(self, d_in: int, d_out: int, device=None, dtype=None):
        super().__init__()
        self.w = nn.Parameter(
            _truncated((d_out, d_in), math.sqrt(2 / (d_in + d_out)), device, dtype)
        )

    def forward(self, x: "Activations") -> "Activations":
        return x @ self.w.transpose(0, 1)


class Lookup(nn.Module):
    def __init__(self, rows: int, width: int, device=None, dtype=None):
        super().__init__()
        self.table = nn.Parameter(_truncated((rows, width), 1.0, device, dtype))

    def forward(self, ids: "TokenIds") -> "Activations":
        if ids.numel() and (ids.min() < 0 or ids.max() >= self.table.shape[0]):
            bad = ids[(ids < 0) | (ids >= self.table.shape[0])][0].item()
            raise UnknownToken(f"token id {bad} is outside the table of {self.table.shape[0]} rows")
        return torch.index_select(self.table, 0, ids.reshape(-1)).reshape(*ids.shape, -1)


class RootMeanSquareNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(width, device=device, dtype=dtype))

    def forward(self, x):
        wide = x.float()
        scale = (wide.square().mean(-1, keepdim=True) + self.eps).rsqrt()
        return (wide * scale * self.gain.float()).type(x.dtype)


def swish(x):
    return x * x.sigmoid()


def stable_softmax(x, dim):
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))


class GatedMLP(nn.Module):
    """down(swish(gate x) * up x): the handout's SwiGLU."""

    def __init__(self, width: int, hidden: int, device=None, dtype=None):
        super().__init__()
        self.gate = Dense(width, hidden, device, dtype)
        self.up = Dense(width, hidden, device, dtype)
        self.down = Dense(hidden, width, device, dtype)

    def forward(self, x):
        return self.down(swish(self.gate(x)) * self.up(x))


class PlainMLP(nn.Module):
    """down(swish(gate x)): the ablation without the gate's partner."""

    def __init__(self, width: int, hidden: int, device=None, dtype=None):
        super().__init__()
        self.gate = Dense(width, hidden, device, dtype)
        self.down = Dense(hidden, width, device, dtype)

    def forward(self, x):
        return self.down(swish(self.gate(x)))

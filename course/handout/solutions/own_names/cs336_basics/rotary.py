"""Rotary position embeddings as complex multiplication: pair (x_2i, x_2i+1) is the complex
number x_2i + i x_2i+1, rotated by position * theta^(-2i/d)."""

import torch
from torch import nn

from .failures import ConfigError, PositionOutOfRange


class Rotary(nn.Module):
    def __init__(self, theta: float, head_dim: int, max_positions: int, device=None):
        super().__init__()
        if head_dim % 2:
            raise ConfigError(f"rotary embeddings need an even head dimension, got d_k={head_dim}")
        exponents = torch.arange(head_dim // 2, dtype=torch.float64, device=device) * 2 / head_dim
        angles = torch.arange(max_positions, dtype=torch.float64, device=device)[
            :, None
        ] * theta ** (-exponents)
        self.max_positions = max_positions
        self.register_buffer(
            "phases",
            torch.polar(torch.ones_like(angles), angles).to(torch.complex64),
            persistent=False,
        )

    def forward(self, x, positions):
        if positions.numel() and (positions.min() < 0 or positions.max() >= self.max_positions):
            raise PositionOutOfRange(f"positions must lie in [0, max_seq_len={self.max_positions})")
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
        rotated = torch.view_as_real(pairs * self.phases[positions])
        return rotated.reshape(x.shape).to(x.dtype)

"""Absolute position encodings added to the token embeddings: sinusoidal (fixed) tables.

Learned absolute positions (GPT-2) need no module of their own: they are an ``Embedding`` with
one row per position. RoPE, which rotates queries and keys instead, lives in ``rope.py``.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.rope import check_positions


class SinusoidalPositionalEncoding(nn.Module):
    """The original Transformer's fixed encoding (Vaswani et al., 2017).

    ``PE[p, 2i] = sin(p / base^(2i/d_model))`` and ``PE[p, 2i+1] = cos(p / base^(2i/d_model))``,
    precomputed in float64 for positions ``0 .. max_seq_len - 1`` and kept as a non-persistent
    buffer (it has no parameters, so it never appears in a state dict).
    """

    table: Tensor

    def __init__(
        self,
        d_model: int,
        max_seq_len: int,
        base: float = 10000.0,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if d_model % 2 != 0:
            raise ValueError(
                f"sinusoidal positions pair sin and cos, so d_model must be even; got {d_model}"
            )
        self.max_seq_len = max_seq_len
        inverse_frequencies = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inverse_frequencies)
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)
        self.register_buffer(
            "table", table.to(device=device, dtype=torch.float32), persistent=False
        )

    def forward(self, token_positions: Int[Tensor, "... seq"]) -> Float[Tensor, "... seq d_model"]:
        check_positions(token_positions, self.max_seq_len)
        return self.table[token_positions]

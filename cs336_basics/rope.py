"""Rotary position embeddings (RoPE) on interleaved pairs."""

from __future__ import annotations

import torch
from einops import rearrange
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.devices import is_compiling


class RotaryPositionalEmbedding(nn.Module):
    """Rotates each pair ``(x[2i], x[2i+1])`` of a query or key by the angle ``p * theta^(-2i/d_k)``.

    ``p`` is the token's position. Cosines and sines for positions ``0 .. max_seq_len - 1`` are
    precomputed once (in float64, then stored as float32) as non-persistent buffers, so they
    follow ``.to(device)`` but never appear in a state dict.

    ``token_positions`` may have any leading dims that broadcast against those of ``x``
    (for example ``(batch, 1, seq)`` against ``(batch, heads, seq, d_k)``).
    """

    cos: Tensor
    sin: Tensor

    def __init__(
        self,
        theta: float,
        d_k: int,
        max_seq_len: int,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if d_k % 2 != 0:
            raise ValueError(
                f"RoPE rotates pairs of dimensions, so d_k must be even; got d_k={d_k}"
            )
        if max_seq_len < 1:
            raise ValueError(f"max_seq_len must be positive; got {max_seq_len}")
        self.theta = theta
        self.d_k = d_k
        self.max_seq_len = max_seq_len
        # BEGIN SOLUTION
        inverse_frequencies = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
        positions = torch.arange(max_seq_len, dtype=torch.float64)
        angles = torch.outer(positions, inverse_frequencies)  # (max_seq_len, d_k / 2)
        self.register_buffer(
            "cos", angles.cos().to(device=device, dtype=torch.float32), persistent=False
        )
        self.register_buffer(
            "sin", angles.sin().to(device=device, dtype=torch.float32), persistent=False
        )
        # END SOLUTION

    def forward(
        self, x: Float[Tensor, "... seq d_k"], token_positions: Int[Tensor, "... seq"]
    ) -> Float[Tensor, "... seq d_k"]:
        check_positions(token_positions, self.max_seq_len)
        # BEGIN SOLUTION
        cos = self.cos[token_positions]  # (..., seq, d_k / 2)
        sin = self.sin[token_positions]
        pairs = rearrange(x.float(), "... (half two) -> ... half two", two=2)
        even, odd = pairs.unbind(dim=-1)
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
        return rearrange(rotated, "... half two -> ... (half two)").to(x.dtype)
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"theta={self.theta}, d_k={self.d_k}, max_seq_len={self.max_seq_len}"


def check_positions(token_positions: Tensor, max_seq_len: int) -> None:
    """Raise a clear error unless every position is in ``[0, max_seq_len)``: on the CPU only,
    as ``embedding.check_token_ids`` (positions made by this package are in range by
    construction: ``default_positions`` of a sequence no longer than the context)."""
    if token_positions.device.type != "cpu" or token_positions.numel() == 0 or is_compiling():
        return
    low, high = int(token_positions.min()), int(token_positions.max())
    if low < 0 or high >= max_seq_len:
        bad = low if low < 0 else high
        raise IndexError(f"token position {bad} is outside [0, max_seq_len={max_seq_len})")


def default_positions(
    seq_len: int, offset: int = 0, device: torch.device | str | None = None
) -> Int[Tensor, " seq"]:
    """``offset, offset + 1, ..., offset + seq_len - 1``: the positions of a sequence whose
    caller gave none (``offset`` is the number of tokens before it, e.g. in a KV cache)."""
    return torch.arange(offset, offset + seq_len, device=device)

"""Scaled dot-product attention and causal multi-head self-attention."""

from __future__ import annotations

import math

import torch
from einops import einsum, rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from cs336_basics.functional import softmax
from cs336_basics.linear import Linear
from cs336_basics.rope import RotaryPositionalEmbedding, default_positions


def scaled_dot_product_attention(
    Q: Float[Tensor, "... queries d_k"],
    K: Float[Tensor, "... keys d_k"],
    V: Float[Tensor, "... keys d_v"],
    mask: Bool[Tensor, "... queries keys"] | None = None,
) -> Float[Tensor, "... queries d_v"]:
    """``softmax(Q K^T / sqrt(d_k)) V`` over any leading dims.

    ``mask`` is boolean and broadcasts against the scores: **True means "may attend"**;
    False positions get probability zero. Every query must be allowed at least one key.
    """
    # BEGIN SOLUTION
    d_k = Q.shape[-1]
    scores = einsum(Q, K, "... queries d_k, ... keys d_k -> ... queries keys") / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return einsum(weights, V, "... queries keys, ... keys d_v -> ... queries d_v")
    # END SOLUTION


class MultiHeadSelfAttention(nn.Module):
    """Causal multi-head self-attention with optional RoPE on queries and keys.

    Projections ``q_proj``, ``k_proj``, ``v_proj`` and ``output_proj`` are ``d_model x d_model``
    linear maps; heads are the contiguous ``d_k = d_model / num_heads`` slices of the projected
    features (head ``h`` owns rows ``h*d_k .. (h+1)*d_k - 1`` of each weight), attended in the
    ``(..., heads, seq, d_k)`` layout. RoPE, when ``rope`` is given, rotates queries and keys
    (never values) at ``token_positions``, which default to ``0, 1, ..., seq - 1``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        rope: RotaryPositionalEmbedding | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.rope = rope

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        # BEGIN SOLUTION
        seq_len = x.shape[-2]
        q, k, v = (
            rearrange(proj(x), "... seq (heads d_k) -> ... heads seq d_k", heads=self.num_heads)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        if self.rope is not None:
            if token_positions is None:
                token_positions = default_positions(seq_len, device=x.device)
            head_positions = rearrange(token_positions, "... seq -> ... 1 seq")
            q = self.rope(q, head_positions)
            k = self.rope(k, head_positions)
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device).tril()
        attended = scaled_dot_product_attention(q, k, v, causal)
        return self.output_proj(rearrange(attended, "... heads seq d_k -> ... seq (heads d_k)"))
        # END SOLUTION

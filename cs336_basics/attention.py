"""Scaled dot-product attention and causal multi-head self-attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from cs336_basics.functional import softmax
from cs336_basics.kv_cache import LayerKVCache
from cs336_basics.linear import linear_layer
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding


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


def causal_mask(num_queries: int, num_keys: int, device: torch.device | None = None) -> Tensor:
    """Boolean ``(num_queries, num_keys)`` mask, True where the query may attend.

    The queries are the *last* ``num_queries`` positions of the key sequence (so with a KV
    cache, query ``i`` sits at position ``num_keys - num_queries + i``) and each attends to
    itself and everything before it.
    """
    offset = num_keys - num_queries
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(diagonal=offset)


def fused_attention(
    q: Float[Tensor, "... kv_heads group queries d_k"],
    k: Float[Tensor, "... kv_heads 1 keys d_k"],
    v: Float[Tensor, "... kv_heads 1 keys d_v"],
    causal: bool,
) -> Float[Tensor, "... kv_heads group queries d_v"]:
    """The attention of ``MultiHeadSelfAttention`` computed by PyTorch's fused kernel.

    Beyond the assignment: ``ModelConfig(fused_attention=True)`` uses it for speed instead of
    ``scaled_dot_product_attention``; the math is the same (tests compare the two). The grouped
    query heads go to the kernel as grouped-query attention.
    """
    group, num_queries, num_keys = q.shape[-3], q.shape[-2], k.shape[-2]
    # The kernel's own causal flag aligns queries with the *first* keys; with a KV cache the
    # queries are the last positions, so the offset mask is passed explicitly then.
    mask = (
        causal_mask(num_queries, num_keys, q.device) if causal and num_queries != num_keys else None
    )
    out = F.scaled_dot_product_attention(
        rearrange(q, "... kv_heads group seq d -> ... (kv_heads group) seq d"),
        k.squeeze(-3),
        v.squeeze(-3),
        attn_mask=mask,
        is_causal=causal and mask is None,
        enable_gqa=group > 1,
    )
    return rearrange(out, "... (kv_heads group) seq d -> ... kv_heads group seq d", group=group)


class MultiHeadSelfAttention(nn.Module):
    """Causal multi-head self-attention with optional RoPE on queries and keys.

    Projections ``q_proj``, ``k_proj``, ``v_proj`` and ``output_proj`` are ``d_model x d_model``
    linear maps; heads are the contiguous ``d_k = d_model / num_heads`` slices of the
    projected features (head ``h`` owns rows ``h*d_k .. (h+1)*d_k - 1`` of each weight).
    RoPE, when ``rope`` is given, is applied to queries and keys only, never to values.

    Options beyond the handout:

    - ``num_kv_heads < num_heads``: grouped-query attention. ``k_proj`` and ``v_proj`` produce
      only ``num_kv_heads`` heads, and query head ``h`` reads key/value head
      ``h // (num_heads / num_kv_heads)``; ``num_kv_heads = 1`` is multi-query attention. The
      KV cache then holds just the shared heads.
    - ``qk_norm``: RMSNorm (``q_norm``, ``k_norm``, one gain per head dim) on every query and
      key head before RoPE, as in Qwen3.
    - ``bias``: biases on all four projections. ``causal=False`` lets every position attend
      to every other (an encoder).
    - ``fused``: compute attention with PyTorch's fused kernel (``fused_attention``).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        rope: RotaryPositionalEmbedding | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        num_kv_heads: int | None = None,
        qk_norm: bool = False,
        norm_eps: float = 1e-5,
        bias: bool = False,
        causal: bool = True,
        fused: bool = False,
    ) -> None:
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_heads={num_heads} must be a multiple of num_kv_heads={num_kv_heads}"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.d_k = d_model // num_heads
        self.causal = causal
        self.fused = fused
        if rope is not None and rope.d_k != self.d_k:
            raise ValueError(
                f"RoPE was built for d_k={rope.d_k}, but the heads have d_k={self.d_k}"
            )
        d_kv = num_kv_heads * self.d_k
        self.q_proj = linear_layer(d_model, d_model, bias, device=device, dtype=dtype)
        self.k_proj = linear_layer(d_model, d_kv, bias, device=device, dtype=dtype)
        self.v_proj = linear_layer(d_model, d_kv, bias, device=device, dtype=dtype)
        self.output_proj = linear_layer(d_model, d_model, bias, device=device, dtype=dtype)
        if qk_norm:
            self.q_norm = RMSNorm(self.d_k, norm_eps, device=device, dtype=dtype)
            self.k_norm = RMSNorm(self.d_k, norm_eps, device=device, dtype=dtype)
        self.qk_norm = qk_norm
        self.rope = rope

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
        kv_cache: LayerKVCache | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        """Attend causally over ``x``; with ``kv_cache``, ``x`` holds only the new tokens.

        ``token_positions`` defaults to ``cached_length, cached_length + 1, ...``.
        """
        # BEGIN SOLUTION
        seq_len = x.shape[-2]
        past = 0 if kv_cache is None else kv_cache.length
        # Query heads are grouped under the key/value head they share (group = 1 for plain MHA),
        # so attention broadcasts each key/value head over its group without copying it.
        q = rearrange(
            self.q_proj(x),
            "... seq (kv_heads group d_k) -> ... kv_heads group seq d_k",
            kv_heads=self.num_kv_heads,
            d_k=self.d_k,
        )
        k, v = (
            rearrange(proj(x), "... seq (kv_heads d_k) -> ... kv_heads 1 seq d_k", d_k=self.d_k)
            for proj in (self.k_proj, self.v_proj)
        )
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            if token_positions is None:
                token_positions = torch.arange(past, past + seq_len, device=x.device)
            head_positions = rearrange(token_positions, "... seq -> ... 1 1 seq")
            q = self.rope(q, head_positions)
            k = self.rope(k, head_positions)
        if kv_cache is not None:
            k, v = kv_cache.append(k, v)
        if self.fused:
            attended = fused_attention(q, k, v, self.causal)
        else:
            mask = causal_mask(seq_len, k.shape[-2], device=x.device) if self.causal else None
            attended = scaled_dot_product_attention(q, k, v, mask)
        return self.output_proj(
            rearrange(attended, "... kv_heads group seq d_k -> ... seq (kv_heads group d_k)")
        )
        # END SOLUTION

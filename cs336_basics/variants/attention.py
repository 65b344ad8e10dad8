"""Variants of multi-head self-attention: grouped-query and multi-query attention, QK-norm,
biases, bidirectional (encoder) attention, the fused PyTorch kernel and a KV cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor

from cs336_basics.attention import scaled_dot_product_attention
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding, default_positions
from cs336_basics.variants.kv_cache import CachingAttention
from cs336_basics.variants.linear import linear_layer


def causal_mask(
    num_queries: int, num_keys: int, device: torch.device | None = None
) -> Bool[Tensor, "queries keys"]:
    """True where the query may attend. The queries are the *last* ``num_queries`` positions of
    the keys (with a KV cache, query ``i`` sits at ``num_keys - num_queries + i``)."""
    offset = num_keys - num_queries
    return torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(diagonal=offset)


def reference_attention(
    q: Float[Tensor, "... kv_heads group queries d_k"],
    k: Float[Tensor, "... kv_heads 1 keys d_k"],
    v: Float[Tensor, "... kv_heads 1 keys d_v"],
    causal: bool,
    mask: Bool[Tensor, "queries keys"] | None = None,
) -> Float[Tensor, "... kv_heads group queries d_v"]:
    """The handout's ``scaled_dot_product_attention``, each key/value head broadcast over its
    group of query heads (no copies). A ``mask`` (True: may attend; a static KV cache's) replaces
    the causal one."""
    if mask is None and causal:
        mask = causal_mask(q.shape[-2], k.shape[-2], device=q.device)
    return scaled_dot_product_attention(q, k, v, mask)


def fused_attention(
    q: Float[Tensor, "... kv_heads group queries d_k"],
    k: Float[Tensor, "... kv_heads 1 keys d_k"],
    v: Float[Tensor, "... kv_heads 1 keys d_v"],
    causal: bool,
    mask: Bool[Tensor, "queries keys"] | None = None,
) -> Float[Tensor, "... kv_heads group queries d_v"]:
    """``reference_attention`` computed by PyTorch's fused kernel (as grouped-query attention)."""
    group, num_queries, num_keys = q.shape[-3], q.shape[-2], k.shape[-2]
    # The kernel's own causal flag aligns queries with the *first* keys; with a KV cache the
    # queries are the last positions, so the offset mask is passed explicitly then.
    if mask is None and causal and num_queries != num_keys:
        mask = causal_mask(num_queries, num_keys, q.device)
    out = F.scaled_dot_product_attention(
        rearrange(q, "... kv_heads group seq d -> ... (kv_heads group) seq d"),
        k.squeeze(-3),
        v.squeeze(-3),
        attn_mask=mask,
        is_causal=causal and mask is None,
        enable_gqa=group > 1,
    )
    return rearrange(out, "... (kv_heads group) seq d -> ... kv_heads group seq d", group=group)


class GroupedQueryAttention(CachingAttention):
    """Multi-head self-attention whose ``num_kv_heads`` key/value heads are shared by groups of
    query heads: query head ``h`` reads key/value head ``h // (num_heads / num_kv_heads)``.

    ``head_dim`` (default ``d_model / num_heads``) is the width of every head; the query and
    output projections map between ``d_model`` and ``num_heads * head_dim``.
    ``num_kv_heads = num_heads`` is the handout's multi-head attention (same state dict), ``1``
    multi-query attention. Options: ``qk_norm`` (RMSNorms ``q_norm`` and ``k_norm``, one gain per
    head dim, on every query and key head before RoPE; Qwen3), ``bias`` on all four projections (``qkv_bias``: on query, key
    and value only; Qwen2),
    ``causal=False`` (an encoder) and ``fused`` (PyTorch's kernel). Inside ``kv_caches`` the layer
    keeps the shared key/value heads of every position it has seen.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        rope: RotaryPositionalEmbedding | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        qk_norm: bool = False,
        norm_eps: float = 1e-5,
        bias: bool = False,
        qkv_bias: bool = False,
        causal: bool = True,
        fused: bool = False,
        head_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.d_k = d_model // num_heads if head_dim is None else head_dim
        self.causal = causal
        self.attend = fused_attention if fused else reference_attention
        d_q, d_kv = num_heads * self.d_k, self.num_kv_heads * self.d_k
        in_bias = bias or qkv_bias
        self.q_proj = linear_layer(d_model, d_q, in_bias, device=device, dtype=dtype)
        self.k_proj = linear_layer(d_model, d_kv, in_bias, device=device, dtype=dtype)
        self.v_proj = linear_layer(d_model, d_kv, in_bias, device=device, dtype=dtype)
        self.output_proj = linear_layer(d_q, d_model, bias, device=device, dtype=dtype)
        if qk_norm:
            self.q_norm = RMSNorm(self.d_k, norm_eps, device=device, dtype=dtype)
            self.k_norm = RMSNorm(self.d_k, norm_eps, device=device, dtype=dtype)
        self.qk_norm = qk_norm
        self.rope = rope

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        """Attend over ``x``; inside ``kv_caches``, ``x`` holds only the tokens after the cached
        ones and ``token_positions`` default to continue from them."""
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
        if token_positions is None:
            token_positions = default_positions(x.shape[-2], self.cached_length, x.device)
        if self.rope is not None:
            head_positions = rearrange(token_positions, "... seq -> ... 1 1 seq")
            q, k = self.rope(q, head_positions), self.rope(k, head_positions)
        mask = None
        if self.kv_cache is not None:
            k, v, mask = self.kv_cache.update(k, v, token_positions)
        attended = self.attend(q, k, v, self.causal, mask)
        return self.output_proj(
            rearrange(attended, "... kv_heads group seq d_k -> ... seq (kv_heads group d_k)")
        )

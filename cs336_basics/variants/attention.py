"""Self-attention assembled from parts: projections, optional query/key norms, a position
module, a mask rule, an attention kernel, and a KV cache.

Every variant is a choice of parts, not a flag: grouped-query and multi-query attention are
key/value projections with fewer heads than the query projection, QK-norm is a pair of norm
modules, biases are projections that have them (``linear.py``), an encoder is
``causal=False``, the fused kernel is ``attend=fused_attention``. ``self_attention`` assembles
the usual choices from sizes; ``SelfAttention`` takes any parts.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from einops import rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from cs336_basics.attention import scaled_dot_product_attention
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import default_positions
from cs336_basics.variants.decoding.kv_cache import CachingAttention
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


AttentionKernel = Callable[..., Tensor]  # reference_attention or fused_attention


class SelfAttention(CachingAttention):
    """Self-attention over ``x`` from its parts, state-dict names as the handout's attention.

    ``q_proj`` maps ``d_model`` to ``num_heads * head_dim``, ``k_proj`` and ``v_proj`` to
    ``num_kv_heads * head_dim``: the head counts are the projections' shapes. With fewer
    key/value heads than query heads (grouped-query attention; one: multi-query), query head
    ``h`` reads key/value head ``h // (num_heads / num_kv_heads)``. ``output_proj`` maps
    ``num_heads * head_dim`` back to ``d_model``. Optional parts: ``q_norm`` and ``k_norm`` (on
    every query and key head before the position module; Qwen3's QK-norm) and ``rope`` (rotates
    queries and keys at the token positions). ``causal=False`` attends both ways (an encoder);
    ``attend`` is the kernel. Inside ``kv_caches`` the layer keeps its cache (``kv_cache``) of
    the shared key/value heads of every position it has seen.
    """

    def __init__(
        self,
        q_proj: nn.Module,
        k_proj: nn.Module,
        v_proj: nn.Module,
        output_proj: nn.Module,
        head_dim: int,
        *,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
        rope: nn.Module | None = None,
        causal: bool = True,
        attend: AttentionKernel = reference_attention,
    ) -> None:
        super().__init__()
        num_heads, rest = divmod(q_proj.weight.shape[0], head_dim)
        self.num_kv_heads, kv_rest = divmod(k_proj.weight.shape[0], head_dim)
        if rest or kv_rest or not self.num_kv_heads or num_heads % self.num_kv_heads:
            raise ValueError(
                f"projections of {q_proj.weight.shape[0]} query and {k_proj.weight.shape[0]} "
                f"key features must be whole heads of head_dim={head_dim}, and the query heads "
                "a multiple of the key/value heads"
            )
        self.head_dim = head_dim
        self.q_proj, self.k_proj, self.v_proj = q_proj, k_proj, v_proj
        self.output_proj = output_proj
        self.q_norm, self.k_norm = q_norm, k_norm
        self.rope = rope
        self.causal = causal
        self.attend = attend

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        """Attend over ``x``; inside ``kv_caches``, ``x`` holds only the tokens after the cached
        ones and ``token_positions`` default to continue from them."""
        q = rearrange(
            self.q_proj(x),
            "... seq (kv_heads group d) -> ... kv_heads group seq d",
            kv_heads=self.num_kv_heads,
            d=self.head_dim,
        )
        k, v = (
            rearrange(proj(x), "... seq (kv_heads d) -> ... kv_heads 1 seq d", d=self.head_dim)
            for proj in (self.k_proj, self.v_proj)
        )
        if self.q_norm is not None:
            q = self.q_norm(q)
        if self.k_norm is not None:
            k = self.k_norm(k)
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
            rearrange(attended, "... kv_heads group seq d -> ... seq (kv_heads group d)")
        )


def self_attention(
    d_model: int,
    num_heads: int,
    num_kv_heads: int | None = None,
    head_dim: int | None = None,
    rope: nn.Module | None = None,
    *,
    qk_norm: bool = False,
    norm_eps: float = 1e-5,
    bias: bool = False,
    qkv_bias: bool = False,
    causal: bool = True,
    fused: bool = False,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> SelfAttention:
    """``SelfAttention`` with the usual parts: ``num_kv_heads`` key/value heads (default: one per
    query head, the handout's attention and state dict), heads of ``head_dim`` (default
    ``d_model / num_heads``), RMSNorm QK-norm, biases on all four projections (``bias``; GPT-2)
    or on query, key and value only (``qkv_bias``; Qwen2), PyTorch's fused kernel."""
    head_dim = d_model // num_heads if head_dim is None else head_dim
    d_q = num_heads * head_dim
    d_kv = (num_heads if num_kv_heads is None else num_kv_heads) * head_dim
    in_bias = bias or qkv_bias
    norms = {}
    if qk_norm:
        norms = {
            name: RMSNorm(head_dim, norm_eps, device=device, dtype=dtype)
            for name in ("q_norm", "k_norm")
        }
    return SelfAttention(
        linear_layer(d_model, d_q, in_bias, device=device, dtype=dtype),
        linear_layer(d_model, d_kv, in_bias, device=device, dtype=dtype),
        linear_layer(d_model, d_kv, in_bias, device=device, dtype=dtype),
        linear_layer(d_q, d_model, bias, device=device, dtype=dtype),
        head_dim,
        **norms,
        rope=rope,
        causal=causal,
        attend=fused_attention if fused else reference_attention,
    )

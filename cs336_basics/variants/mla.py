"""Multi-head latent attention (MLA), the attention of DeepSeek-V2 and V3."""

from __future__ import annotations

import math

import torch
from einops import einsum, rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from cs336_basics.attention import scaled_dot_product_attention
from cs336_basics.rope import default_positions
from cs336_basics.variants.attention import causal_mask
from cs336_basics.variants.decoding.kv_cache import CachingAttention


class MultiHeadLatentAttention(CachingAttention):
    """Causal attention whose keys and values are decompressed from a small per-token latent.

    Per token, ``kv_down_proj`` compresses ``x`` to a ``kv_lora_rank`` latent ``c`` (then
    ``kv_norm``); ``k_up_proj`` and ``v_up_proj`` expand ``c`` into every head's position-free key
    (``qk_nope_head_dim``) and value (``v_head_dim``). Position enters through ``qk_rope_head_dim``
    extra dims: a RoPE-rotated key ``k_rope_proj(x)`` shared by all heads, and per-head rotated
    query dims. Queries come from ``q_proj`` or, through a ``q_lora_rank`` latent, from
    ``q_up_proj(q_norm(q_down_proj(x)))``; each head's query is ``[nope dims | rope dims]``.
    The widths are the parts' shapes; ``rope`` rotates, ``query_scale`` multiplies the queries
    (DeepSeek's yarn softmax scale). ``latent_attention`` (``builders.py``) assembles the parts.
    Scores are scaled by ``1/sqrt(qk_nope_head_dim + qk_rope_head_dim)``.

    Without a cache the keys and values are expanded explicitly. Inside ``kv_caches``, only ``c`` and
    the RoPE key are stored per token and attention runs in latent space: ``k_up_proj`` is folded
    into the queries (``q_nope . (W_uk c) = (W_uk^T q_nope) . c``) and ``v_up_proj`` into
    ``output_proj`` (attend over ``c``, then one ``heads * rank -> d_model`` map). Both paths
    compute the same function.
    """

    def __init__(
        self,
        num_heads: int,
        kv_down_proj: nn.Module,
        kv_norm: nn.Module,
        k_rope_proj: nn.Module,
        k_up_proj: nn.Module,
        v_up_proj: nn.Module,
        output_proj: nn.Module,
        rope: nn.Module,
        *,
        q_proj: nn.Module | None = None,
        q_down_proj: nn.Module | None = None,
        q_norm: nn.Module | None = None,
        q_up_proj: nn.Module | None = None,
        query_scale: float = 1.0,
    ) -> None:
        super().__init__()
        latent = [part is not None for part in (q_down_proj, q_norm, q_up_proj)]
        if latent not in ([False] * 3, [True] * 3) or (q_proj is None) != all(latent):
            raise ValueError("give the queries either q_proj or q_down_proj, q_norm and q_up_proj")
        self.num_heads = num_heads
        self.rank = kv_down_proj.weight.shape[0]
        self.rope_dim = k_rope_proj.weight.shape[0]
        self.nope_dim = k_up_proj.weight.shape[0] // num_heads
        self.q_proj = q_proj
        self.q_down_proj, self.q_norm, self.q_up_proj = q_down_proj, q_norm, q_up_proj
        self.kv_down_proj, self.kv_norm = kv_down_proj, kv_norm
        self.k_rope_proj, self.k_up_proj, self.v_up_proj = k_rope_proj, k_up_proj, v_up_proj
        self.output_proj = output_proj
        self.rope = rope
        # DeepSeek's yarn also sharpens the softmax by mscale^2 (on the queries: scores are
        # linear in them, and both the expanded and the folded path see it).
        self.query_scale = query_scale

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        if token_positions is None:
            token_positions = default_positions(x.shape[-2], self.cached_length, x.device)
        q_nope, q_rope, latents, k_rope = self.project(x, token_positions)
        if self.kv_cache is None:
            return self.attend_expanded(q_nope, q_rope, latents, k_rope)
        latents, k_rope, mask = self.kv_cache.update(latents, k_rope, token_positions)
        return self.attend_folded(q_nope, q_rope, latents, k_rope, mask)

    def project(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"],
        q_latent: Float[Tensor, "... seq q_rank"] | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Each head's query split into its position-free and rotated dims (``... heads seq
        d``), the normalised latents and the rotated shared RoPE keys (``... seq d``).
        ``q_latent``: the query latent, when the caller has it already."""
        q = rearrange(
            self.queries(x, q_latent), "... seq (heads d) -> ... heads seq d", heads=self.num_heads
        )
        q_nope, q_rope = (q * self.query_scale).split([self.nope_dim, self.rope_dim], dim=-1)
        q_rope = self.rope(q_rope, rearrange(token_positions, "... seq -> ... 1 seq"))
        latents = self.kv_norm(self.kv_down_proj(x))
        k_rope = self.rope(self.k_rope_proj(x), token_positions)
        return q_nope, q_rope, latents, k_rope

    def queries(
        self,
        x: Float[Tensor, "... seq d_model"],
        q_latent: Float[Tensor, "... seq q_rank"] | None = None,
    ) -> Float[Tensor, "... seq q_dim"]:
        if self.q_proj is not None:
            return self.q_proj(x)
        if q_latent is None:
            q_latent = self.q_norm(self.q_down_proj(x))
        return self.q_up_proj(q_latent)

    def attend_expanded(
        self,
        q_nope: Float[Tensor, "... heads queries nope"],
        q_rope: Float[Tensor, "... heads queries rope"],
        latents: Float[Tensor, "... keys rank"],
        k_rope: Float[Tensor, "... keys rope"],
        mask: Bool[Tensor, "... queries keys"] | None = None,
    ) -> Float[Tensor, "... queries d_model"]:
        """Reconstruct per-head keys and values from the latents, then attend as usual (under
        ``mask``, e.g. sparse attention's, instead of the causal one)."""
        k_nope, v = (
            rearrange(proj(latents), "... seq (heads d) -> ... heads seq d", heads=self.num_heads)
            for proj in (self.k_up_proj, self.v_up_proj)
        )
        shared_k_rope = rearrange(k_rope, "... seq rope -> ... 1 seq rope").expand(
            *k_nope.shape[:-1], -1
        )
        q = torch.cat((q_nope, q_rope), dim=-1)
        k = torch.cat((k_nope, shared_k_rope), dim=-1)
        if mask is None:
            mask = causal_mask(q.shape[-2], k.shape[-2], device=q.device)
        attended = scaled_dot_product_attention(q, k, v, mask)
        return self.output_proj(rearrange(attended, "... heads seq d -> ... seq (heads d)"))

    def attend_folded(
        self,
        q_nope: Float[Tensor, "... heads queries nope"],
        q_rope: Float[Tensor, "... heads queries rope"],
        latents: Float[Tensor, "... keys rank"],
        k_rope: Float[Tensor, "... keys rope"],
        mask: Bool[Tensor, "... queries keys"] | None = None,
    ) -> Float[Tensor, "... queries d_model"]:
        """Attend in latent space: one shared key/value "head" of width ``rank (+ rope)``;
        ``mask`` (a static KV cache's, sparse attention's) replaces the causal one."""
        k_up = rearrange(
            self.k_up_proj.weight, "(heads nope) rank -> heads nope rank", heads=self.num_heads
        )
        q_latent = einsum(q_nope, k_up, "... heads seq nope, heads nope rank -> ... heads seq rank")
        # The attention helper divides by sqrt(of its query width); rescale so the scores keep
        # the 1/sqrt(nope + rope) of the expanded path.
        width_fix = math.sqrt((self.rank + self.rope_dim) / (self.nope_dim + self.rope_dim))
        q = torch.cat((q_latent, q_rope), dim=-1) * width_fix
        k = rearrange(torch.cat((latents, k_rope), dim=-1), "... seq d -> ... 1 seq d")
        if mask is None:
            mask = causal_mask(q.shape[-2], k.shape[-2], device=q.device)
        mixed = scaled_dot_product_attention(
            q, k, rearrange(latents, "... seq rank -> ... 1 seq rank"), mask
        )
        v_up = rearrange(
            self.v_up_proj.weight, "(heads v) rank -> heads v rank", heads=self.num_heads
        )
        output = rearrange(
            self.output_proj.weight, "d_model (heads v) -> d_model heads v", heads=self.num_heads
        )
        folded_output = einsum(output, v_up, "d_model heads v, heads v rank -> heads rank d_model")
        return einsum(
            mixed, folded_output, "... heads seq rank, heads rank d_model -> ... seq d_model"
        )

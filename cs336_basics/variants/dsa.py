"""DeepSeek Sparse Attention (DSA, DeepSeek-V3.2): latent attention over each query's top-k keys.

A *lightning indexer* scores every (query, key) pair cheaply: ``index_heads`` small heads of width
``index_head_dim``, queries from MLA's query latent, one key per token (``k_norm(wk(x))``), the
first ``qk_rope_head_dim`` dims of both rotated by MLA's RoPE. The score is
``sum_h w_h(x) * relu(q_h . k / sqrt(index_head_dim))`` with per-token head weights
``w(x) = weights_proj(x) / sqrt(index_heads)``. Each query then attends, through the ordinary
MLA computation, only to the ``index_topk`` causal keys of highest score; with ``index_topk`` at
least the sequence length it is MLA exactly.

The indexer's key is one ``index_head_dim`` vector per token, cached beside MLA's RoPE key (the
cache's second tensor is ``[rope key | indexer key]``), so cached decoding selects from the same
keys as a full forward pass.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from einops import einsum, rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from cs336_basics.rope import default_positions
from cs336_basics.variants.attention import causal_mask
from cs336_basics.variants.mla import MultiHeadLatentAttention


class LightningIndexer(nn.Module):
    """Scores keys for each query and keeps the ``topk`` best among those it may attend to.

    Parts: ``wq_b`` (query latent to ``heads * head_dim`` query features), ``wk`` (``d_model``
    to one ``head_dim`` key per token) and its ``k_norm``, ``weights_proj`` (``d_model`` to a
    weight per head), and ``rope`` (MLA's: the indexer rotates the first ``rope_dim`` dims of
    its queries and keys with the same tables). Head counts and widths are the parts' shapes.
    """

    def __init__(
        self,
        wq_b: nn.Module,
        wk: nn.Module,
        k_norm: nn.Module,
        weights_proj: nn.Module,
        rope: nn.Module,
        rope_dim: int,
        topk: int,
    ) -> None:
        super().__init__()
        self.heads, self.head_dim = weights_proj.weight.shape[0], wk.weight.shape[0]
        self.rope_dim, self.topk = rope_dim, topk
        self.rope = rope
        self.wq_b, self.wk, self.k_norm, self.weights_proj = wq_b, wk, k_norm, weights_proj

    def queries(
        self, q_latent: Float[Tensor, "... seq q_rank"], positions: Int[Tensor, "... seq"]
    ) -> Float[Tensor, "... seq heads d"]:
        q = rearrange(self.wq_b(q_latent), "... seq (heads d) -> ... seq heads d", d=self.head_dim)
        return self._rotate(q, rearrange(positions, "... seq -> ... seq 1"))

    def keys(
        self, x: Float[Tensor, "... seq d_model"], positions: Int[Tensor, "... seq"]
    ) -> Float[Tensor, "... seq d"]:
        return self._rotate(self.k_norm(self.wk(x)), positions)

    def _rotate(self, t: Tensor, positions: Tensor) -> Tensor:
        rotated, rest = t.split([self.rope_dim, self.head_dim - self.rope_dim], dim=-1)
        return torch.cat((self.rope(rotated, positions), rest), dim=-1)

    def select(
        self,
        x: Float[Tensor, "... queries d_model"],
        queries: Float[Tensor, "... queries heads d"],
        keys: Float[Tensor, "... keys d"],
        allowed: Bool[Tensor, "queries keys"],
    ) -> Bool[Tensor, "... queries keys"]:
        """``allowed`` narrowed to each query's ``topk`` highest-scoring allowed keys."""
        scores = torch.relu(
            einsum(queries, keys, "... q heads d, ... k d -> ... q heads k")
            / math.sqrt(self.head_dim)
        )
        weights = self.weights_proj(x) / math.sqrt(self.heads)
        index = einsum(weights, scores, "... q heads, ... q heads k -> ... q k")
        # The lowest float, not -inf, marks what may not be chosen: the value DeepSeek's mask
        # adds, so that equal scores are broken between the same candidates.
        index = index.masked_fill(~allowed, torch.finfo(index.dtype).min)
        chosen = index.topk(min(self.topk, index.shape[-1]), dim=-1).indices
        keep = torch.zeros_like(index, dtype=torch.bool).scatter(-1, chosen, True)
        return keep & allowed


class SparseLatentAttention(MultiHeadLatentAttention):
    """Multi-head latent attention in which every query sees only the keys a
    ``LightningIndexer`` picks; both MLA paths (expanded keys without a cache, latent-space
    attention with one) run unchanged under the narrower mask."""

    def __init__(self, indexer: LightningIndexer, **parts: Any) -> None:
        """``parts``: those of ``MultiHeadLatentAttention``, with a query latent (the indexer's
        queries come from it)."""
        super().__init__(**parts)
        if self.q_down_proj is None:
            raise ValueError(
                "sparse attention needs a query latent (q_down_proj): its indexer reads it"
            )
        self.indexer = indexer

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        if token_positions is None:
            token_positions = default_positions(x.shape[-2], self.cached_length, x.device)
        q_latent = self.q_norm(self.q_down_proj(x))
        q_nope, q_rope, latents, k_rope = self.project(x, token_positions, q_latent)
        index_q = self.indexer.queries(q_latent, token_positions)
        index_k = self.indexer.keys(x, token_positions)
        if self.kv_cache is None:
            allowed = causal_mask(x.shape[-2], x.shape[-2], device=x.device)
            keep = self.indexer.select(x, index_q, index_k, allowed)
            return self.attend_expanded(q_nope, q_rope, latents, k_rope, heads_mask(keep))
        packed = torch.cat((k_rope, index_k), dim=-1)
        latents, packed, allowed = self.kv_cache.update(latents, packed, token_positions)
        k_rope, index_k = packed.split([self.rope_dim, self.indexer.head_dim], dim=-1)
        if allowed is None:
            allowed = causal_mask(x.shape[-2], latents.shape[-2], device=x.device)
        keep = self.indexer.select(x, index_q, index_k, allowed)
        return self.attend_folded(q_nope, q_rope, latents, k_rope, heads_mask(keep))


def heads_mask(keep: Bool[Tensor, "... queries keys"]) -> Bool[Tensor, "... 1 queries keys"]:
    """A per-sequence mask broadcast over the attention heads."""
    return rearrange(keep, "... q k -> ... 1 q k")

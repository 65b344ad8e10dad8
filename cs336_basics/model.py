"""The decoder-only Transformer language model."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.block import TransformerBlock
from cs336_basics.config import ModelConfig
from cs336_basics.embedding import Embedding
from cs336_basics.kv_cache import KVCache
from cs336_basics.linear import Linear
from cs336_basics.rmsnorm import RMSNorm


class TransformerLM(nn.Module):
    """Token embedding, ``num_layers`` Transformer blocks, final norm, and the LM head.

    Returns unnormalised next-token logits of shape ``(..., seq, vocab_size)``. State-dict names
    are ``token_embeddings.weight``, ``layers.{i}.…``, ``ln_final.weight`` and
    ``lm_head.weight``; ``ln_final`` exists only with pre-norm blocks (post-norm blocks already
    end in a norm, and the no-norm ablation has none).
    """

    def __init__(
        self,
        config: ModelConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.token_embeddings = Embedding(config.vocab_size, config.d_model, device=device, dtype=dtype)
        self.layers = nn.ModuleList(
            TransformerBlock(config, device=device, dtype=dtype) for _ in range(config.num_layers)
        )
        if config.norm_placement == "pre":
            self.ln_final = RMSNorm(config.d_model, config.norm_eps, device=device, dtype=dtype)
        self.lm_head = Linear(config.d_model, config.vocab_size, device=device, dtype=dtype)

    def forward(
        self,
        token_ids: Int[Tensor, "... seq"],
        token_positions: Int[Tensor, "... seq"] | None = None,
        kv_cache: KVCache | None = None,
    ) -> Float[Tensor, "... seq vocab_size"]:
        """Logits for every position. With ``kv_cache``, ``token_ids`` holds only new tokens."""
        past = 0 if kv_cache is None else kv_cache.length
        if past + token_ids.shape[-1] > self.config.context_length:
            raise ValueError(
                f"sequence of {past + token_ids.shape[-1]} tokens exceeds "
                f"context_length={self.config.context_length}"
            )
        # BEGIN SOLUTION
        x = self.token_embeddings(token_ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, token_positions, None if kv_cache is None else kv_cache.layers[i])
        if self.config.norm_placement == "pre":
            x = self.ln_final(x)
        return self.lm_head(x)
        # END SOLUTION

    def new_kv_cache(self) -> KVCache:
        return KVCache.empty(self.config.num_layers)

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Trainable parameter count (optionally without the token embedding table)."""
        total = sum(p.numel() for p in self.parameters() if p.requires_grad)
        if not include_embeddings:
            total -= self.token_embeddings.weight.numel()
        return total

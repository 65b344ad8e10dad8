"""The decoder-only Transformer language model."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.block import TransformerBlock, norm_layer
from cs336_basics.config import ModelConfig
from cs336_basics.embedding import Embedding
from cs336_basics.kv_cache import KVCache
from cs336_basics.linear import Linear
from cs336_basics.moe import MixtureOfExperts
from cs336_basics.positional import SinusoidalPositionalEncoding


class TransformerLM(nn.Module):
    """Token embedding, ``num_layers`` Transformer blocks, final norm, and the LM head.

    Returns unnormalised next-token logits of shape ``(..., seq, vocab_size)``. State-dict names
    are ``token_embeddings.weight``, ``layers.{i}.…``, ``ln_final.weight`` and
    ``lm_head.weight``; ``ln_final`` exists only with pre-norm blocks (post-norm blocks already
    end in a norm, and the no-norm ablation has none).

    Variants (see ``ModelConfig``): learned absolute positions add ``position_embeddings.weight``
    (``context_length x d_model``) and sinusoidal ones a fixed table, both added to the token
    embeddings; with ``tie_embeddings`` the LM head shares ``token_embeddings.weight``.

    Mixture-of-experts load balancing: after every forward, ``model.aux_loss`` is a scalar
    tensor, ``aux_loss_coef`` times the mean over MoE layers of their load-balancing loss
    (zero for models without MoE), connected to the graph. Training adds it to the loss::

        loss = cross_entropy(model(x), y) + model.aux_loss
    """

    aux_loss: Tensor

    def __init__(
        self,
        config: ModelConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.token_embeddings = Embedding(
            config.vocab_size, config.d_model, device=device, dtype=dtype
        )
        if config.position_encoding == "learned":
            self.position_embeddings = Embedding(
                config.context_length, config.d_model, device=device, dtype=dtype
            )
        elif config.position_encoding == "sinusoidal":
            self.position_embeddings = SinusoidalPositionalEncoding(
                config.d_model, config.context_length, device=device
            )
        self.layers = nn.ModuleList(
            TransformerBlock(config, device=device, dtype=dtype) for _ in range(config.num_layers)
        )
        if config.norm_placement == "pre":
            self.ln_final = norm_layer(config, device=device, dtype=dtype)
        self.lm_head = Linear(config.d_model, config.vocab_size, device=device, dtype=dtype)
        if config.tie_embeddings:
            self.lm_head.weight = self.token_embeddings.weight
        self.aux_loss = torch.zeros(())

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
        if self.config.position_encoding in ("learned", "sinusoidal"):
            if token_positions is None:
                token_positions = torch.arange(
                    past, past + token_ids.shape[-1], device=token_ids.device
                )
            x = x + self.position_embeddings(token_positions).to(x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, token_positions, None if kv_cache is None else kv_cache.layers[i])
        if self.config.norm_placement == "pre":
            x = self.ln_final(x)
        self.aux_loss = self.collect_aux_loss(x)
        return self.lm_head(x)
        # END SOLUTION

    def collect_aux_loss(self, x: Tensor) -> Float[Tensor, ""]:
        moe_losses = [
            layer.ffn.aux_loss for layer in self.layers if isinstance(layer.ffn, MixtureOfExperts)
        ]
        if not moe_losses:
            return torch.zeros((), device=x.device)
        return self.config.aux_loss_coef * torch.stack(moe_losses).mean()

    def new_kv_cache(self) -> KVCache:
        return KVCache.empty(self.config.num_layers, latent=self.config.attention == "mla")

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Trainable parameter count (optionally without the token embedding table).

        A tied LM head is counted once: ``parameters()`` yields shared tensors only once.
        """
        total = sum(p.numel() for p in self.parameters() if p.requires_grad)
        if not include_embeddings:
            total -= self.token_embeddings.weight.numel()
        return total

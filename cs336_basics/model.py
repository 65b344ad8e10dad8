"""The decoder-only Transformer language model."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.block import transformer_block
from cs336_basics.config import ModelConfig
from cs336_basics.embedding import Embedding
from cs336_basics.linear import Linear
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding


class TransformerLM(nn.Module):
    """``token_embeddings``, the ``layers`` (Transformer blocks) in order, ``ln_final``, ``lm_head``.

    Returns unnormalised next-token logits of shape ``(..., seq, vocab_size)``. The model is
    given its parts (``transformer_lm`` builds the handout's); state-dict names are
    ``token_embeddings.weight``, ``layers.{i}.…``, ``ln_final.weight`` and ``lm_head.weight``.
    Sequences longer than ``context_length`` are an error.
    """

    def __init__(
        self,
        token_embeddings: nn.Module,
        layers: Iterable[nn.Module],
        ln_final: nn.Module,
        lm_head: nn.Module,
        context_length: int,
    ) -> None:
        super().__init__()
        self.token_embeddings = token_embeddings
        self.layers = nn.ModuleList(layers)
        self.ln_final = ln_final
        self.lm_head = lm_head
        self.context_length = context_length

    def forward(
        self,
        token_ids: Int[Tensor, "... seq"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq vocab_size"]:
        check_length(token_ids.shape[-1], self.context_length)
        # BEGIN SOLUTION
        x = self.token_embeddings(token_ids)
        for layer in self.layers:
            x = layer(x, token_positions)
        return self.lm_head(self.ln_final(x))
        # END SOLUTION

    def num_parameters(self, include_embeddings: bool = True) -> int:
        """Trainable parameter count (optionally without the token embedding table).

        A tied LM head is counted once: ``parameters()`` yields shared tensors only once.
        """
        total = sum(p.numel() for p in self.parameters() if p.requires_grad)
        if not include_embeddings:
            total -= self.token_embeddings.weight.numel()
        return total


def transformer_lm(
    config: ModelConfig,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> TransformerLM:
    """The handout's model: embeddings, ``num_layers`` pre-norm blocks sharing one RoPE table,
    a final RMSNorm and the LM head, each initialised as the handout says."""
    # BEGIN SOLUTION
    rope = RotaryPositionalEmbedding(
        config.rope_theta, config.d_head, config.context_length, device=device
    )
    return TransformerLM(
        token_embeddings=Embedding(config.vocab_size, config.d_model, device=device, dtype=dtype),
        layers=[
            transformer_block(
                config.d_model,
                config.num_heads,
                config.d_ff,
                rope,
                config.norm_eps,
                device=device,
                dtype=dtype,
            )
            for _ in range(config.num_layers)
        ],
        ln_final=RMSNorm(config.d_model, config.norm_eps, device=device, dtype=dtype),
        lm_head=Linear(config.d_model, config.vocab_size, device=device, dtype=dtype),
        context_length=config.context_length,
    )
    # END SOLUTION


def check_length(seq_len: int, context_length: int) -> None:
    """Raise a clear error for a sequence longer than the model's context window."""
    if seq_len > context_length:
        raise ValueError(f"sequence of {seq_len} tokens exceeds context_length={context_length}")

"""``VariantTransformerLM``: the core ``TransformerLM`` plus absolute positions, KV caches and
the mixture-of-experts load-balancing loss."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.model import TransformerLM, check_length
from cs336_basics.rope import default_positions
from cs336_basics.variants.decoding.kv_cache import cached_length
from cs336_basics.variants.moe import MixtureOfExperts


class VariantTransformerLM(TransformerLM):
    """A ``TransformerLM`` whose positions continue after the tokens in its KV caches (inside
    ``kv_caches``), and whose first layer's input may add absolute ``position_embeddings`` (a
    learned ``Embedding`` of ``context_length`` rows, GPT-2; or the fixed sinusoidal table).

    The forward pass is the core one: this class only chooses the positions it runs at. The
    core forward hands every layer ``(x, token_positions)``, so absolute positions are added to
    the first layer's input by a forward pre-hook on it, at those positions.

    ``aux_loss()``: ``aux_loss_coef`` times the mean load-balancing loss of the MoE layers in
    the last forward call (zero without MoE), connected to the graph. Training adds it::

        loss = cross_entropy(model(x), y) + model.aux_loss()
    """

    def __init__(
        self,
        token_embeddings: nn.Module,
        layers: Iterable[nn.Module],
        ln_final: nn.Module,
        lm_head: nn.Module,
        context_length: int,
        position_embeddings: nn.Module | None = None,
        aux_loss_coef: float = 0.0,
    ) -> None:
        super().__init__(token_embeddings, layers, ln_final, lm_head, context_length)
        self.position_embeddings = position_embeddings
        self.aux_loss_coef = aux_loss_coef
        if position_embeddings is not None:
            self.layers[0].register_forward_pre_hook(self._add_absolute_positions)

    def forward(
        self,
        token_ids: Int[Tensor, "... seq"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq vocab_size"]:
        """The core forward, by default at the positions after those in the KV caches."""
        if token_positions is None:
            seq_len, past = token_ids.shape[-1], cached_length(self)
            check_length(past + seq_len, self.context_length)
            token_positions = default_positions(seq_len, past, token_ids.device)
        # Given positions are the caller's (and are checked where they index a table); not
        # reading the cache's length then keeps a compiled decoding step free of it.
        return super().forward(token_ids, token_positions)

    def _add_absolute_positions(
        self, layer: nn.Module, args: tuple[Tensor, ...]
    ) -> tuple[Tensor, Tensor]:
        """The first layer's arguments ``(x, token_positions)`` with the positions' embeddings
        added to ``x`` (positions ``0, 1, ...`` when a caller gave the layer none)."""
        x, token_positions = args if len(args) == 2 else (args[0], None)
        if token_positions is None:
            token_positions = default_positions(x.shape[-2], device=x.device)
        return x + self.position_embeddings(token_positions).to(x.dtype), token_positions

    def aux_loss(self) -> Float[Tensor, ""]:
        experts = [m for m in self.modules() if isinstance(m, MixtureOfExperts)]
        if not experts:
            return torch.zeros((), device=self.lm_head.weight.device)
        return self.aux_loss_coef * torch.stack([moe.aux_loss() for moe in experts]).mean()

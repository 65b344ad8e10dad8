"""Key-value cache for incremental decoding."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float
from torch import Tensor


@dataclass
class LayerKVCache:
    """Keys and values that one attention layer has already computed, ``(..., heads, seq, d)``."""

    keys: Tensor | None = None
    values: Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def append(
        self, keys: Float[Tensor, "... heads new d_k"], values: Float[Tensor, "... heads new d_v"]
    ) -> tuple[Tensor, Tensor]:
        """Store the new positions and return keys and values for every position so far."""
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat((self.keys, keys), dim=-2)
            self.values = torch.cat((self.values, values), dim=-2)
        return self.keys, self.values


@dataclass
class KVCache:
    """One ``LayerKVCache`` per transformer layer; pass it to ``TransformerLM.forward``.

    Each forward call with a cache feeds only the new tokens: positions continue from
    ``length``, and each new query attends to every cached key plus the causal prefix of the
    new ones.
    """

    layers: list[LayerKVCache] = field(default_factory=list)

    @classmethod
    def empty(cls, num_layers: int) -> KVCache:
        return cls([LayerKVCache() for _ in range(num_layers)])

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0

    def num_bytes(self) -> int:
        """Memory held by the cached tensors."""
        return sum(
            t.numel() * t.element_size()
            for layer in self.layers
            for t in (layer.keys, layer.values)
            if t is not None
        )

"""Key-value cache for incremental decoding."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float
from torch import Tensor

from cs336_basics.config import ModelConfig


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

    def tensors(self) -> tuple[Tensor | None, ...]:
        return self.keys, self.values


@dataclass
class LatentKVCache:
    """What a multi-head latent attention layer caches: per position, the compressed key/value
    latent ``(..., seq, kv_lora_rank)`` and the one RoPE key shared by all heads
    ``(..., seq, qk_rope_head_dim)``, instead of full per-head keys and values."""

    latents: Tensor | None = None
    rope_keys: Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.latents is None else self.latents.shape[-2]

    def append(
        self, latents: Float[Tensor, "... new rank"], rope_keys: Float[Tensor, "... new d_rope"]
    ) -> tuple[Tensor, Tensor]:
        """Store the new positions and return latents and RoPE keys for every position so far."""
        if self.latents is None or self.rope_keys is None:
            self.latents, self.rope_keys = latents, rope_keys
        else:
            self.latents = torch.cat((self.latents, latents), dim=-2)
            self.rope_keys = torch.cat((self.rope_keys, rope_keys), dim=-2)
        return self.latents, self.rope_keys

    def tensors(self) -> tuple[Tensor | None, ...]:
        return self.latents, self.rope_keys


@dataclass
class KVCache:
    """One ``LayerKVCache`` (or ``LatentKVCache``) per layer; pass it to ``TransformerLM.forward``.

    Each forward call with a cache feeds only the new tokens: positions continue from
    ``length``, and each new query attends to every cached key plus the causal prefix of the
    new ones.
    """

    layers: list[LayerKVCache | LatentKVCache] = field(default_factory=list)

    @classmethod
    def empty(cls, num_layers: int, latent: bool = False) -> KVCache:
        layer_class = LatentKVCache if latent else LayerKVCache
        return cls([layer_class() for _ in range(num_layers)])

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0

    def num_bytes(self) -> int:
        """Memory held by the cached tensors."""
        return sum(
            t.numel() * t.element_size()
            for layer in self.layers
            for t in layer.tensors()
            if t is not None
        )


def kv_cache_elements_per_token(config: ModelConfig) -> int:
    """Numbers cached per token over all layers: ``bytes = elements * bytes_per_element``.

    MHA stores a key and a value per head, ``2 * num_heads * d_head`` per layer; GQA and MQA
    only their shared heads, ``2 * num_kv_heads * d_head``; MLA one latent and one RoPE key,
    ``kv_lora_rank + qk_rope_head_dim``, whatever the number of heads.
    """
    if config.attention == "mla":
        per_layer = config.kv_lora_rank + config.qk_rope_head_dim
    else:
        per_layer = 2 * config.kv_heads * config.d_head
    return config.num_layers * per_layer

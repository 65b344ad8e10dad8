"""Key-value caches for incremental decoding, kept as state of the attention modules.

As in torchtune, a cache lives in the attention layer that fills it: inside ``with
kv_caches(model):`` every cache-capable attention layer (a ``CachingAttention``) keeps the keys
and values it has computed, so each later call feeds only the new tokens, whose positions
continue from ``cached_length(model)``. Outside the block the caches are gone and the model is
the plain function of its whole input again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor, nn


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


class CachingAttention(nn.Module):
    """Base of the attention layers that can keep a KV cache: ``kv_cache`` is ``None`` (no
    caching, the default) or the layer's cache, which ``kv_caches`` sets and removes. The cache
    is plain state, never a buffer, so it stays out of state dicts."""

    cache_class: type[LayerKVCache] | type[LatentKVCache] = LayerKVCache
    kv_cache: LayerKVCache | LatentKVCache | None = None

    @property
    def cached_length(self) -> int:
        return 0 if self.kv_cache is None else self.kv_cache.length


def caching_layers(model: nn.Module) -> list[CachingAttention]:
    return [module for module in model.modules() if isinstance(module, CachingAttention)]


@contextmanager
def kv_caches(model: nn.Module) -> Iterator[nn.Module]:
    """Give every cache-capable attention layer of ``model`` an empty cache for the block."""
    layers = caching_layers(model)
    if not layers:
        raise ValueError(
            "this model has no cache-capable attention; build it from a VariantConfig "
            "(cs336_basics.variants) to decode with a KV cache"
        )
    for layer in layers:
        layer.kv_cache = layer.cache_class()
    try:
        yield model
    finally:
        for layer in layers:
            layer.kv_cache = None


def cached_length(model: nn.Module) -> int:
    """Tokens already in ``model``'s KV caches (0 outside ``kv_caches``)."""
    layers = caching_layers(model)
    return layers[0].cached_length if layers else 0


def kv_cache_num_bytes(model: nn.Module) -> int:
    """Memory held by the tensors in ``model``'s KV caches."""
    return sum(
        t.numel() * t.element_size()
        for layer in caching_layers(model)
        if layer.kv_cache is not None
        for t in layer.kv_cache.tensors()
        if t is not None
    )

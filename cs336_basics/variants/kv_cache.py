"""Key-value caches for incremental decoding, kept as state of the attention modules.

As in torchtune, a cache lives in the attention layer that fills it: inside ``with
kv_caches(model):`` every cache-capable attention layer (a ``CachingAttention``) keeps the keys
and values it has computed, so each later call feeds only the new tokens, whose positions
continue from ``cached_length(model)``. Outside the block the caches are gone and the model is
the plain function of its whole input again.

Every cache has one interface, ``update(first, second, positions) -> (first, second, mask)``:
the layer hands it the new tokens' two cached tensors and gets back those of every position
it may attend to, with a mask when the plain causal one does not apply. The default caches grow
by concatenation; ``kv_caches(model, static_length=n)`` gives every layer a preallocated
``StaticKVCache`` of ``n`` positions instead (``static_kv_cache.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.variants.static_kv_cache import StaticKVCache


@dataclass
class LayerKVCache:
    """Keys and values that one attention layer has already computed, ``(..., heads, seq, d)``."""

    keys: Tensor | None = None
    values: Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def update(
        self,
        keys: Float[Tensor, "... heads new d_k"],
        values: Float[Tensor, "... heads new d_v"],
        positions: Int[Tensor, "... new"] | None = None,
    ) -> tuple[Tensor, Tensor, None]:
        """Append the new positions; return keys and values for every position so far, and no
        mask (the new queries are the last positions: the plain causal mask applies).
        ``positions`` are not needed, as appended positions continue from ``length``."""
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat((self.keys, keys), dim=-2)
            self.values = torch.cat((self.values, values), dim=-2)
        return self.keys, self.values, None

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

    def update(
        self,
        latents: Float[Tensor, "... new rank"],
        rope_keys: Float[Tensor, "... new d_rope"],
        positions: Int[Tensor, "... new"] | None = None,
    ) -> tuple[Tensor, Tensor, None]:
        """As ``LayerKVCache.update``, for latents and RoPE keys."""
        if self.latents is None or self.rope_keys is None:
            self.latents, self.rope_keys = latents, rope_keys
        else:
            self.latents = torch.cat((self.latents, latents), dim=-2)
            self.rope_keys = torch.cat((self.rope_keys, rope_keys), dim=-2)
        return self.latents, self.rope_keys, None

    def tensors(self) -> tuple[Tensor | None, ...]:
        return self.latents, self.rope_keys


class CachingAttention(nn.Module):
    """Base of the attention layers that can keep a KV cache: ``kv_cache`` is ``None`` (no
    caching, the default) or the layer's cache, which ``kv_caches`` sets and removes. The cache
    is plain state, never a buffer, so it stays out of state dicts. ``cache_class`` is the
    layer's growing cache; any layer can use a ``StaticKVCache``."""

    cache_class: type[LayerKVCache] | type[LatentKVCache] = LayerKVCache
    kv_cache: LayerKVCache | LatentKVCache | StaticKVCache | None = None

    @property
    def cached_length(self) -> int:
        return 0 if self.kv_cache is None else self.kv_cache.length


def caching_layers(model: nn.Module) -> list[CachingAttention]:
    return [module for module in model.modules() if isinstance(module, CachingAttention)]


@contextmanager
def kv_caches(model: nn.Module, static_length: int | None = None) -> Iterator[nn.Module]:
    """Give every cache-capable attention layer of ``model`` an empty cache for the block: one
    that grows as tokens come, or with ``static_length`` a ``StaticKVCache`` preallocated for
    that many positions (at the first call, for that call's batch shape)."""
    layers = caching_layers(model)
    if not layers:
        raise ValueError(
            "this model has no cache-capable attention; build it from a VariantConfig "
            "(cs336_basics.variants) to decode with a KV cache"
        )
    for layer in layers:
        layer.kv_cache = (
            layer.cache_class() if static_length is None else StaticKVCache(static_length)
        )
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

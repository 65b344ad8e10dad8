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

from cs336_basics.variants.decoding.static_kv_cache import StaticKVCache


@dataclass
class GrowingKVCache:
    """The two per-position tensors one attention layer has already computed: keys and values
    ``(..., heads, seq, d)``, or multi-head latent attention's latents ``(..., seq, rank)`` and
    shared RoPE keys ``(..., seq, d_rope)``. Each ``update`` appends along the ``seq`` axis."""

    first: Tensor | None = None
    second: Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.first is None else self.first.shape[-2]

    def update(
        self,
        first: Float[Tensor, "... new d_first"],
        second: Float[Tensor, "... new d_second"],
        positions: Int[Tensor, "... new"] | None = None,
    ) -> tuple[Tensor, Tensor, None]:
        """Append the new positions; return both tensors for every position so far, and no
        mask (the new queries are the last positions: the plain causal mask applies).
        ``positions`` are not needed, as appended positions continue from ``length``."""
        if self.first is None or self.second is None:
            self.first, self.second = first, second
        else:
            self.first = torch.cat((self.first, first), dim=-2)
            self.second = torch.cat((self.second, second), dim=-2)
        return self.first, self.second, None

    def tensors(self) -> tuple[Tensor | None, ...]:
        return self.first, self.second


class CachingAttention(nn.Module):
    """Base of the attention layers that can keep a KV cache: ``kv_cache`` is ``None`` (no
    caching, the default) or the layer's cache, which ``kv_caches`` sets and removes. The cache
    is plain state, never a buffer, so it stays out of state dicts."""

    kv_cache: GrowingKVCache | StaticKVCache | None = None

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
        layer.kv_cache = GrowingKVCache() if static_length is None else StaticKVCache(static_length)
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

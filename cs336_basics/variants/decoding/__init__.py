"""Decoding of the variant models: KV caches and the loops that use them.

It stands on the core alone (the architecture's attention modules keep their cache through
``kv_cache.CachingAttention``), so the architecture imports it and never the other way.

- ``kv_cache``: KV caches as attention-module state (``kv_caches(model)``)
- ``static_kv_cache``: the preallocated, written-in-place kind
- ``decode_steps``: the model call of a decoding loop (any cache, optionally a compiled step)
- ``generation``: cached and batched decoding (``generate_cached``, ``generate_batch``)
"""

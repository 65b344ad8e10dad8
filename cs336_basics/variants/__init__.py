"""Architecture variants of modern (and older) LLMs, composed on top of the core.

The core modules (``cs336_basics.attention``, ``block``, ``model``, ...) are the assignment and
nothing else. This package adds parts with the same call signatures and state-dict names, and
``builders.build_variant_model`` assembles them with the core ``TransformerBlock`` and
``TransformerLM`` for a ``VariantConfig``; ``cs336_basics.builder.build_model`` is the one entry
point for both kinds of config.

- ``config``: ``VariantConfig``, every variant switch, validated in one place
- ``attention``: grouped-query / multi-query attention, QK-norm, biases, bidirectional, fused
- ``kv_cache``: KV caches as attention-module state (``kv_caches(model)``);
  ``static_kv_cache``: the preallocated, written-in-place kind; ``decode_steps``: the model call
  of a decoding loop (any cache, optionally a compiled step); ``generation``: cached and batched
  decoding
- ``mla``: multi-head latent attention; ``moe``: mixture of experts (``aux_loss()``)
- ``feedforward``: ungated SiLU/GELU/ReLU MLPs; ``linear``: biases; ``layernorm``
- ``positional``: sinusoidal positions; ``block``: post-norm; ``model``: absolute positions,
  caches and the MoE loss on top of ``TransformerLM``
- ``encoder_decoder``: the original Transformer; ``hf_convert``: HF checkpoints in and out
- ``accounting``: parameters, FLOPs and activations of the variants
"""

from cs336_basics.variants.builders import build_variant_model
from cs336_basics.variants.config import VariantConfig

__all__ = ["VariantConfig", "build_variant_model"]

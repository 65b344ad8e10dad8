"""Architecture variants of modern (and older) LLMs, composed on top of the core.

The core modules (``cs336_basics.attention``, ``block``, ``model``, ...) are the assignment and
nothing else; they never import this package. Importing it registers the variants with the core
(``cs336_basics.registry``): ``VariantConfig`` as a model family (``builders.build_variant_model``
builds it, ``accounting`` counts it), the ``adamw_foreach`` optimizer and the ``kv_cache``
decoder. The runner imports it where it is installed (``cs336_basics.runner.extensions``).

- ``config``: ``VariantConfig``, every variant switch, validated in one place
- ``families``: named builders, one per published family (``llama3_2_1b``, ``qwen3_0_6b``,
  ``mixtral``, ...), and ``config_from_hf``; ``published``: their published configs
- ``attention``: ``SelfAttention`` from parts (projections, QK norms, RoPE, kernel): GQA/MQA are
  narrower key/value projections
- ``kv_cache``: KV caches as attention-module state (``kv_caches(model)``);
  ``static_kv_cache``: the preallocated, written-in-place kind; ``decode_steps``: the model call
  of a decoding loop (any cache, optionally a compiled step); ``generation``: cached and batched
  decoding
- ``mla``: multi-head latent attention; ``moe``: ``Router`` + ``MixtureOfExperts`` from parts
  (``aux_loss()``)
- ``feedforward``: ungated SiLU/GELU/ReLU MLPs; ``linear``: biases; ``layernorm``
- ``positional``: sinusoidal positions; ``block``: post-norm; ``model``: absolute positions,
  caches and the MoE loss on top of ``TransformerLM``
- ``encoder_decoder``: the original Transformer; ``hf_convert``: HF checkpoints in and out
- ``accounting``: parameters, FLOPs and activations of the variants
"""

from cs336_basics.registry import (
    ModelFamily,
    register_decoder,
    register_family,
    register_optimizer,
)
from cs336_basics.variants import accounting
from cs336_basics.variants.builders import build_variant_model
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.foreach_adamw import ForeachAdamW
from cs336_basics.variants.generation import generate_cached

register_family(ModelFamily(VariantConfig, build_variant_model, accounting))
register_optimizer("adamw_foreach", ForeachAdamW)
register_decoder("kv_cache", generate_cached)

__all__ = ["VariantConfig", "build_variant_model"]

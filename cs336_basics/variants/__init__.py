"""Architecture variants of modern (and older) LLMs, composed on top of the core.

The core modules (``cs336_basics.attention``, ``block``, ``model``, ...) are the assignment and
nothing else; they never import this package. Importing it registers the variants with the core
(``cs336_basics.registry``): ``VariantConfig`` as a model kind (``builders.build_variant_model``
builds it, ``accounting`` counts it), the ``adamw_foreach`` optimizer and the ``kv_cache``
decoder. The runner imports it where it is installed (``cs336_basics.runner.extensions``).

- ``config``: ``VariantConfig``, a small top level with attention, MLA, sparse-attention and MoE
  sections, validated in one place; ``flat_config``: the earlier flat format, still read
- ``attention``: ``SelfAttention`` from parts (projections, QK norms, RoPE, kernel): GQA/MQA are
  narrower key/value projections
- ``mla``: multi-head latent attention (``dsa``: its sparse form); ``moe``: ``Router`` +
  ``MixtureOfExperts`` from parts (``aux_loss()``)
- ``feedforward``: ungated SiLU/GELU/ReLU MLPs; ``linear``: biases; ``layernorm``
- ``positional``: sinusoidal positions; ``block``: post-norm; ``model``: absolute positions,
  caches and the MoE loss on top of ``TransformerLM``; ``builders``: the model from a config
- ``encoder_decoder``: the original Transformer
- ``accounting``: parameters, FLOPs and activations of the variants

Two subpackages sit apart from the architecture: ``decoding`` (KV caches, decode steps, cached
and batched generation; below the architecture, which keeps its caches) and ``hf`` (Hugging Face
interop: named builders of published families, checkpoints, tokenizers; above it).
"""

from cs336_basics.registry import (
    ModelKind,
    register_decoder,
    register_model_kind,
    register_optimizer,
)
from cs336_basics.variants import accounting
from cs336_basics.variants.builders import build_variant_model
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.decoding.generation import generate_cached
from cs336_basics.variants.foreach_adamw import ForeachAdamW

register_model_kind(ModelKind(VariantConfig, build_variant_model, accounting))
register_optimizer("adamw_foreach", ForeachAdamW)
register_decoder("kv_cache", generate_cached)

__all__ = ["VariantConfig", "build_variant_model"]

"""``build_model``: the one place a config becomes a model, for training, the pipeline and the CLI.

A plain ``ModelConfig`` builds the handout's ``TransformerLM`` (``transformer_lm``); a
``VariantConfig`` builds the variant it describes, where the architecture variants are
installed. ``generate_function`` picks the decoding loop the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate
from cs336_basics.model import TransformerLM, transformer_lm


def build_model(
    config: ModelConfig,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> TransformerLM:
    """The model ``config`` describes, freshly initialised on ``device``."""
    if type(config) is ModelConfig:
        return transformer_lm(config, device=device, dtype=dtype)
    from cs336_basics.variants.builders import build_variant_model

    return build_variant_model(config, device=device, dtype=dtype)


def generate_function(
    use_kv_cache: bool = True, static_cache: bool = False, compile: bool = False
) -> Callable[..., list[int]]:
    """``generate``, or with ``use_kv_cache`` the variants' ``generate_cached`` (same
    parameters), which decodes cache-capable models one new token per step, over a static
    (preallocated) cache with ``static_cache``, with a compiled step with ``compile``; both
    need the KV cache and the variants."""
    if not use_kv_cache:
        if static_cache or compile:
            raise ValueError("a static KV cache and a compiled step need the KV cache")
        return generate
    try:
        from cs336_basics.variants.generation import generate_cached
    except ImportError:  # the base handout: no variants, no caches
        if static_cache or compile:
            raise ValueError(
                "a static KV cache and a compiled step need the architecture variants"
            ) from None
        return generate
    if static_cache or compile:
        return functools.partial(generate_cached, static_cache=static_cache, compile=compile)
    return generate_cached

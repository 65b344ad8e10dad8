"""The extensions the runner loads, and what it picks from them.

The core never imports an extension; the runner does, so that ``cs336 train`` reads a variant's
config, ``cs336 generate`` decodes with a KV cache and the trainer finds ``adamw_foreach``. The
base handout ships no variants: then only the core's own model, optimizer and decoder exist.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable

from cs336_basics import registry
from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate

# Imported before the commands that read or build models run; each registers itself with the
# registry. The base handout ships no extension (its copy of this file leaves the tuple empty).
EXTENSIONS: tuple[str, ...] = ()
# BEGIN EXTENSION
EXTENSIONS = ("cs336_basics.variants",)
# END EXTENSION


def load_extensions() -> None:
    """Import every extension in ``EXTENSIONS`` that is installed (a missing one is skipped, an
    import error inside one is not)."""
    for name in EXTENSIONS:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


def model_config_class() -> type[ModelConfig]:
    """The config class with every model field this install knows: the last registered one (the
    variants' ``VariantConfig``), else the handout's ``ModelConfig``."""
    load_extensions()
    return (registry.config_classes() or [ModelConfig])[-1]


def generate_function(
    use_kv_cache: bool = True, static_cache: bool = False, compile: bool = False
) -> Callable[..., list[int]]:
    """``generate``, or with ``use_kv_cache`` the registered ``"kv_cache"`` decoder (same
    parameters; the variants' ``generate_cached``), which decodes cache-capable models one new
    token per step, over a static (preallocated) cache with ``static_cache``, with a compiled
    step with ``compile``; both need the KV cache and the variants."""
    if not use_kv_cache:
        if static_cache or compile:
            raise ValueError("a static KV cache and a compiled step need the KV cache")
        return generate
    load_extensions()
    cached = registry.decoder("kv_cache")
    if cached is None:  # the base handout: no variants, no caches
        if static_cache or compile:
            raise ValueError("a static KV cache and a compiled step need the architecture variants")
        return generate
    if static_cache or compile:
        return functools.partial(cached, static_cache=static_cache, compile=compile)
    return cached

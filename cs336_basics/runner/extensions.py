"""The extensions the runner loads, and what it picks from them.

The core never imports an extension; the runner does, so that ``cs336 train`` reads a variant's
config, ``cs336 generate`` decodes with a KV cache and the trainer finds ``adamw_foreach``. An
extension is any subpackage of ``cs336_basics`` but the runner: where a file lives decides what
is loaded, so an install with no other subpackage loads none, and only the core's own model,
optimizer and decoder exist.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType

import cs336_basics
from cs336_basics import registry
from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate

# The subpackage that loads the extensions, not one of them.
RUNNER = "runner"


def extension_names(package: ModuleType = cs336_basics) -> list[str]:
    """The extensions this install has: the subpackages of ``package`` but the runner, by name
    (a fixed order, whatever order the file system lists them in)."""
    found = pkgutil.iter_modules(package.__path__, prefix=package.__name__ + ".")
    return sorted(m.name for m in found if m.ispkg and m.name != f"{package.__name__}.{RUNNER}")


def load_extensions(package: ModuleType = cs336_basics) -> None:
    """Import every extension of ``package`` this install has, before the commands that read or
    build models run; each registers itself with the registry. One that is not installed is
    not looked for; an import error inside one propagates."""
    for name in extension_names(package):
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

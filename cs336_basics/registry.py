"""Extension points: how architecture variants plug into the core without the core knowing them.

The core builds, accounts for and decodes the handout's ``TransformerLM`` from a ``ModelConfig``.
An extension registers, when it is imported, what the core cannot know:

- a ``ModelKind`` for each config class it adds: how to build that model and account for it
  (``ModelConfig.from_dict`` also reads the fields of every registered config class);
- optimizers, by the name a ``TrainConfig`` gives them;
- decoders (generation loops), by name.

The core looks these up here and never imports an extension; the runner decides which extensions
to import (``cs336_basics.runner.extensions``). Registering the same name twice replaces the entry,
so re-importing an extension is harmless.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # type names only; the registry imports no module of the project
    import torch
    from torch import nn


class Accounting(Protocol):
    """Paper accounting of a model kind (see ``cs336_basics.accounting`` for the conventions)."""

    def parameter_counts(self, config: Any) -> dict[str, int]: ...
    def forward_flops(self, config: Any, batch_size: int, seq_len: int) -> dict[str, int]: ...
    def activation_counts(self, config: Any, batch_size: int, seq_len: int) -> dict[str, int]: ...
    def kv_cache_elements_per_token(self, config: Any) -> int: ...


@dataclass(frozen=True)
class ModelKind:
    """What the core needs of a config class it does not define.

    ``build(config, device=None, dtype=None)`` returns the freshly initialised model;
    ``accounting`` counts its parameters, FLOPs, activations and KV cache.
    """

    config_class: type  # a subclass of cs336_basics.config.ModelConfig
    build: Callable[..., nn.Module]
    accounting: Accounting


_MODEL_KINDS: dict[type, ModelKind] = {}
_OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {}
_DECODERS: dict[str, Callable[..., list[int]]] = {}


def register_model_kind(kind: ModelKind) -> None:
    _MODEL_KINDS[kind.config_class] = kind


def model_kind_of(config: object) -> ModelKind | None:
    """The registered model kind of ``config``'s class (or its nearest registered base class);
    ``None`` for the handout's own ``ModelConfig``."""
    for config_class in type(config).__mro__:
        if config_class in _MODEL_KINDS:
            return _MODEL_KINDS[config_class]
    return None


def config_classes() -> list[type]:
    """Every registered config class, in registration order."""
    return [kind.config_class for kind in _MODEL_KINDS.values()]


def register_optimizer(name: str, optimizer_class: type[torch.optim.Optimizer]) -> None:
    _OPTIMIZERS[name] = optimizer_class


def optimizer_names() -> list[str]:
    return sorted(_OPTIMIZERS)


def optimizer_class(name: str) -> type[torch.optim.Optimizer]:
    """The optimizer registered as ``name``; ``KeyError`` naming the registered ones otherwise."""
    if name not in _OPTIMIZERS:
        known = ", ".join(optimizer_names()) or "none"
        raise KeyError(f"no optimizer is registered as {name!r} (registered: {known})")
    return _OPTIMIZERS[name]


def register_decoder(name: str, decode: Callable[..., list[int]]) -> None:
    _DECODERS[name] = decode


def decoder(name: str) -> Callable[..., list[int]] | None:
    """The decoding loop registered as ``name``, or ``None`` when no extension provides it."""
    return _DECODERS.get(name)

"""Checkpoints: model, optimizer, iteration, config and RNG states in one file.

The file is an ordinary ``torch.save`` archive holding only tensors and plain Python values,
so it loads with ``torch.load(weights_only=True)``: opening a checkpoint never runs code.
Writes to a path go through a temporary file and ``os.replace``, so a crash mid-write leaves
the previous checkpoint intact.
"""

from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np
import torch
from torch import nn

from cs336_basics.atomic_write import atomic_writer
from cs336_basics.builder import build_model
from cs336_basics.config import ModelConfig
from cs336_basics.model import TransformerLM

FORMAT = "cs336-checkpoint"
VERSION = 1

# ``io.IOBase`` is listed because runtime type checkers do not treat ``BytesIO`` as ``BinaryIO``.
Destination = str | os.PathLike | BinaryIO | IO[bytes] | io.IOBase


class CheckpointError(ValueError):
    """The file is missing, truncated, or not a checkpoint written by this module."""


def unwrap_model(model: nn.Module) -> nn.Module:
    """The underlying module of a ``DistributedDataParallel`` and/or ``torch.compile`` wrapper."""
    while True:
        if isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        else:
            return model


def rng_states() -> dict[str, Any]:
    """Every global random-number generator's state, in ``weights_only``-loadable form."""
    _, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "position": int(position),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
    }


def restore_rng_states(states: dict[str, Any]) -> None:
    """Inverse of ``rng_states``."""
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))
    numpy_state = states["numpy"]
    np.random.set_state(
        (
            "MT19937",
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["position"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )


def save_checkpoint(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    iteration: int,
    out: Destination,
    config: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write a checkpoint to a path (atomically) or to a binary file-like object.

    ``config`` is stored verbatim (e.g. ``ModelConfig.to_dict()``) so a checkpoint alone can
    rebuild its model; ``extra`` carries loop state such as a data sampler's generator.
    """
    # BEGIN SOLUTION
    checkpoint = {
        "model": unwrap_model(model).state_dict(),
        "optimizer": None if optimizer is None else optimizer.state_dict(),
        "iteration": int(iteration),
    }
    # END SOLUTION
    checkpoint.update(
        format=FORMAT, version=VERSION, config=config, rng=rng_states(), extra=extra or {}
    )
    if not isinstance(out, (str, os.PathLike)):
        torch.save(checkpoint, out)
        return
    with atomic_writer(out) as handle:
        torch.save(checkpoint, handle)


def read_checkpoint(src: Destination) -> dict[str, Any]:
    """Load and validate a checkpoint's contents (tensors on CPU) without applying them."""
    name = (
        os.fspath(src)
        if isinstance(src, (str, os.PathLike))
        else getattr(src, "name", "<file object>")
    )
    if isinstance(src, (str, os.PathLike)) and not Path(src).is_file():
        raise CheckpointError(f"checkpoint not found: {name}")
    try:
        checkpoint = torch.load(src, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for bad bytes; all mean the same here
        reason = str(error).split(". ")[0]
        raise CheckpointError(
            f"cannot read checkpoint {name}: the file is truncated, corrupted, or not a torch "
            f"checkpoint ({type(error).__name__}: {reason})"
        ) from error
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        raise CheckpointError(
            f"{name} is not a cs336 checkpoint (expected a dict with format={FORMAT!r}; "
            "was it written by save_checkpoint?)"
        )
    if checkpoint.get("version") != VERSION:
        raise CheckpointError(
            f"{name} has checkpoint version {checkpoint.get('version')}, this code reads version {VERSION}"
        )
    return checkpoint


def load_checkpoint(
    src: Destination,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    restore_rng: bool = False,
) -> int:
    """Restore ``model`` (and ``optimizer``, and optionally the global RNGs); return the iteration."""
    checkpoint = read_checkpoint(src)
    # BEGIN SOLUTION
    unwrap_model(model).load_state_dict(checkpoint["model"])
    if optimizer is not None:
        if checkpoint["optimizer"] is None:
            raise CheckpointError("the checkpoint holds no optimizer state")
        optimizer.load_state_dict(checkpoint["optimizer"])
    # END SOLUTION
    if restore_rng:
        restore_rng_states(checkpoint["rng"])
    return checkpoint["iteration"]


def model_from_checkpoint(
    src: Destination, device: torch.device | str | None = None
) -> TransformerLM:
    """Rebuild the ``TransformerLM`` a training run saved, from the config stored beside its weights."""
    checkpoint = read_checkpoint(src)
    config = checkpoint["config"] or {}
    model_settings = config.get("model", config)  # a training config nests the model's
    try:
        model_config = ModelConfig.from_dict(model_settings)
    except (TypeError, ValueError) as error:
        raise CheckpointError(
            "the checkpoint does not record a usable model config (save it with "
            f"config=...; cs336 train does): {error}"
        ) from error
    model = build_model(model_config, device=device)
    model.load_state_dict(checkpoint["model"])
    return model

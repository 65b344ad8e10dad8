"""Saving and restoring a training run (model, optimizer, step)."""

import os
import tempfile

import torch
from torch import nn

from .failures import CheckpointUnreadable


def _bare(model):
    """The module inside torch.compile and DistributedDataParallel wrappers."""
    while hasattr(model, "_orig_mod") or isinstance(model, nn.parallel.DistributedDataParallel):
        model = model._orig_mod if hasattr(model, "_orig_mod") else model.module
    return model


def save_state(model, optimizer, step, destination):
    payload = {
        "weights": _bare(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": int(step),
    }
    if not isinstance(destination, (str, os.PathLike)):
        torch.save(payload, destination)
        return
    folder = os.path.dirname(os.path.abspath(destination))
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(payload, file)
        os.replace(temporary, destination)
    except BaseException:
        os.unlink(temporary)
        raise


def restore_state(source, model, optimizer):
    try:
        payload = torch.load(source, map_location="cpu", weights_only=True)
    except Exception as error:
        raise CheckpointUnreadable(f"cannot read checkpoint {source}: {error}") from error
    if not isinstance(payload, dict) or not {"weights", "optimizer", "step"} <= set(payload):
        raise CheckpointUnreadable(f"{source} is not a checkpoint written by save_state")
    _bare(model).load_state_dict(payload["weights"])
    optimizer.load_state_dict(payload["optimizer"])
    return payload["step"]

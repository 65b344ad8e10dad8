"""Random training batches drawn from a token array (loading it is ``cs336_basics.token_arrays``)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from jaxtyping import Int
from torch import Tensor

from cs336_basics.devices import resolve_device


def sample_start_indices(
    num_tokens: int, batch_size: int, context_length: int, generator: torch.Generator | None = None
) -> Int[Tensor, " batch_size"]:
    """Uniformly random window starts: every ``i`` with ``i + context_length < num_tokens``.

    Each window needs ``context_length`` inputs plus one more token for the last target.
    """
    if batch_size < 1 or context_length < 1:
        raise ValueError(
            f"batch_size and context_length must be positive; got {batch_size}, {context_length}"
        )
    if num_tokens <= context_length:
        raise ValueError(
            f"the dataset has {num_tokens} tokens, but a window of context_length={context_length} "
            f"needs at least {context_length + 1}"
        )
    # BEGIN SOLUTION
    return torch.randint(0, num_tokens - context_length, (batch_size,), generator=generator)
    # END SOLUTION


def gather_windows(
    dataset: npt.NDArray,
    starts: Int[Tensor, " batch_size"],
    context_length: int,
    device: str | torch.device,
) -> tuple[Int[Tensor, "batch_size context_length"], Int[Tensor, "batch_size context_length"]]:
    """Inputs ``dataset[s : s + context_length]`` and targets shifted by one, as int64 on ``device``."""
    device = resolve_device(device)
    # BEGIN SOLUTION
    offsets = np.arange(context_length + 1)
    windows = np.asarray(dataset[starts.numpy()[:, None] + offsets], dtype=np.int64)
    windows = torch.from_numpy(windows)
    if device.type == "cuda":  # pinned host memory lets the copy overlap with compute
        windows = windows.pin_memory().to(device, non_blocking=True)
    else:
        windows = windows.to(device)
    return windows[:, :-1], windows[:, 1:]
    # END SOLUTION


def get_batch(
    dataset: npt.NDArray,
    batch_size: int,
    context_length: int,
    device: str | torch.device,
    generator: torch.Generator | None = None,
) -> tuple[Int[Tensor, "batch_size context_length"], Int[Tensor, "batch_size context_length"]]:
    """A random batch of ``(inputs, targets)`` windows from a 1-D token array or ``np.memmap``.

    ``targets[b, t] == inputs[b, t + 1]`` within the window; both are int64 on ``device``.
    Pass a seeded ``generator`` for reproducible batches.
    """
    if dataset.ndim != 1:
        raise ValueError(f"dataset must be a 1-D array of token ids; got shape {dataset.shape}")
    starts = sample_start_indices(len(dataset), batch_size, context_length, generator)
    return gather_windows(dataset, starts, context_length, device)

"""Global-norm gradient clipping."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor


def clip_gradients(
    parameters: Iterable[torch.nn.Parameter], max_l2_norm: float, eps: float = 1e-6
) -> Tensor:
    """Scale every gradient in place so that their *combined* L2 norm is at most ``max_l2_norm``.

    The norm is taken over all gradients at once, as if they were one long vector; parameters
    without a gradient are skipped. When the norm exceeds ``max_l2_norm`` each gradient is
    multiplied by ``max_l2_norm / (norm + eps)``. Returns the norm before clipping.
    """
    if max_l2_norm <= 0:
        raise ValueError(f"max_l2_norm must be positive; got {max_l2_norm}")
    # BEGIN SOLUTION
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    total_norm = torch.sqrt(sum(g.detach().float().pow(2).sum() for g in grads))
    if total_norm > max_l2_norm:
        scale = max_l2_norm / (total_norm + eps)
        for g in grads:
            g.mul_(scale.to(g.dtype))
    return total_norm
    # END SOLUTION

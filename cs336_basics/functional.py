"""Stateless building blocks: activations and softmax."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor


def silu(x: Float[Tensor, ...]) -> Float[Tensor, ...]:
    """SiLU (swish): ``x * sigmoid(x)``, elementwise."""
    # BEGIN SOLUTION
    return x * torch.sigmoid(x)
    # END SOLUTION


def softmax(x: Float[Tensor, ...], dim: int = -1) -> Float[Tensor, ...]:
    """Numerically stable softmax along ``dim``.

    Subtracting the maximum first leaves the result unchanged mathematically and keeps
    ``exp`` from overflowing, so inputs like ``[1000, 1001]`` work.
    """
    # BEGIN SOLUTION
    # The max is only a shift the softmax ignores, so no gradient needs to flow through it.
    shifted = x - x.amax(dim=dim, keepdim=True).detach()
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=dim, keepdim=True)
    # END SOLUTION

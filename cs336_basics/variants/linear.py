"""Linear layers with a bias (GPT-2, the original Transformer)."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn

from cs336_basics.linear import Linear


class LinearWithBias(Linear):
    """``y = x W^T + b``: a ``Linear`` plus a ``bias`` vector that starts at zero (as in GPT-2)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(in_features, out_features, device=device, dtype=dtype)
        self.bias = nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype))

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_out"]:
        return super().forward(x) + self.bias


def linear_layer(
    in_features: int,
    out_features: int,
    bias: bool = False,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> Linear:
    """A ``Linear``, or a ``LinearWithBias`` when ``bias`` is set."""
    layer_class = LinearWithBias if bias else Linear
    return layer_class(in_features, out_features, device=device, dtype=dtype)

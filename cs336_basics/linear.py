"""Linear layer without bias: ``y = x W^T``."""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn


class Linear(nn.Module):
    """A bias-free linear map with the ``nn.Linear`` weight layout.

    ``weight`` has shape ``(out_features, in_features)``, so the layer computes ``x @ weight.T``.
    Initialisation follows the handout: truncated normal with variance
    ``2 / (in_features + out_features)``, cut at three standard deviations.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(
            torch.empty(out_features, in_features, device=device, dtype=dtype)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # BEGIN SOLUTION
        std = math.sqrt(2.0 / (self.in_features + self.out_features))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=std, a=-3 * std, b=3 * std)
        # END SOLUTION

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_out"]:
        # BEGIN SOLUTION
        return x @ self.weight.T
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"

"""Root-mean-square layer normalisation."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dimension.

    The statistics are computed in float32 whatever the input dtype, and the result is cast
    back to the input dtype, so bfloat16 activations keep a float32-accurate normaliser.
    ``weight`` (the gain) starts at one.
    """

    def __init__(
        self,
        d_model: int,
        eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        # BEGIN SOLUTION
        in_dtype = x.dtype
        x = x.float()
        inverse_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x * inverse_rms * self.weight).to(in_dtype)
        # END SOLUTION

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"

"""Layer normalisation (Ba et al., 2016), as in GPT-2 and the original Transformer."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn


class LayerNorm(nn.Module):
    """``(x - mean(x)) / sqrt(var(x) + eps) * weight + bias`` over the last dimension.

    Unlike RMSNorm it centres the features and has a learned ``bias``; the variance is the
    population variance (divide by ``d_model``, not ``d_model - 1``). Statistics are computed in
    float32 and the result is cast back to the input dtype.
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
        self.bias = nn.Parameter(torch.zeros(d_model, device=device, dtype=dtype))

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        in_dtype = x.dtype
        x = x.float()
        centred = x - x.mean(dim=-1, keepdim=True)
        inverse_std = torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (centred * inverse_std * self.weight + self.bias).to(in_dtype)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, eps={self.eps}"

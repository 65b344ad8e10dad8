"""The position-wise feed-forward network of the handout: SwiGLU."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn

from cs336_basics.functional import silu
from cs336_basics.linear import Linear


def default_d_ff(d_model: int, multiple_of: int = 64) -> int:
    """The handout's SwiGLU width: about ``8/3 * d_model``, rounded up to a multiple of 64.

    The factor 8/3 keeps the parameter count of the three-matrix SwiGLU equal to that of a
    two-matrix MLP with ``d_ff = 4 * d_model``.
    """
    target = 8 * d_model / 3
    return int(multiple_of * -(-target // multiple_of))


class SwiGLU(nn.Module):
    """Gated feed-forward: ``w2(silu(w1 x) * w3 x)``.

    ``w1`` and ``w3`` map ``d_model -> d_ff``; ``w2`` maps ``d_ff -> d_model``.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        d_ff = default_d_ff(d_model) if d_ff is None else d_ff
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)
        self.w3 = Linear(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        # BEGIN SOLUTION
        return self.w2(silu(self.w1(x)) * self.w3(x))
        # END SOLUTION

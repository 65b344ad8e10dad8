"""Ungated two-matrix feed-forward networks: the original Transformer's, GPT-2's, the SiLU ablation."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor, nn

from cs336_basics.functional import silu
from cs336_basics.variants.linear import linear_layer


def gelu(x: Float[Tensor, ...]) -> Float[Tensor, ...]:
    """Exact GELU, ``x * Phi(x)`` with the standard normal CDF ``Phi`` (not the tanh fit)."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x: Float[Tensor, ...]) -> Float[Tensor, ...]:
    """GELU's tanh fit, ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``: the activation
    released GPT-2 checkpoints were trained with (HF's ``gelu_new``)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def relu(x: Float[Tensor, ...]) -> Float[Tensor, ...]:
    """ReLU: ``max(x, 0)``, elementwise."""
    return x.clamp(min=0)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "silu": silu,
    "gelu": gelu,
    "gelu_tanh": gelu_tanh,
    "relu": relu,
}


class FeedForward(nn.Module):
    """Ungated MLP ``w2(activation(w1 x))``: ``"silu"`` (the handout's ablation), ``"gelu"``
    (exact, erf-based), ``"gelu_tanh"`` (its tanh fit; released GPT-2) or ``"relu"`` (the
    original Transformer).

    ``bias`` adds a bias to both projections. Use ``d_ff = 4 * d_model`` to match SwiGLU's
    parameter count.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation: str = "silu",
        bias: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}; got {activation!r}")
        self.activation = activation
        self.w1 = linear_layer(d_model, d_ff, bias, device=device, dtype=dtype)
        self.w2 = linear_layer(d_ff, d_model, bias, device=device, dtype=dtype)

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        return self.w2(ACTIVATIONS[self.activation](self.w1(x)))

    def extra_repr(self) -> str:
        return f"activation={self.activation}"

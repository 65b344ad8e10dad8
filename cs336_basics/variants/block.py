"""The post-norm Transformer block of the original Transformer (and the handout's ablation).

The no-norm ablation needs no class of its own: it is the core ``TransformerBlock`` with
``nn.Identity()`` norms, ``x + attn(x)`` then ``+ ffn(.)``.
"""

from __future__ import annotations

from jaxtyping import Float, Int
from torch import Tensor

from cs336_basics.block import TransformerBlock


class PostNormBlock(TransformerBlock):
    """``h = ln1(x + attn(x))``, then ``ln2(h + ffn(h))``: the norm after each residual add."""

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        x = self.ln1(x + self.attn(x, token_positions))
        return self.ln2(x + self.ffn(x))

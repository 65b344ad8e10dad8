"""The pre-norm Transformer block: attention and feed-forward sublayers with residual connections."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.attention import MultiHeadSelfAttention
from cs336_basics.feedforward import SwiGLU
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding


class TransformerBlock(nn.Module):
    """``h = x + attn(ln1(x), token_positions)``, then ``h + ffn(ln2(h))``.

    The block is given its sublayers, so the same block runs the handout's RMSNorm, causal
    multi-head attention and SwiGLU (``transformer_block``) or any other parts with the same
    call signatures: ``attn(x, token_positions)``, ``ffn(x)``, ``ln1(x)``, ``ln2(x)``.
    """

    def __init__(self, attn: nn.Module, ffn: nn.Module, ln1: nn.Module, ln2: nn.Module) -> None:
        super().__init__()
        self.attn = attn
        self.ffn = ffn
        self.ln1 = ln1
        self.ln2 = ln2

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        # BEGIN SOLUTION
        x = x + self.attn(self.ln1(x), token_positions)
        return x + self.ffn(self.ln2(x))
        # END SOLUTION


def transformer_block(
    d_model: int,
    num_heads: int,
    d_ff: int,
    rope: RotaryPositionalEmbedding | None = None,
    norm_eps: float = 1e-5,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> TransformerBlock:
    """The handout's block: ``ln1``/``ln2`` RMSNorms, causal multi-head self-attention ``attn``
    (with ``rope`` on queries and keys) and a SwiGLU ``ffn``."""
    # BEGIN SOLUTION
    return TransformerBlock(
        attn=MultiHeadSelfAttention(d_model, num_heads, rope, device=device, dtype=dtype),
        ffn=SwiGLU(d_model, d_ff, device=device, dtype=dtype),
        ln1=RMSNorm(d_model, norm_eps, device=device, dtype=dtype),
        ln2=RMSNorm(d_model, norm_eps, device=device, dtype=dtype),
    )
    # END SOLUTION

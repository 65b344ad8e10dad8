"""The Transformer block: attention and feed-forward sublayers with residual connections."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.attention import MultiHeadSelfAttention
from cs336_basics.config import ModelConfig
from cs336_basics.feedforward import SiLUFeedForward, SwiGLU
from cs336_basics.kv_cache import LayerKVCache
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding


class TransformerBlock(nn.Module):
    """One decoder layer: ``attn`` (causal MHSA), ``ffn``, and the norms ``ln1`` and ``ln2``.

    Pre-norm (the default): ``h = x + attn(ln1(x))``, then ``h + ffn(ln2(h))``.
    Post-norm: ``h = ln1(x + attn(x))``, then ``ln2(h + ffn(h))``.
    No norm: ``h = x + attn(x)``, then ``h + ffn(h)`` (``ln1``/``ln2`` do not exist).
    """

    def __init__(
        self,
        config: ModelConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.norm_placement = config.norm_placement
        rope = None
        if config.position_encoding == "rope":
            rope = RotaryPositionalEmbedding(
                config.rope_theta, config.d_head, config.context_length, device=device
            )
        self.attn = MultiHeadSelfAttention(
            config.d_model, config.num_heads, rope=rope, device=device, dtype=dtype
        )
        ffn_class = {"swiglu": SwiGLU, "silu": SiLUFeedForward}[config.ffn]
        self.ffn = ffn_class(config.d_model, config.d_ff, device=device, dtype=dtype)
        if config.norm_placement != "none":
            self.ln1 = RMSNorm(config.d_model, config.norm_eps, device=device, dtype=dtype)
            self.ln2 = RMSNorm(config.d_model, config.norm_eps, device=device, dtype=dtype)

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
        kv_cache: LayerKVCache | None = None,
    ) -> Float[Tensor, "... seq d_model"]:
        # BEGIN SOLUTION
        if self.norm_placement == "pre":
            x = x + self.attn(self.ln1(x), token_positions, kv_cache)
            return x + self.ffn(self.ln2(x))
        if self.norm_placement == "post":
            x = self.ln1(x + self.attn(x, token_positions, kv_cache))
            return self.ln2(x + self.ffn(x))
        x = x + self.attn(x, token_positions, kv_cache)
        return x + self.ffn(x)
        # END SOLUTION

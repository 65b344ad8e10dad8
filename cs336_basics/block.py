"""The Transformer block: attention and feed-forward sublayers with residual connections."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.attention import MultiHeadSelfAttention
from cs336_basics.config import ModelConfig
from cs336_basics.feedforward import FeedForward, SwiGLU
from cs336_basics.kv_cache import LatentKVCache, LayerKVCache
from cs336_basics.layernorm import LayerNorm
from cs336_basics.mla import MultiHeadLatentAttention
from cs336_basics.moe import MixtureOfExperts
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding


class TransformerBlock(nn.Module):
    """One decoder layer: ``attn`` (causal MHSA), ``ffn``, and the norms ``ln1`` and ``ln2``.

    Pre-norm (the default): ``h = x + attn(ln1(x))``, then ``h + ffn(ln2(h))``.
    Post-norm: ``h = ln1(x + attn(x))``, then ``ln2(h + ffn(h))``.
    No norm: ``h = x + attn(x)``, then ``h + ffn(h)`` (``ln1``/``ln2`` do not exist).

    The config picks each sublayer's variant: ``attn`` is multi-head (also grouped-query,
    multi-query, QK-norm) or latent attention, ``ffn`` a SwiGLU, an ungated MLP or a mixture of
    experts, and the norms RMSNorm or LayerNorm.
    """

    def __init__(
        self,
        config: ModelConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.norm_placement = config.norm_placement
        self.attn = attention_layer(config, device=device, dtype=dtype)
        self.ffn = feed_forward_layer(config, device=device, dtype=dtype)
        if config.norm_placement != "none":
            self.ln1 = norm_layer(config, device=device, dtype=dtype)
            self.ln2 = norm_layer(config, device=device, dtype=dtype)

    def forward(
        self,
        x: Float[Tensor, "... seq d_model"],
        token_positions: Int[Tensor, "... seq"] | None = None,
        kv_cache: LayerKVCache | LatentKVCache | None = None,
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


def norm_layer(
    config: ModelConfig, device: torch.device | str | None = None, dtype: torch.dtype | None = None
) -> RMSNorm | LayerNorm:
    """The ``d_model``-wide norm the config asks for."""
    norm_class = {"rmsnorm": RMSNorm, "layernorm": LayerNorm}[config.norm]
    return norm_class(config.d_model, config.norm_eps, device=device, dtype=dtype)


def attention_layer(
    config: ModelConfig, device: torch.device | str | None = None, dtype: torch.dtype | None = None
) -> MultiHeadSelfAttention | MultiHeadLatentAttention:
    if config.attention == "mla":
        return MultiHeadLatentAttention(config, device=device, dtype=dtype)
    rope = None
    if config.position_encoding == "rope":
        rope = RotaryPositionalEmbedding(
            config.rope_theta, config.d_head, config.context_length, device=device
        )
    return MultiHeadSelfAttention(
        config.d_model,
        config.num_heads,
        rope=rope,
        device=device,
        dtype=dtype,
        num_kv_heads=config.num_kv_heads,
        qk_norm=config.qk_norm,
        norm_eps=config.norm_eps,
        bias=config.bias,
        fused=config.fused_attention,
    )


def feed_forward_layer(
    config: ModelConfig, device: torch.device | str | None = None, dtype: torch.dtype | None = None
) -> nn.Module:
    if config.ffn == "swiglu":
        return SwiGLU(config.d_model, config.d_ff, device=device, dtype=dtype)
    if config.ffn == "moe":
        return MixtureOfExperts(
            config.d_model,
            config.d_ff,
            config.num_experts,
            config.top_k,
            config.normalize_topk,
            config.capacity_factor,
            device=device,
            dtype=dtype,
        )
    return FeedForward(
        config.d_model, config.d_ff, config.ffn, config.bias, device=device, dtype=dtype
    )

"""The original encoder-decoder Transformer (Vaswani et al., 2017): post-LN layers with GELU MLPs.

Every sublayer is ``LayerNorm(x + sublayer(x))`` (post-norm), and all projections have biases,
matching ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` with
``norm_first=False, activation="gelu"``. Sequences in a batch share one length (no padding
masks).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
from einops import rearrange
from jaxtyping import Float, Int
from torch import Tensor, nn

from cs336_basics.attention import scaled_dot_product_attention
from cs336_basics.embedding import Embedding
from cs336_basics.linear import Linear
from cs336_basics.rope import default_positions
from cs336_basics.variants.attention import self_attention
from cs336_basics.variants.feedforward import FeedForward
from cs336_basics.variants.layernorm import LayerNorm
from cs336_basics.variants.linear import LinearWithBias
from cs336_basics.variants.positional import SinusoidalPositionalEncoding


class CrossAttention(nn.Module):
    """Multi-head attention from decoder positions (queries) to every encoder position
    (keys and values), unmasked; projections as in ``SelfAttention``, with biases."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.q_proj = LinearWithBias(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = LinearWithBias(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = LinearWithBias(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = LinearWithBias(d_model, d_model, device=device, dtype=dtype)

    def forward(
        self, x: Float[Tensor, "... target d_model"], memory: Float[Tensor, "... source d_model"]
    ) -> Float[Tensor, "... target d_model"]:
        q = rearrange(self.q_proj(x), "... seq (heads d) -> ... heads seq d", heads=self.num_heads)
        k, v = (
            rearrange(proj(memory), "... seq (heads d) -> ... heads seq d", heads=self.num_heads)
            for proj in (self.k_proj, self.v_proj)
        )
        attended = scaled_dot_product_attention(q, k, v)
        return self.output_proj(rearrange(attended, "... heads seq d -> ... seq (heads d)"))


class EncoderLayer(nn.Module):
    """``h = ln1(x + self_attn(x))`` (bidirectional), then ``ln2(h + ffn(h))``."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        norm_eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = self_attention(
            d_model, num_heads, bias=True, causal=False, device=device, dtype=dtype
        )
        self.ffn = FeedForward(d_model, d_ff, "gelu", bias=True, device=device, dtype=dtype)
        self.ln1 = LayerNorm(d_model, norm_eps, device=device, dtype=dtype)
        self.ln2 = LayerNorm(d_model, norm_eps, device=device, dtype=dtype)

    def forward(
        self, x: Float[Tensor, "... source d_model"]
    ) -> Float[Tensor, "... source d_model"]:
        x = self.ln1(x + self.self_attn(x))
        return self.ln2(x + self.ffn(x))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention to the encoder output, then the MLP; each
    followed by its residual add and LayerNorm (``ln1``, ``ln2``, ``ln3``)."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        norm_eps: float = 1e-5,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.self_attn = self_attention(d_model, num_heads, bias=True, device=device, dtype=dtype)
        self.cross_attn = CrossAttention(d_model, num_heads, device=device, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, "gelu", bias=True, device=device, dtype=dtype)
        self.ln1 = LayerNorm(d_model, norm_eps, device=device, dtype=dtype)
        self.ln2 = LayerNorm(d_model, norm_eps, device=device, dtype=dtype)
        self.ln3 = LayerNorm(d_model, norm_eps, device=device, dtype=dtype)

    def forward(
        self, x: Float[Tensor, "... target d_model"], memory: Float[Tensor, "... source d_model"]
    ) -> Float[Tensor, "... target d_model"]:
        x = self.ln1(x + self.self_attn(x))
        x = self.ln2(x + self.cross_attn(x, memory))
        return self.ln3(x + self.ffn(x))


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Shape of a ``Seq2SeqTransformer``; source and target share the vocabulary."""

    vocab_size: int
    context_length: int
    d_model: int
    num_heads: int
    d_ff: int
    num_encoder_layers: int
    num_decoder_layers: int
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "context_length",
            "d_model",
            "num_heads",
            "d_ff",
            "num_encoder_layers",
            "num_decoder_layers",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Seq2SeqConfig.{name} must be a positive integer; got {value!r}")
        if self.d_model % self.num_heads != 0 or self.d_model % 2 != 0:
            raise ValueError(
                f"d_model={self.d_model} must be even and divisible by num_heads={self.num_heads}"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder LM: ``logits = decode(target_ids, encode(source_ids))``.

    Source and target tokens share ``token_embeddings``, scaled by ``sqrt(d_model)`` and added
    to sinusoidal positions; ``lm_head`` maps the last decoder layer to next-token logits.
    """

    def __init__(
        self,
        config: Seq2SeqConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        layer_shape = (config.d_model, config.num_heads, config.d_ff, config.norm_eps)
        self.token_embeddings = Embedding(
            config.vocab_size, config.d_model, device=device, dtype=dtype
        )
        self.positions = SinusoidalPositionalEncoding(
            config.d_model, config.context_length, device=device
        )
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(*layer_shape, device=device, dtype=dtype)
            for _ in range(config.num_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(*layer_shape, device=device, dtype=dtype)
            for _ in range(config.num_decoder_layers)
        )
        self.lm_head = Linear(config.d_model, config.vocab_size, device=device, dtype=dtype)

    def embed(self, token_ids: Int[Tensor, "... seq"]) -> Float[Tensor, "... seq d_model"]:
        positions = default_positions(token_ids.shape[-1], device=token_ids.device)
        scaled = self.token_embeddings(token_ids) * math.sqrt(self.config.d_model)
        return scaled + self.positions(positions).to(scaled.dtype)

    def encode(self, source_ids: Int[Tensor, "... source"]) -> Float[Tensor, "... source d_model"]:
        x = self.embed(source_ids)
        for layer in self.encoder_layers:
            x = layer(x)
        return x

    def decode(
        self, target_ids: Int[Tensor, "... target"], memory: Float[Tensor, "... source d_model"]
    ) -> Float[Tensor, "... target vocab_size"]:
        x = self.embed(target_ids)
        for layer in self.decoder_layers:
            x = layer(x, memory)
        return self.lm_head(x)

    def forward(
        self, source_ids: Int[Tensor, "... source"], target_ids: Int[Tensor, "... target"]
    ) -> Float[Tensor, "... target vocab_size"]:
        return self.decode(target_ids, self.encode(source_ids))

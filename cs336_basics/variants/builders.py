"""``build_variant_model``: the core ``TransformerLM`` assembled with the variant parts a
``VariantConfig`` asks for (as torchtune's builders assemble ``TransformerDecoder``), and the
part assemblers it uses (``variant_block``, ``attention``, ``latent_attention``,
``feed_forward``, ...). The named builders of published families (``hf/named_builders.py``) read an HF
config into a ``VariantConfig`` and build it here; so does loading a saved config.

Every part keeps the handout's state-dict names (``layers.{i}.attn.q_proj.weight``, ...), and
parts are created in the handout model's order, so a seed gives the same initial weights.
"""

from __future__ import annotations

import torch
from torch import nn

from cs336_basics.attention import MultiHeadSelfAttention
from cs336_basics.block import TransformerBlock
from cs336_basics.embedding import Embedding
from cs336_basics.feedforward import SwiGLU
from cs336_basics.linear import Linear
from cs336_basics.model import TransformerLM
from cs336_basics.rmsnorm import RMSNorm
from cs336_basics.rope import RotaryPositionalEmbedding
from cs336_basics.variants.attention import SelfAttention, self_attention
from cs336_basics.variants.block import PostNormBlock
from cs336_basics.variants.config import VariantConfig
from cs336_basics.variants.dsa import LightningIndexer, SparseLatentAttention
from cs336_basics.variants.feedforward import FeedForward
from cs336_basics.variants.layernorm import LayerNorm
from cs336_basics.variants.mla import MultiHeadLatentAttention
from cs336_basics.variants.model import VariantTransformerLM
from cs336_basics.variants.moe import mixture_of_experts
from cs336_basics.variants.positional import SinusoidalPositionalEncoding
from cs336_basics.variants.rope_scaling import rotary_embedding, softmax_mscale

Device = torch.device | str | None


def build_variant_model(
    config: VariantConfig, device: Device = None, dtype: torch.dtype | None = None
) -> VariantTransformerLM:
    """The decoder-only LM ``config`` describes, on ``device``."""
    token_embeddings = Embedding(config.vocab_size, config.d_model, device=device, dtype=dtype)
    position_embeddings = position_embedding(config, device, dtype)
    rope = None
    if config.position_encoding == "rope" and config.mha is not None:
        rope = rotary_embedding(
            config.rope_theta, config.d_head, config.context_length, config.rope_scaling, device
        )
    layers = [variant_block(config, rope, device, dtype, i) for i in range(config.num_layers)]
    ln_final = norm(config, device, dtype) if config.norm_placement == "pre" else nn.Identity()
    lm_head = Linear(config.d_model, config.vocab_size, device=device, dtype=dtype)
    if config.tie_embeddings:
        lm_head.weight = token_embeddings.weight
    return VariantTransformerLM(
        token_embeddings,
        layers,
        ln_final,
        lm_head,
        config.context_length,
        position_embeddings,
        config.moe.aux_loss_coef if config.moe is not None else 0.0,
    )


def variant_block(
    config: VariantConfig,
    rope: RotaryPositionalEmbedding | None,
    device: Device = None,
    dtype: torch.dtype | None = None,
    index: int = 0,
) -> TransformerBlock:
    """Decoder layer ``index``: pre-norm (the core block), post-norm, or without norms (the
    core block with identity norms, so ``ln1``/``ln2`` hold no weights)."""
    attn = attention(config, rope, device, dtype)
    if config.moe is not None and not config.is_moe_layer(index):
        ffn = SwiGLU(config.d_model, config.moe.dense_d_ff, device=device, dtype=dtype)
    else:
        ffn = feed_forward(config, device, dtype)
    if config.norm_placement == "none":
        return TransformerBlock(attn, ffn, nn.Identity(), nn.Identity())
    block_class = PostNormBlock if config.norm_placement == "post" else TransformerBlock
    return block_class(attn, ffn, norm(config, device, dtype), norm(config, device, dtype))


def norm(
    config: VariantConfig, device: Device = None, dtype: torch.dtype | None = None
) -> nn.Module:
    """The ``d_model``-wide norm the config asks for: RMSNorm or LayerNorm."""
    norm_class = {"rmsnorm": RMSNorm, "layernorm": LayerNorm}[config.norm]
    return norm_class(config.d_model, config.norm_eps, device=device, dtype=dtype)


def attention(
    config: VariantConfig,
    rope: RotaryPositionalEmbedding | None,
    device: Device = None,
    dtype: torch.dtype | None = None,
) -> nn.Module:
    """Latent attention (sparse with an indexer), or self-attention of the config's parts."""
    if config.mla is not None:
        return latent_attention(config, device, dtype)
    return self_attention(
        config.d_model,
        config.num_heads,
        config.kv_heads,
        config.d_head,
        rope,
        qk_norm=config.mha.qk_norm,
        norm_eps=config.norm_eps,
        bias=config.bias,
        qkv_bias=config.mha.qkv_bias,
        fused=config.mha.fused_attention,
        device=device,
        dtype=dtype,
    )


def latent_attention(
    config: VariantConfig, device: Device = None, dtype: torch.dtype | None = None
) -> MultiHeadLatentAttention:
    """Multi-head latent attention of the config's widths (DeepSeek-V2/V3), with a lightning
    indexer (DeepSeek-V3.2's sparse attention) when ``index_topk`` is set."""
    heads, nope, rope_dim, rank = (
        config.num_heads,
        config.mla_nope_dim,
        config.mla.qk_rope_head_dim,
        config.mla.kv_lora_rank,
    )
    q_dim, v_dim = heads * (nope + rope_dim), heads * config.mla_v_dim

    def linear(d_in: int, d_out: int) -> Linear:
        return Linear(d_in, d_out, device=device, dtype=dtype)

    if config.mla.q_lora_rank is None:
        queries = dict(q_proj=linear(config.d_model, q_dim))
    else:
        queries = dict(
            q_down_proj=linear(config.d_model, config.mla.q_lora_rank),
            q_norm=RMSNorm(config.mla.q_lora_rank, config.norm_eps, device=device, dtype=dtype),
            q_up_proj=linear(config.mla.q_lora_rank, q_dim),
        )
    parts = dict(
        num_heads=heads,
        kv_down_proj=linear(config.d_model, rank),
        kv_norm=RMSNorm(rank, config.norm_eps, device=device, dtype=dtype),
        k_rope_proj=linear(config.d_model, rope_dim),
        k_up_proj=linear(rank, heads * nope),
        v_up_proj=linear(rank, v_dim),
        output_proj=linear(v_dim, config.d_model),
        rope=rotary_embedding(
            config.rope_theta, rope_dim, config.context_length, config.rope_scaling, device
        ),
        query_scale=softmax_mscale(config.rope_scaling) ** 2,
        **queries,
    )
    if config.sparse is None:
        return MultiHeadLatentAttention(**parts)
    return SparseLatentAttention(lightning_indexer(config, parts["rope"], device, dtype), **parts)


def lightning_indexer(
    config: VariantConfig, rope: nn.Module, device: Device = None, dtype: torch.dtype | None = None
) -> LightningIndexer:
    """DeepSeek-V3.2's indexer: ``index_heads`` query heads of ``index_head_dim`` from the query
    latent, one LayerNorm-ed key per token, rotated by MLA's ``rope``."""
    width, heads = (
        config.sparse.index_heads * config.sparse.index_head_dim,
        config.sparse.index_heads,
    )
    return LightningIndexer(
        wq_b=Linear(config.mla.q_lora_rank, width, device=device, dtype=dtype),
        wk=Linear(config.d_model, config.sparse.index_head_dim, device=device, dtype=dtype),
        k_norm=LayerNorm(config.sparse.index_head_dim, eps=1e-6, device=device, dtype=dtype),
        weights_proj=Linear(config.d_model, heads, device=device, dtype=dtype),
        rope=rope,
        rope_dim=config.mla.qk_rope_head_dim,
        topk=config.sparse.index_topk,
    )


def feed_forward(
    config: VariantConfig, device: Device = None, dtype: torch.dtype | None = None
) -> nn.Module:
    """SwiGLU, an ungated two-matrix MLP, or a mixture of SwiGLU experts."""
    if config.ffn == "swiglu":
        return SwiGLU(config.d_model, config.d_ff, device=device, dtype=dtype)
    if config.moe is not None:
        return mixture_of_experts(
            config.d_model,
            config.d_ff,
            config.moe.num_experts,
            config.moe.top_k,
            config.moe.normalize_topk,
            config.moe.capacity_factor,
            device=device,
            dtype=dtype,
            num_shared_experts=config.moe.num_shared_experts or 0,
            routed_scaling=config.moe.routed_scaling or 1.0,
            expert_groups=tuple(config.moe.expert_groups) if config.moe.expert_groups else None,
            scoring=config.moe.router_scoring,
        )
    return FeedForward(
        config.d_model, config.d_ff, config.ffn, config.bias, device=device, dtype=dtype
    )


def position_embedding(
    config: VariantConfig, device: Device = None, dtype: torch.dtype | None = None
) -> nn.Module | None:
    """Absolute positions added to the token embeddings: learned, sinusoidal, or none."""
    if config.position_encoding == "learned":
        return Embedding(config.context_length, config.d_model, device=device, dtype=dtype)
    if config.position_encoding == "sinusoidal":
        return SinusoidalPositionalEncoding(config.d_model, config.context_length, device=device)
    return None


def with_cache_capable_attention(model: TransformerLM) -> VariantTransformerLM:
    """A model of the same parts as ``model`` (e.g. the handout's ``TransformerLM``; ``model``
    is left as it is), except that each core ``MultiHeadSelfAttention`` is rebuilt as a
    ``SelfAttention`` from its own projections and RoPE: the same function and parameters, but
    able to keep a KV cache (``kv_caches``), so cached decoding works on core checkpoints."""
    layers = [
        TransformerBlock(cache_capable(block.attn), block.ffn, block.ln1, block.ln2)
        if type(block) is TransformerBlock
        else block
        for block in model.layers
    ]
    return VariantTransformerLM(
        model.token_embeddings, layers, model.ln_final, model.lm_head, model.context_length
    )


def cache_capable(attn: nn.Module) -> nn.Module:
    """A core ``MultiHeadSelfAttention`` as a ``SelfAttention`` of the same parts (others as
    they are)."""
    if type(attn) is not MultiHeadSelfAttention:
        return attn
    head_dim = attn.q_proj.weight.shape[0] // attn.num_heads
    return SelfAttention(
        attn.q_proj, attn.k_proj, attn.v_proj, attn.output_proj, head_dim, rope=attn.rope
    )

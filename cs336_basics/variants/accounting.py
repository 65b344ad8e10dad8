"""Resource accounting of the architecture variants, on the conventions of
``cs336_basics.accounting`` (whose public functions hand a ``VariantConfig`` to these).

Covered: norm placement and kind, GQA/MQA, QK-norm, biases, tied embeddings, two-matrix MLPs,
learned positions. Mixtures of experts and latent attention are accounted for as a dense model
whose ``ffn`` / attention entries are then replaced: an MoE layer costs the router plus
``top_k`` experts per token (assuming none is dropped) but holds all ``num_experts``; MLA is
counted along its training path, which expands keys and values from the latent (cached
decoding folds them instead).
"""

from __future__ import annotations

import dataclasses

from cs336_basics.variants.config import AttentionConfig, VariantConfig


def _dense_mha(config: VariantConfig) -> VariantConfig:
    """The same model with one dense SwiGLU per layer and plain attention: the base whose
    accounting the MoE and MLA entries then replace."""
    return dataclasses.replace(
        config,
        ffn="swiglu" if config.moe is not None else config.ffn,
        attention=AttentionConfig() if config.mla is not None else config.attention,
        position_encoding="none" if config.mla is not None else config.position_encoding,
        rope_scaling=None if config.mla is not None else config.rope_scaling,
    )


def _moe_and_dense_layers(config: VariantConfig) -> tuple[int, int]:
    """How many layers have the mixture of experts, and how many a dense SwiGLU instead."""
    dense = len(set(config.moe.dense_layers or ()))
    return config.num_layers - dense, dense


def _mla_query_width(config: VariantConfig) -> int:
    return config.num_heads * (config.mla_nope_dim + config.mla.qk_rope_head_dim)


def _mla_projection_sizes(config: VariantConfig) -> dict[str, int]:
    """Weight count of each MLA projection (each weight is used once per token)."""
    d, h, r = config.d_model, config.num_heads, config.mla.kv_lora_rank
    q = _mla_query_width(config)
    sizes = (
        {"q_proj": d * q}
        if config.mla.q_lora_rank is None
        else {"q_down_proj": d * config.mla.q_lora_rank, "q_up_proj": config.mla.q_lora_rank * q}
    )
    return sizes | {
        "kv_down_proj": d * r,
        "k_rope_proj": d * config.mla.qk_rope_head_dim,
        "k_up_proj": r * h * config.mla_nope_dim,
        "v_up_proj": r * h * config.mla_v_dim,
        "output_proj": h * config.mla_v_dim * d,
    }


def parameter_counts(config: VariantConfig) -> dict[str, int]:
    """Trainable parameters by component; ``sum(...)`` equals the variant model's count."""
    counts = _dense_parameter_counts(_dense_mha(config))
    layers, d = config.num_layers, config.d_model
    if config.mla is not None:
        norms = config.mla.kv_lora_rank + (config.mla.q_lora_rank or 0)  # kv_norm and q_norm gains
        counts["attention"] = layers * (sum(_mla_projection_sizes(config).values()) + norms)
    if config.sparse is not None:  # wq_b, wk, k_norm (gain and bias), weights_proj
        width, heads = config.sparse.index_head_dim, config.sparse.index_heads
        counts["indexer"] = layers * (
            config.mla.q_lora_rank * heads * width + d * width + 2 * width + d * heads
        )
    if config.moe is not None:
        moe, dense = _moe_and_dense_layers(config)
        experts = config.moe.num_experts + (config.moe.num_shared_experts or 0)
        counts["ffn"] = 3 * d * (moe * experts * config.d_ff + dense * (config.moe.dense_d_ff or 0))
        counts["router"] = moe * config.moe.num_experts * d
    return counts


def forward_flops(config: VariantConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    """Matmul FLOPs of one forward pass, by component (summed over layers)."""
    flops = _dense_forward_flops(_dense_mha(config), batch_size, seq_len)
    layers, tokens, d = config.num_layers, batch_size * seq_len, config.d_model
    if config.mla is not None:
        for name in (
            "q_proj",
            "k_proj",
            "v_proj",
            "output_proj",
            "attention_scores",
            "attention_values",
        ):
            del flops[name]
        per_layer = {
            name: 2 * tokens * size for name, size in _mla_projection_sizes(config).items()
        }
        pairs = batch_size * seq_len * seq_len * config.num_heads
        per_layer["attention_scores"] = (
            2 * pairs * (config.mla_nope_dim + config.mla.qk_rope_head_dim)
        )
        per_layer["attention_values"] = 2 * pairs * config.mla_v_dim
        flops |= {name: layers * value for name, value in per_layer.items()}
    if config.sparse is not None:
        flops["indexer"] = layers * _indexer_flops(config, batch_size, seq_len)
    if config.moe is not None:
        moe, dense = _moe_and_dense_layers(config)
        active = config.moe.top_k + (
            config.moe.num_shared_experts or 0
        )  # shared experts see every token
        flops["ffn"] = (
            2 * tokens * 3 * d * (moe * active * config.d_ff + dense * (config.moe.dense_d_ff or 0))
        )
        flops["router"] = moe * 2 * tokens * d * config.moe.num_experts
    return flops


def _indexer_flops(config: VariantConfig, batch_size: int, seq_len: int) -> int:
    """One layer's lightning indexer: its three projections per token, then every (query, key)
    pair's score in each head and their weighted sum over heads (all pairs are scored; the top-k
    is chosen from them)."""
    width, heads, d = config.sparse.index_head_dim, config.sparse.index_heads, config.d_model
    tokens, pairs = batch_size * seq_len, batch_size * seq_len * seq_len
    projections = config.mla.q_lora_rank * heads * width + d * width + d * heads
    return 2 * tokens * projections + 2 * pairs * heads * (width + 1)


def activation_counts(config: VariantConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    counts = _dense_activation_counts(_dense_mha(config), batch_size, seq_len)
    layers, tokens = config.num_layers, batch_size * seq_len
    if config.mla is not None:
        h = config.num_heads
        latents = (
            config.mla.kv_lora_rank + config.mla.qk_rope_head_dim + (config.mla.q_lora_rank or 0)
        )
        expanded = _mla_query_width(config) + h * (config.mla_nope_dim + config.mla_v_dim)
        counts["qkv_projections"] = layers * tokens * (latents + expanded)
        counts["attention_values"] = layers * tokens * h * config.mla_v_dim
    if config.moe is not None:
        routed = tokens * config.moe.top_k
        moe, dense = _moe_and_dense_layers(config)
        shared = tokens * (config.moe.num_shared_experts or 0)  # d_ff-wide slices, every token
        counts["ffn"] = moe * (
            (routed + shared) * 4 * config.d_ff
            + (routed + (tokens if shared else 0)) * config.d_model
            + tokens * config.moe.num_experts
        ) + dense * tokens * (4 * (config.moe.dense_d_ff or 0) + config.d_model)
    return counts


def _ffn_matrices(config: VariantConfig) -> int:
    return 3 if config.ffn == "swiglu" else 2


def _kv_width(config: VariantConfig) -> int:
    """Output width of the key (and of the value) projection."""
    return config.kv_heads * config.d_head


def _dense_parameter_counts(config: VariantConfig) -> dict[str, int]:
    d, d_ff, kv = config.d_model, config.d_ff, _kv_width(config)
    norm_size = d * (2 if config.norm == "layernorm" else 1)  # gain, plus a bias for LayerNorm
    layer_norms = 0 if config.norm_placement == "none" else 2 * norm_size
    q = config.num_heads * config.d_head  # d, unless head_dim decouples the heads
    attention = d * q + 2 * d * kv + q * d
    ffn = _ffn_matrices(config) * d * d_ff
    if config.bias:  # attention projections and the two-matrix MLPs (SwiGLU stays bias-free)
        attention += q + 2 * kv + d
        ffn += 0 if config.ffn == "swiglu" else d_ff + d
    if config.mha.qkv_bias and not config.bias:
        attention += q + 2 * kv
    if config.mha.qk_norm:
        attention += 2 * config.d_head
    counts = {
        "token_embeddings": config.vocab_size * d,
        "position_embeddings": config.context_length * d
        if config.position_encoding == "learned"
        else 0,
        "attention": config.num_layers * attention,
        "ffn": config.num_layers * ffn,
        "norms": config.num_layers * layer_norms
        + (norm_size if config.norm_placement == "pre" else 0),
        "lm_head": 0 if config.tie_embeddings else d * config.vocab_size,
    }
    return counts


def _dense_forward_flops(config: VariantConfig, batch_size: int, T: int) -> dict[str, int]:
    tokens = batch_size * T
    d, layers = config.d_model, config.num_layers
    q = config.num_heads * config.d_head  # d, unless head_dim decouples the heads
    flops = {
        "q_proj": 2 * tokens * d * q,
        "k_proj": 2 * tokens * d * _kv_width(config),
        "v_proj": 2 * tokens * d * _kv_width(config),
        "output_proj": 2 * tokens * q * d,
        "attention_scores": 2 * batch_size * T * T * q,  # Q K^T: every head, every (query, key)
        "attention_values": 2 * batch_size * T * T * q,  # softmax(...) V
        "ffn": 2 * tokens * d * config.d_ff * _ffn_matrices(config),
    }
    flops = {name: layers * value for name, value in flops.items()}
    flops["lm_head"] = 2 * tokens * d * config.vocab_size
    return flops


def _dense_activation_counts(config: VariantConfig, batch_size: int, T: int) -> dict[str, int]:
    tokens, d, h, d_ff = batch_size * T, config.d_model, config.num_heads, config.d_ff
    gated = config.ffn == "swiglu"
    per_layer = {
        "norms": 0 if config.norm_placement == "none" else 2 * tokens * d,
        "qkv_projections": tokens * (h * config.d_head + 2 * _kv_width(config)),
        "attention_scores": batch_size * h * T * T,
        "attention_softmax": batch_size * h * T * T,
        "attention_values": tokens * h * config.d_head,
        "output_proj": tokens * d,
        # W1 x and its activation, W3 x and the gate product when gated, then W2's output
        "ffn": tokens * d_ff * (4 if gated else 2) + tokens * d,
    }
    counts = {name: config.num_layers * value for name, value in per_layer.items()}
    counts["final_norm"] = tokens * d if config.norm_placement == "pre" else 0
    counts["logits"] = tokens * config.vocab_size
    counts["cross_entropy"] = tokens * config.vocab_size  # the softmax over the logits
    return counts


def kv_cache_elements_per_token(config: VariantConfig) -> int:
    """Numbers cached per token over all layers: ``bytes = elements * bytes_per_element``.

    MHA stores a key and a value per head, ``2 * num_heads * d_head`` per layer; GQA and MQA
    only their shared heads, ``2 * num_kv_heads * d_head``; MLA one latent and one RoPE key,
    ``kv_lora_rank + qk_rope_head_dim``, whatever the number of heads.
    """
    if config.mla is not None:  # sparse attention also caches the indexer's key
        per_layer = config.mla.kv_lora_rank + config.mla.qk_rope_head_dim
        per_layer += config.sparse.index_head_dim if config.sparse is not None else 0
    else:
        per_layer = 2 * config.kv_heads * config.d_head
    return config.num_layers * per_layer

"""The published configurations of the model families ``named_builders.py`` builds: the fields of each
model's released ``config.json``, in ``transformers`` 5 naming (RoPE settings as
``rope_parameters``), limited to the fields the builders read or check.

They are facts about released checkpoints (Hugging Face hub ``config.json`` files and, for the
original Transformer, the paper's base model), the defaults of the named builders.
"""

from __future__ import annotations

from typing import Any

_SILU_NO_BIAS = dict(hidden_act="silu", attention_bias=False, mlp_bias=False, sliding_window=None)

LLAMA_3_2_1B: dict[str, Any] = dict(
    model_type="llama",
    vocab_size=128256,
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    rope_parameters=dict(
        rope_type="llama3",
        rope_theta=500000.0,
        factor=32.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=8192,
    ),
    tie_word_embeddings=True,
    **_SILU_NO_BIAS,
)

QWEN2_5_0_5B: dict[str, Any] = dict(
    model_type="qwen2",
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
    tie_word_embeddings=True,
    **_SILU_NO_BIAS,
)

QWEN3_0_6B: dict[str, Any] = dict(
    model_type="qwen3",
    vocab_size=151936,
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    rms_norm_eps=1e-6,
    rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
    tie_word_embeddings=True,
    **_SILU_NO_BIAS,
)

QWEN3_30B_A3B: dict[str, Any] = dict(
    model_type="qwen3_moe",
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    moe_intermediate_size=768,
    num_hidden_layers=48,
    num_attention_heads=32,
    num_key_value_heads=4,
    head_dim=128,
    num_experts=128,
    num_experts_per_tok=8,
    norm_topk_prob=True,
    decoder_sparse_step=1,
    mlp_only_layers=[],
    router_aux_loss_coef=0.001,
    max_position_embeddings=40960,
    rms_norm_eps=1e-6,
    rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
    tie_word_embeddings=False,
    **_SILU_NO_BIAS,
)

MIXTRAL_8X7B: dict[str, Any] = dict(
    model_type="mixtral",
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    num_local_experts=8,
    num_experts_per_tok=2,
    router_aux_loss_coef=0.02,
    router_jitter_noise=0.0,
    max_position_embeddings=32768,
    rms_norm_eps=1e-5,
    rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
    tie_word_embeddings=False,
    **_SILU_NO_BIAS,
)

DEEPSEEK_V2_LITE: dict[str, Any] = dict(
    model_type="deepseek_v2",
    vocab_size=102400,
    hidden_size=2048,
    intermediate_size=10944,
    moe_intermediate_size=1408,
    num_hidden_layers=27,
    num_attention_heads=16,
    num_key_value_heads=16,
    q_lora_rank=None,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
    n_routed_experts=64,
    n_shared_experts=2,
    num_experts_per_tok=6,
    first_k_dense_replace=1,
    routed_scaling_factor=1.0,
    topk_method="greedy",
    n_group=1,
    topk_group=1,
    norm_topk_prob=False,
    scoring_func="softmax",
    moe_layer_freq=1,
    max_position_embeddings=163840,
    rms_norm_eps=1e-6,
    rope_parameters=dict(
        rope_type="yarn",
        rope_theta=10000.0,
        factor=40.0,
        original_max_position_embeddings=4096,
        beta_fast=32,
        beta_slow=1,
        mscale=0.707,
        mscale_all_dim=0.707,
    ),
    tie_word_embeddings=False,
    **_SILU_NO_BIAS,
)

_DEEPSEEK_V3_YARN = dict(
    rope_type="yarn",
    rope_theta=10000.0,
    factor=40.0,
    original_max_position_embeddings=4096,
    beta_fast=32,
    beta_slow=1,
    mscale=1.0,
    mscale_all_dim=1.0,
)

DEEPSEEK_V3: dict[str, Any] = dict(
    model_type="deepseek_v3",
    vocab_size=129280,
    hidden_size=7168,
    intermediate_size=18432,
    moe_intermediate_size=2048,
    num_hidden_layers=61,
    num_attention_heads=128,
    num_key_value_heads=128,
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
    n_routed_experts=256,
    n_shared_experts=1,
    num_experts_per_tok=8,
    first_k_dense_replace=3,
    routed_scaling_factor=2.5,
    topk_method="noaux_tc",
    n_group=8,
    topk_group=4,
    norm_topk_prob=True,
    scoring_func="sigmoid",
    moe_layer_freq=1,
    rope_interleave=True,
    max_position_embeddings=163840,
    rms_norm_eps=1e-6,
    rope_parameters=_DEEPSEEK_V3_YARN,
    tie_word_embeddings=False,
    **_SILU_NO_BIAS,
)

# DeepSeek-V3.2-Exp: V3's architecture plus the lightning indexer of its sparse attention.
DEEPSEEK_V3_2: dict[str, Any] = DEEPSEEK_V3 | dict(
    model_type="deepseek_v32", index_topk=2048, index_n_heads=64, index_head_dim=128
)

GPT2_SMALL: dict[str, Any] = dict(
    model_type="gpt2",
    vocab_size=50257,
    n_positions=1024,
    n_embd=768,
    n_layer=12,
    n_head=12,
    n_inner=None,
    activation_function="gelu_new",
    layer_norm_epsilon=1e-5,
    tie_word_embeddings=True,
    scale_attn_weights=True,
    scale_attn_by_inverse_layer_idx=False,
    add_cross_attention=False,
)

# "Attention is all you need", the base model (Vaswani et al., 2017, table 3): 6 + 6 layers,
# d_model 512, 8 heads, d_ff 2048, a shared source/target vocabulary of about 37000 BPE tokens.
# Field names are those of HF's MarianConfig (a Transformer-base encoder-decoder); the paper
# fixes no maximum length, so max_position_embeddings is Marian's 512.
TRANSFORMER_BASE: dict[str, Any] = dict(
    model_type="transformer",
    vocab_size=37000,
    max_position_embeddings=512,
    d_model=512,
    encoder_layers=6,
    decoder_layers=6,
    encoder_attention_heads=8,
    decoder_attention_heads=8,
    encoder_ffn_dim=2048,
    decoder_ffn_dim=2048,
    layer_norm_eps=1e-5,
)

# The assignment's TinyStories model (the handout's suggested sizes), with its ablation switches
# at the handout's choices; fields are ``VariantConfig``'s.
CS336_TINYSTORIES: dict[str, Any] = dict(
    model_type="cs336",
    vocab_size=10000,
    context_length=256,
    d_model=512,
    num_layers=4,
    num_heads=16,
    d_ff=1344,
    rope_theta=10000.0,
)

"""Parity with HF on the configuration fields of released models, each with a tiny model of the
family built from its HF config class: few layers and small widths, but the real structure
(e.g. Qwen3-0.6B's head_dim of 128 with hidden_size / num_heads = 64, here 16 vs 8)."""

from __future__ import annotations

import pytest
import torch
import transformers

from .adapters import (
    get_variant_lm,
    run_config_from_hf,
    run_feedforward,
    run_from_hf,
    run_generate_variant,
    run_transformer_lm_variant,
    run_transformer_lm_variant_cached,
    run_variant_accounting,
)
from .test_parity_hf import LLAMA, SHAPE, hf_model, max_logit_error, token_ids

TOLERANCE = 1e-4


def assert_greedy_tokens_equal(hf: torch.nn.Module, config: dict, family: str) -> None:
    model = get_variant_lm(config)
    model.load_state_dict(run_from_hf(hf.state_dict(), config, family))
    prompt = token_ids(config["vocab_size"], seq=5)[:1]
    with torch.no_grad():
        expected = hf.generate(prompt, max_new_tokens=10, do_sample=False, eos_token_id=None)
    ours = run_generate_variant(model, prompt[0].tolist(), 10, use_kv_cache=True)
    assert ours == expected[0, 5:].tolist()


def test_decoupled_head_dim_qwen3() -> None:
    hf = hf_model(transformers.Qwen3Config, **LLAMA, head_dim=16)  # 2 x hidden / heads
    config = run_config_from_hf(hf.config)
    assert (config["head_dim"], config["qk_norm"]) == (16, True)
    assert max_logit_error(hf, config, "qwen3") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "qwen3")
    counts = run_variant_accounting(config, batch_size=1, seq_len=8)["parameters"]
    assert sum(counts.values()) == sum(p.numel() for p in hf.parameters())


def test_decoupled_head_dim_llama_with_tied_embeddings() -> None:
    hf = hf_model(
        transformers.LlamaConfig, **{**LLAMA, "tie_word_embeddings": True}, head_dim=4
    )  # narrower heads than hidden / heads
    config = run_config_from_hf(hf.config)
    assert (config["head_dim"], config["tie_embeddings"]) == (4, True)
    assert max_logit_error(hf, config, "llama") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "llama")


LLAMA_3_2_ROPE = dict(  # Llama-3.2's published rope_scaling
    rope_type="llama3",
    factor=32.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=8192,
)


QWEN_YARN = dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)
MSCALE_YARN = dict(QWEN_YARN, mscale=1.0, mscale_all_dim=0.5, beta_fast=16)  # factor != 1


@pytest.mark.parametrize(
    "scaling",
    [LLAMA_3_2_ROPE, dict(rope_type="linear", factor=4.0), QWEN_YARN, MSCALE_YARN],
    ids=["llama3", "linear", "yarn", "yarn_mscale"],
)
def test_rope_scaling_llama(scaling: dict) -> None:
    shape = {k: v for k, v in LLAMA.items() if k != "rope_theta"}
    shape |= dict(max_position_embeddings=256, hidden_size=64, num_attention_heads=2)
    rope = dict(scaling, rope_theta=500000.0)
    hf = hf_model(transformers.LlamaConfig, **shape, rope_parameters=rope)
    config = run_config_from_hf(hf.config)
    assert config["rope_scaling"] == scaling
    ids = token_ids(seq=200)
    with torch.no_grad():
        reference = hf(ids).logits
        ours = run_transformer_lm_variant(
            config, run_from_hf(hf.state_dict(), config, "llama"), ids
        )
        unscaled = {**config, "rope_scaling": None}
        plain = run_transformer_lm_variant(
            unscaled, run_from_hf(hf.state_dict(), unscaled, "llama"), ids
        )
    assert (ours - reference).abs().max() < TOLERANCE
    assert (plain - reference).abs().max() > 100 * TOLERANCE  # the scaling matters here
    assert_greedy_tokens_equal(hf, config, "llama")


def test_unsupported_rope_scaling_is_refused_by_name() -> None:
    longrope = dict(
        rope_type="longrope",
        rope_theta=10000.0,
        short_factor=[1.0] * 4,
        long_factor=[2.0] * 4,
        original_max_position_embeddings=16,
    )
    with pytest.raises(ValueError, match=r"longrope.*supported.*linear.*llama3.*yarn.*dynamic"):
        run_config_from_hf(transformers.LlamaConfig(**SHAPE, rope_parameters=longrope))
    odd = dict(rope_type="linear", rope_theta=10000.0, factor=2.0, beta_fast=3)
    with pytest.raises(ValueError, match="beta_fast"):
        run_config_from_hf(transformers.LlamaConfig(**SHAPE, rope_parameters=odd))


def test_dynamic_ntk_rope_llama() -> None:
    """Dynamic NTK past max_position_embeddings (16 here): a full forward pass rotates every
    position with the base of its length; cached decoding rotates each step with the base of
    that step's length, as HF's cache does (so the two paths differ from each other)."""
    shape = {k: v for k, v in LLAMA.items() if k != "rope_theta"}
    shape |= dict(max_position_embeddings=16, hidden_size=64, num_attention_heads=2)
    dynamic = dict(rope_type="dynamic", factor=4.0, rope_theta=10000.0)
    hf = hf_model(transformers.LlamaConfig, **shape, rope_parameters=dynamic)
    config = run_config_from_hf(hf.config)
    scaling = dict(rope_type="dynamic", factor=4.0, original_max_position_embeddings=16)
    assert (config["rope_scaling"], config["context_length"]) == (scaling, 64)
    weights = run_from_hf(hf.state_dict(), config, "llama")
    unscaled = {**config, "rope_scaling": None}
    ids = token_ids(seq=40)
    with torch.no_grad():
        ours = run_transformer_lm_variant(config, weights, ids)
        assert (ours - hf(ids).logits).abs().max() < TOLERANCE
        plain = run_transformer_lm_variant(unscaled, weights, ids)
        assert (plain - ours).abs().max() > 100 * TOLERANCE  # the scaling matters here
        short = ids[:, :15]  # plain RoPE; HF keeps the base of 40 until a call is shorter than 16
        assert (
            run_transformer_lm_variant(unscaled, weights, short) - hf(short).logits
        ).abs().max() < TOLERANCE
        model = get_variant_lm(config)
        model.load_state_dict(weights)
        cached, _ = run_transformer_lm_variant_cached(model, ids, prefix_length=5)
        assert (cached - hf_cached_logits(hf, ids, prefix_length=5)).abs().max() < TOLERANCE
        assert (cached - ours).abs().max() > 100 * TOLERANCE
        prompt = ids[:1, :5]
        for use_cache in (True, False):
            expected = hf.generate(
                prompt, max_new_tokens=30, do_sample=False, eos_token_id=None, use_cache=use_cache
            )
            tokens = run_generate_variant(model, prompt[0].tolist(), 30, use_kv_cache=use_cache)
            assert tokens == expected[0, 5:].tolist(), f"use_cache={use_cache}"


def hf_cached_logits(hf: torch.nn.Module, ids: torch.Tensor, prefix_length: int) -> torch.Tensor:
    """HF's logits for ``ids`` decoded with its cache: the prefix at once, then token by token."""
    out = hf(ids[:, :prefix_length], use_cache=True)
    pieces = [out.logits]
    for t in range(prefix_length, ids.shape[1]):
        out = hf(ids[:, t : t + 1], past_key_values=out.past_key_values, use_cache=True)
        pieces.append(out.logits)
    return torch.cat(pieces, dim=1)


def test_gpt2_published_gelu_new_and_untied_head() -> None:
    """Released GPT-2 uses the tanh fit of GELU (HF's default ``gelu_new``); an untied
    ``lm_head`` is honoured too."""
    hf = hf_model(
        transformers.GPT2Config,
        transformers.GPT2LMHeadModel,
        vocab_size=97,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=4,
        attn_implementation="eager",
        tie_word_embeddings=False,
    )
    config = run_config_from_hf(hf.config)
    assert (config["ffn"], config["tie_embeddings"]) == ("gelu_tanh", False)
    assert max_logit_error(hf, config, "gpt2") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "gpt2")
    weights = {
        "w1.weight": torch.randn(48, 32),
        "w2.weight": torch.randn(32, 48),
        "w1.bias": torch.randn(48),
        "w2.bias": torch.randn(32),
    }
    x = torch.randn(3, 32)
    expected = torch.nn.functional.linear(
        torch.nn.functional.gelu(
            torch.nn.functional.linear(x, weights["w1.weight"], weights["w1.bias"]),
            approximate="tanh",
        ),
        weights["w2.weight"],
        weights["w2.bias"],
    )
    assert torch.allclose(run_feedforward(32, 48, "gelu_tanh", weights, x), expected, atol=1e-5)


def test_qkv_bias_qwen2() -> None:
    hf = hf_model(transformers.Qwen2Config, **LLAMA)
    config = run_config_from_hf(hf.config)
    assert config["qkv_bias"] and not config["bias"]
    assert max_logit_error(hf, config, "qwen2") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "qwen2")
    counts = run_variant_accounting(config, batch_size=1, seq_len=8)["parameters"]
    assert sum(counts.values()) == sum(p.numel() for p in hf.parameters())
    with pytest.raises(ValueError, match="sliding_window"):
        run_config_from_hf(transformers.Qwen2Config(**LLAMA, use_sliding_window=True))


@pytest.mark.parametrize(
    ("mlp_only_layers", "decoder_sparse_step", "dense"),
    [([0], 1, [0]), ([], 2, [0, 2]), ([3], 2, [0, 2, 3])],
)
def test_dense_layers_qwen3_moe(mlp_only_layers, decoder_sparse_step, dense) -> None:
    hf = hf_model(
        transformers.Qwen3MoeConfig,
        **{**LLAMA, "num_hidden_layers": 4},
        head_dim=16,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=24,
        norm_topk_prob=True,
        mlp_only_layers=mlp_only_layers,
        decoder_sparse_step=decoder_sparse_step,
    )
    config = run_config_from_hf(hf.config)
    assert (config["dense_layers"], config["dense_d_ff"], config["d_ff"]) == (dense, 48, 24)
    assert max_logit_error(hf, config, "qwen3_moe") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "qwen3_moe")
    counts = run_variant_accounting(config, batch_size=1, seq_len=8)["parameters"]
    assert sum(counts.values()) == sum(p.numel() for p in hf.parameters())


# A tiny DeepSeek-V2-Lite attention: MLA without a query low-rank, eager attention, untied head.
DEEPSEEK_V2_LITE_MLA = dict(
    SHAPE,
    attn_implementation="eager",
    tie_word_embeddings=False,
    intermediate_size=48,
    q_lora_rank=None,
    kv_lora_rank=12,
    qk_nope_head_dim=6,
    v_head_dim=5,
    rms_norm_eps=1e-6,
)


def deepseek_v2_moe(**overrides) -> torch.nn.Module:
    """A tiny DeepSeek-V2-Lite: a dense first layer, two shared experts, unnormalised top-k
    scaled by V2's published routed_scaling_factor 16.0 (its experts scaled down by 10 so they
    do not swamp the logits)."""
    published = dict(
        first_k_dense_replace=1,
        n_routed_experts=8,
        num_experts_per_tok=3,
        n_shared_experts=2,
        moe_intermediate_size=16,
        routed_scaling_factor=16.0,
        n_group=4,
        topk_group=2,
    )
    hf = hf_model(
        transformers.DeepseekV2Config,
        **{**DEEPSEEK_V2_LITE_MLA, "num_hidden_layers": 3, "qk_rope_head_dim": 4},
        **(published | overrides),
    )
    with torch.no_grad():
        for name, parameter in hf.named_parameters():
            if "mlp.experts" in name:
                parameter.mul_(0.1)
    return hf


@pytest.mark.parametrize("topk_method", ["greedy", "group_limited_greedy"])
def test_moe_deepseek_v2_lite_structure(topk_method: str) -> None:
    hf = deepseek_v2_moe(topk_method=topk_method)
    config = run_config_from_hf(hf.config)
    assert (config["dense_layers"], config["num_shared_experts"]) == ([0], 2)
    assert config.get("expert_groups") == ([4, 2] if topk_method != "greedy" else None)
    assert max_logit_error(hf, config, "deepseek_v2") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "deepseek_v2")
    counts = run_variant_accounting(config, batch_size=1, seq_len=8)["parameters"]
    assert sum(counts.values()) == sum(p.numel() for p in hf.parameters())


@pytest.mark.parametrize("field", ["norm_topk_prob", "moe_layer_freq"])
def test_deepseek_v2_fields_hf_ignores_are_refused(field: str) -> None:
    """HF's DeepseekV2 never reads norm_topk_prob or moe_layer_freq (DeepSeek's own code
    renormalises, and puts MoE only in every moe_layer_freq-th layer): the same weights give
    the same logits whatever their value. Reproducing HF would silently drop them, so a value
    other than the one HF implements is refused by name."""
    value = {"norm_topk_prob": True, "moe_layer_freq": 2}[field]
    implemented, changed = deepseek_v2_moe(), deepseek_v2_moe(**{field: value})
    ids = token_ids()
    with torch.no_grad():
        assert torch.equal(implemented(ids).logits, changed(ids).logits)
    with pytest.raises(ValueError, match=rf"{field}=.*HF's deepseek_v2 implements only.*supported"):
        run_config_from_hf(changed.config)


def test_yarn_mscale_deepseek_v2_mla() -> None:
    """DeepSeek-V2-Lite's published yarn: the RoPE dims rescaled and the softmax sharpened by
    mscale(factor, mscale_all_dim)^2."""
    yarn = dict(
        rope_type="yarn",
        factor=40.0,
        original_max_position_embeddings=4096,
        mscale=0.707,
        mscale_all_dim=0.707,
        beta_fast=32,
        beta_slow=1,
    )
    hf = hf_model(
        transformers.DeepseekV2Config,
        **{**DEEPSEEK_V2_LITE_MLA, "max_position_embeddings": 256, "qk_rope_head_dim": 8},
        first_k_dense_replace=2,
        rope_parameters=dict(yarn, rope_theta=10000.0),
    )
    config = run_config_from_hf(hf.config)
    assert config["rope_scaling"] == yarn
    assert max_logit_error(hf, config, "deepseek_v2") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "deepseek_v2")


def deepseek_v3_moe(**overrides) -> torch.nn.Module:
    """A tiny DeepSeek-V3 with the published routing structure: a dense first layer, one shared
    expert, sigmoid scores with a (here random) e_score_correction_bias, 4 groups of which the
    best 2 are searched, norm_topk_prob and routed_scaling_factor 2.5."""
    published = dict(
        first_k_dense_replace=1,
        n_routed_experts=8,
        num_experts_per_tok=3,
        n_shared_experts=1,
        moe_intermediate_size=16,
        routed_scaling_factor=2.5,
        n_group=4,
        topk_group=2,
        norm_topk_prob=True,
        rope_interleave=True,
    )
    hf = hf_model(
        transformers.DeepseekV3Config,
        **{**SHAPE, "num_hidden_layers": 3},
        attn_implementation="eager",
        tie_word_embeddings=False,
        intermediate_size=48,
        num_key_value_heads=4,
        q_lora_rank=16,
        kv_lora_rank=12,
        qk_rope_head_dim=4,
        qk_nope_head_dim=6,
        v_head_dim=5,
        **(published | overrides),
    )
    generator = torch.Generator().manual_seed(5)
    for layer in hf.model.layers[1:]:
        bias = layer.mlp.gate.e_score_correction_bias
        bias.copy_(0.3 * torch.randn(bias.shape, generator=generator))
    return hf


@pytest.mark.parametrize("norm_topk_prob", [True, False])
def test_moe_deepseek_v3_structure(norm_topk_prob: bool) -> None:
    hf = deepseek_v3_moe(norm_topk_prob=norm_topk_prob)
    config = run_config_from_hf(hf.config)
    assert (config["router_scoring"], config["normalize_topk"]) == ("sigmoid", norm_topk_prob)
    assert (config["dense_layers"], config["num_shared_experts"]) == ([0], 1)
    assert (config["expert_groups"], config["routed_scaling"]) == ([4, 2], 2.5)
    state = run_from_hf(hf.state_dict(), config, "deepseek_v3")
    assert torch.equal(
        state["layers.2.ffn.score_correction_bias"],
        hf.model.layers[2].mlp.gate.e_score_correction_bias,
    )
    ids = token_ids(config["vocab_size"])
    with torch.no_grad():
        unbiased = {k: v * 0 if "correction" in k else v for k, v in state.items()}
        zeroed = run_transformer_lm_variant(config, unbiased, ids)
        assert (zeroed - hf(ids).logits).abs().max() > 100 * TOLERANCE  # the bias matters here
    assert max_logit_error(hf, config, "deepseek_v3") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "deepseek_v3")
    counts = run_variant_accounting(config, batch_size=1, seq_len=8)["parameters"]
    assert sum(counts.values()) == sum(p.numel() for p in hf.parameters())


MLA = dict(SHAPE, num_key_value_heads=4, kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=6)
MLA_MOE = dict(MLA, first_k_dense_replace=0, n_routed_experts=4, num_experts_per_tok=2)
V3_MOE = dict(MLA_MOE, n_group=1, topk_group=1)
GPT2 = dict(
    vocab_size=97, n_embd=32, n_layer=1, n_head=4, n_positions=32, activation_function="gelu"
)
UNSUPPORTED = [  # (config class, its fields, the field a non-default value of which is refused)
    # (classes by name: touching any of transformers' config classes imports its compiler stack,
    # seconds that every test process would pay while merely collecting this file)
    ("LlamaConfig", dict(SHAPE, attention_bias=True), "attention_bias"),
    ("LlamaConfig", dict(SHAPE, mlp_bias=True), "mlp_bias"),
    ("LlamaConfig", dict(SHAPE, hidden_act="gelu"), "hidden_act"),
    ("LlamaConfig", dict(SHAPE, partial_rotary_factor=0.5), "partial_rotary_factor"),
    ("Qwen3Config", dict(SHAPE, attention_bias=True), "attention_bias"),
    (
        "Qwen3Config",
        dict(SHAPE, use_sliding_window=True, sliding_window=8),
        "sliding_window",
    ),
    ("MixtralConfig", dict(SHAPE, router_jitter_noise=0.1), "router_jitter_noise"),
    ("GPT2Config", dict(GPT2, scale_attn_weights=False), "scale_attn_weights"),
    (
        "GPT2Config",
        dict(GPT2, scale_attn_by_inverse_layer_idx=True),
        "scale_attn_by_inverse_layer_idx",
    ),
    ("GPT2Config", dict(GPT2, add_cross_attention=True), "add_cross_attention"),
    ("GPT2Config", dict(GPT2, activation_function="relu"), "activation_function"),
    ("DeepseekV2Config", dict(MLA_MOE, scoring_func="sigmoid"), "scoring_func"),
    ("DeepseekV2Config", dict(MLA_MOE, topk_method="noaux_tc"), "topk_method"),
    ("DeepseekV2Config", dict(MLA_MOE, norm_topk_prob=True), "norm_topk_prob"),
    ("DeepseekV2Config", dict(MLA, num_key_value_heads=2), "num_key_value_heads"),
    ("DeepseekV3Config", dict(V3_MOE, topk_method="greedy"), "topk_method"),
    ("DeepseekV3Config", dict(V3_MOE, scoring_func="softmax"), "scoring_func"),
    ("DeepseekV3Config", dict(V3_MOE, moe_layer_freq=2), "moe_layer_freq"),
    ("DeepseekV3Config", dict(MLA, rope_interleave=False), "rope_interleave"),
]


@pytest.mark.parametrize(
    ("config_class", "fields", "field"),
    UNSUPPORTED,
    ids=[f"{c.removesuffix('Config').lower()}-{field}" for c, _, field in UNSUPPORTED],
)
def test_unsupported_field_is_refused_by_name(config_class: str, fields: dict, field: str) -> None:
    """A published-config field the model cannot reproduce is an error naming it and what is
    supported, never silently ignored."""
    with pytest.raises(ValueError, match=rf"{field}.*supported"):
        run_config_from_hf(getattr(transformers, config_class)(**fields))

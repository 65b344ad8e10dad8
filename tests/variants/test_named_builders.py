"""The named builders, one per published family: each builds the published model by default,
and the HF model its config describes when given one: the same logits as a tiny ``transformers``
model built locally from its config class (offline), after loading its weights."""

from __future__ import annotations

import pytest
import torch
import transformers

from .adapters import (
    get_named_variant,
    get_named_variant_config,
    run_config_from_hf,
    run_from_hf,
    run_transformer_lm_variant_cached,
    run_variant_accounting,
)
from .test_parity_hf import LLAMA, hf_model, token_ids
from .test_parity_published import GPT2, deepseek_v2_moe, deepseek_v3_moe
from .test_sparse_attention import deepseek_v32

TOLERANCE = 1e-4


def assert_named_builder_matches(name: str, hf: torch.nn.Module, family: str) -> None:
    """The named builder given ``hf``'s config reads the config the generic HF reader reads, and
    its model, with ``hf``'s weights, gives ``hf``'s logits, also decoded with a KV cache."""
    model, config = get_named_variant(name, hf.config, seed=1)
    assert config == run_config_from_hf(hf.config)
    model.load_state_dict(run_from_hf(hf.state_dict(), config, family))
    ids = token_ids(config["vocab_size"])
    with torch.no_grad():
        expected = hf(ids).logits
        assert (model(ids) - expected).abs().max() < TOLERANCE
    cached, _ = run_transformer_lm_variant_cached(model, ids, prefix_length=4)
    assert (cached - expected).abs().max() < TOLERANCE


MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24)
TINY_HF_MODELS = {  # builder: (HF family, a tiny HF model of it)
    "llama3_2_1b": ("llama", lambda: hf_model(transformers.LlamaConfig, **LLAMA, head_dim=4)),
    "qwen2_5_0_5b": ("qwen2", lambda: hf_model(transformers.Qwen2Config, **LLAMA)),
    "qwen3_0_6b": ("qwen3", lambda: hf_model(transformers.Qwen3Config, **LLAMA, head_dim=16)),
    "qwen3_moe": (
        "qwen3_moe",
        lambda: hf_model(
            transformers.Qwen3MoeConfig, **LLAMA, head_dim=8, **MOE, mlp_only_layers=[0]
        ),
    ),
    "mixtral": (
        "mixtral",
        lambda: hf_model(
            transformers.MixtralConfig, **LLAMA, num_local_experts=4, num_experts_per_tok=2
        ),
    ),
    "deepseek_v2_lite": ("deepseek_v2", lambda: deepseek_v2_moe(topk_method="greedy")),
    "deepseek_v3": ("deepseek_v3", deepseek_v3_moe),
    "deepseek_v3_2": ("deepseek_v32", lambda: deepseek_v32(index_topk=5)),
    "gpt2_small": (
        "gpt2",
        lambda: hf_model(
            transformers.GPT2Config,
            transformers.GPT2LMHeadModel,
            **GPT2,
            attn_implementation="eager",
            bos_token_id=0,
            eos_token_id=0,
        ),
    ),
}


@pytest.mark.parametrize("name", TINY_HF_MODELS)
def test_named_builder_matches_hf(name: str) -> None:
    family, make = TINY_HF_MODELS[name]
    assert_named_builder_matches(name, make(), family)


# Total parameters of the released checkpoints (their model cards, the sums of the tensors in
# their safetensors files; DeepSeek-V3's without its multi-token-prediction layer).
PUBLISHED_PARAMETERS = {
    "llama3_2_1b": 1_235_814_400,
    "qwen2_5_0_5b": 494_032_768,
    "qwen3_0_6b": 596_049_920,
    "qwen3_moe": 30_532_122_624,
    "mixtral": 46_702_792_704,
    "deepseek_v2_lite": 15_706_484_224,
    "deepseek_v3": 671_026_404_352,
    "gpt2_small": 124_439_808,
}


@pytest.mark.parametrize("name", PUBLISHED_PARAMETERS)
def test_named_builder_defaults_are_the_published_model(name: str) -> None:
    config = get_named_variant_config(name)  # the config only: no weights are made
    counts = run_variant_accounting(config, batch_size=1, seq_len=1)["parameters"]
    assert sum(counts.values()) == PUBLISHED_PARAMETERS[name]


TINY_LLAMA_FIELDS = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
)


def test_named_builder_keeps_the_published_fields_a_dict_leaves_out() -> None:
    config = get_named_variant_config("llama3_2_1b", TINY_LLAMA_FIELDS)
    assert (config["d_model"], config["num_kv_heads"], config["head_dim"]) == (64, 2, 8)
    # Llama 3.2's published RoPE, context and tied head, which the dict does not name.
    assert config["rope_scaling"] == dict(
        rope_type="llama3",
        factor=32.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=8192,
    )
    assert (config["rope_theta"], config["context_length"]) == (500000.0, 131072)
    assert config["tie_embeddings"]
    assert get_named_variant_config("llama3_2_1b", **TINY_LLAMA_FIELDS) == config
    assert (
        get_named_variant_config("llama3_2_1b", TINY_LLAMA_FIELDS, num_hidden_layers=3)[
            "num_layers"
        ]
        == 3
    )


def test_named_builder_overrides_an_hf_config_object_without_changing_it() -> None:
    hf_config = transformers.LlamaConfig(**LLAMA)
    config = get_named_variant_config("llama3_2_1b", hf_config, num_hidden_layers=3)
    assert (config["num_layers"], config["num_kv_heads"]) == (3, 2)
    assert "rope_scaling" not in config  # an object is read whole: no published defaults
    assert hf_config.num_hidden_layers == LLAMA["num_hidden_layers"]


def test_named_builder_refuses_another_family_and_what_its_parts_cannot_do() -> None:
    with pytest.raises(ValueError, match="reads a 'llama' config; got model_type 'qwen3'"):
        get_named_variant_config("llama3_2_1b", transformers.Qwen3Config())
    with pytest.raises(ValueError, match="attention_bias"):
        get_named_variant_config("qwen3_0_6b", attention_bias=True)
    with pytest.raises(ValueError, match="decoder_ffn_dim"):
        get_named_variant_config("transformer_base", decoder_ffn_dim=1024)


def test_named_builder_ablations_of_the_assignment_model() -> None:
    """The assignment's model with its ablation switches: the published (handout) sizes by
    default; post-norm, NoPE and SiLU layers when asked."""
    model, config = get_named_variant(
        "cs336_tinystories",
        vocab_size=97,
        d_model=32,
        num_layers=1,
        num_heads=4,
        d_ff=48,
        norm_placement="post",
        position_encoding="none",
        ffn="silu",
    )
    assert (config["norm_placement"], config["position_encoding"], config["ffn"]) == (
        "post",
        "none",
        "silu",
    )
    assert "layers.0.ffn.w3.weight" not in model.state_dict()
    handout = get_named_variant_config("cs336_tinystories")
    assert (handout["d_model"], handout["num_layers"], handout["d_ff"]) == (512, 4, 1344)

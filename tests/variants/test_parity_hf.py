"""Parity of the architecture variants with Hugging Face ``transformers`` models, offline.

Each test builds a tiny random HF model from a config object (never from the hub), converts its
weights with the HF converter (through the adapters) and compares logits in float32. Conversions are checked
both ways: HF weights loaded into ours, our weights loaded into HF, and a lossless round trip.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from .adapters import (
    get_variant_lm,
    run_config_from_hf,
    run_from_hf,
    run_to_hf,
    run_transformer_lm_variant,
    run_transformer_lm_variant_cached,
    run_transformer_lm_variant_with_aux_loss,
)

TOLERANCE = 2e-5  # max |logit difference|; the logits themselves are O(1)
SHAPE = dict(
    vocab_size=97,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=32,
)
EAGER = dict(attn_implementation="eager", tie_word_embeddings=False)


def hf_model(config_class: type, model_class: type | None = None, **kwargs) -> torch.nn.Module:
    """A tiny HF model (default class: ``<Family>ForCausalLM``) with every parameter (norm
    gains included) drawn at random."""
    torch.manual_seed(0)
    if model_class is None:
        model_class = getattr(transformers, config_class.__name__.replace("Config", "ForCausalLM"))
    model = model_class(config_class(**kwargs))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.2 if parameter.ndim > 1 else 1.0)
    return model.eval()


def token_ids(vocab_size: int = 97, seq: int = 12) -> torch.Tensor:
    return torch.randint(0, vocab_size, (2, seq), generator=torch.Generator().manual_seed(3))


def max_logit_error(hf: torch.nn.Module, config: dict, family: str) -> float:
    """Both directions: HF weights run by our model, then our random weights run by HF."""
    ids = token_ids(config["vocab_size"])
    with torch.no_grad():
        ours = run_transformer_lm_variant(config, run_from_hf(hf.state_dict(), config, family), ids)
        error = (ours - hf(ids).logits).abs().max().item()
        model = get_variant_lm(config, seed=1)
        hf.load_state_dict(run_to_hf(model.state_dict(), config, family))
        return max(error, (model(ids) - hf(ids).logits).abs().max().item())


def assert_round_trip(config: dict, family: str) -> None:
    state = get_variant_lm(config).state_dict()
    back = run_from_hf(run_to_hf(state, config, family), config, family)
    assert back.keys() == state.keys()
    for name, tensor in state.items():
        assert torch.equal(back[name], tensor), name


LLAMA = dict(SHAPE, intermediate_size=48, num_key_value_heads=2, rope_theta=500.0, **EAGER)


def test_parity_gqa_rope_llama() -> None:
    hf = hf_model(transformers.LlamaConfig, **LLAMA)
    config = run_config_from_hf(hf.config)
    assert (config["num_kv_heads"], config["rope_theta"], config["qk_norm"]) == (2, 500.0, False)
    assert max_logit_error(hf, config, "llama") < TOLERANCE
    assert_round_trip(config, "llama")


def test_parity_fails_when_rope_permutation_is_broken() -> None:
    """The Llama check has teeth: query and key rows left in HF's rotate-half order (the
    permutation to interleaved pairs undone) give logits far from HF's."""
    hf = hf_model(transformers.LlamaConfig, **LLAMA)
    config = run_config_from_hf(hf.config)
    ours = run_from_hf(hf.state_dict(), config, "llama")
    for i in range(config["num_layers"]):
        for name in ("q_proj", "k_proj"):
            ours[f"layers.{i}.attn.{name}.weight"] = hf.state_dict()[
                f"model.layers.{i}.self_attn.{name}.weight"
            ]
    ids = token_ids()
    with torch.no_grad():
        error = (run_transformer_lm_variant(config, ours, ids) - hf(ids).logits).abs().max()
    assert error > 1e-2


def test_parity_mqa_llama() -> None:
    hf = hf_model(transformers.LlamaConfig, **{**LLAMA, "num_key_value_heads": 1})
    assert max_logit_error(hf, run_config_from_hf(hf.config), "llama") < TOLERANCE


def test_parity_qk_norm_qwen3() -> None:
    hf = hf_model(transformers.Qwen3Config, **LLAMA, head_dim=8)
    config = run_config_from_hf(hf.config)
    assert config["qk_norm"]
    assert max_logit_error(hf, config, "qwen3") < TOLERANCE
    assert_round_trip(config, "qwen3")


@pytest.mark.parametrize("norm_topk_prob", [True, False])
def test_parity_moe_qwen3_moe(norm_topk_prob: bool) -> None:
    hf = hf_model(
        transformers.Qwen3MoeConfig,
        **LLAMA,
        head_dim=8,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=24,
        norm_topk_prob=norm_topk_prob,
        router_aux_loss_coef=0.02,
    )
    config = run_config_from_hf(hf.config)
    moe = (config["ffn"], config["num_experts"], config["top_k"], config["d_ff"])
    assert moe == ("moe", 4, 2, 24)
    ids = token_ids()
    weights = run_from_hf(hf.state_dict(), config, "qwen3_moe")
    with torch.no_grad():
        logits, aux_loss = run_transformer_lm_variant_with_aux_loss(config, weights, ids)
        reference = hf(ids, output_router_logits=True)
        torch.testing.assert_close(logits, reference.logits, atol=TOLERANCE, rtol=0)
    # HF pools all layers into one balance statistic; ours averages per-layer losses, so
    # compare against HF's function applied to each layer separately. (Imported here: the
    # modeling module pulls in torch's compiler stack, seconds every test process would pay
    # while merely collecting this file.)
    from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

    per_layer = [load_balancing_loss_func((logits,), 4, 2) for logits in reference.router_logits]
    torch.testing.assert_close(aux_loss, 0.02 * torch.stack(per_layer).mean())
    assert max_logit_error(hf, config, "qwen3_moe") < TOLERANCE
    assert_round_trip(config, "qwen3_moe")


def test_parity_moe_mixtral() -> None:
    hf = hf_model(transformers.MixtralConfig, **LLAMA, num_local_experts=4, num_experts_per_tok=2)
    config = run_config_from_hf(hf.config)
    assert config["normalize_topk"] and not config["qk_norm"]
    assert max_logit_error(hf, config, "mixtral") < TOLERANCE
    assert_round_trip(config, "mixtral")


@pytest.mark.parametrize(
    ("family", "q_lora_rank"), [("deepseek_v2", None), ("deepseek_v2", 16), ("deepseek_v3", 16)]
)
def test_parity_mla_deepseek(family: str, q_lora_rank: int | None) -> None:
    config_class = {
        "deepseek_v2": transformers.DeepseekV2Config,
        "deepseek_v3": transformers.DeepseekV3Config,
    }[family]
    hf = hf_model(
        config_class,
        **SHAPE,
        **EAGER,
        intermediate_size=48,
        q_lora_rank=q_lora_rank,
        num_key_value_heads=4,
        kv_lora_rank=12,
        qk_rope_head_dim=4,
        qk_nope_head_dim=6,
        v_head_dim=5,
        first_k_dense_replace=2,
        rms_norm_eps=1e-6,
    )
    config = run_config_from_hf(hf.config)
    mla = (config["attention"], config["q_lora_rank"], config["kv_lora_rank"])
    assert mla == ("mla", q_lora_rank, 12)
    assert max_logit_error(hf, config, family) < TOLERANCE
    assert_round_trip(config, family)


def test_parity_mla_latent_cache_deepseek_v2() -> None:
    """The folded, latent-cached decoding path against HF's full forward."""
    hf = hf_model(
        transformers.DeepseekV2Config,
        **SHAPE,
        **EAGER,
        intermediate_size=48,
        q_lora_rank=16,
        kv_lora_rank=12,
        qk_rope_head_dim=4,
        qk_nope_head_dim=6,
        v_head_dim=5,
        first_k_dense_replace=2,
        rms_norm_eps=1e-6,
    )
    config = run_config_from_hf(hf.config)
    model = get_variant_lm(config)
    model.load_state_dict(run_from_hf(hf.state_dict(), config, "deepseek_v2"))
    ids = token_ids()
    decoded, _ = run_transformer_lm_variant_cached(model, ids, 4)
    with torch.no_grad():
        torch.testing.assert_close(decoded, hf(ids).logits, atol=TOLERANCE, rtol=0)


def test_parity_learned_position_layernorm_gelu_gpt2() -> None:
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            vocab_size=97,
            n_positions=32,
            n_embd=32,
            n_layer=2,
            n_head=4,
            activation_function="gelu",
            bos_token_id=0,
            eos_token_id=0,
            attn_implementation="eager",
        )
    )
    with torch.no_grad():
        for parameter in hf.parameters():
            parameter.normal_(0.0, 0.2 if parameter.ndim > 1 else 1.0)
    hf.eval()
    config = run_config_from_hf(hf.config)
    assert (config["norm"], config["position_encoding"], config["ffn"], config["bias"]) == (
        "layernorm",
        "learned",
        "gelu",
        True,
    )
    assert max_logit_error(hf, config, "gpt2") < TOLERANCE
    assert_round_trip(config, "gpt2")


def test_parity_config_rejects_unsupported_hf_settings() -> None:
    qwen3_with_llama_weights = get_variant_lm(TINY_LM).state_dict()
    with pytest.raises(ValueError, match="does not describe"):
        run_to_hf(qwen3_with_llama_weights, TINY_LM, "qwen3")
    with pytest.raises(ValueError, match="attention_bias"):
        run_config_from_hf(transformers.LlamaConfig(**{**LLAMA, "attention_bias": True}))
    with pytest.raises(ValueError, match="activation"):
        run_config_from_hf(transformers.GPT2Config(activation_function="relu"))
    with pytest.raises(ValueError, match="rope_interleave"):
        run_config_from_hf(transformers.DeepseekV3Config(rope_interleave=False))


TINY_LM = dict(vocab_size=97, context_length=32, d_model=32, num_layers=2, num_heads=4, d_ff=48)

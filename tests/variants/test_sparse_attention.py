"""DeepSeek Sparse Attention (DeepSeek-V3.2) against HF ``deepseek_v32``: tiny random models
saved by ``transformers``' ``save_pretrained``, read by ``load_pretrained``; logits, cached
logits and greedy tokens equal, with ``index_topk`` below the sequence length (the indexer
decides what each query sees) and above it (dense latent attention)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode

from .adapters import (
    get_deepseek_v3_2_config,
    run_config_from_hf,
    run_generate_variant,
    run_load_pretrained,
    run_save_pretrained,
    run_transformer_lm_variant,
    run_transformer_lm_variant_cached,
    run_transformer_lm_variant_static_cached,
    run_variant_accounting,
)
from .test_parity_hf import hf_model, token_ids
from .test_parity_published import hf_cached_logits

TOLERANCE = 2e-5
SEQ = 20


def deepseek_v32(index_topk: int) -> torch.nn.Module:
    """A tiny DeepSeek-V3.2: a dense first layer, sigmoid-routed experts with a shared one and a
    random e_score_correction_bias, and an indexer of 16 heads of width 8 (with few heads, all
    of a pair's ReLU scores are often 0: equal index scores, whose top-k tie-break depends on
    the row's length, so even HF's cached and uncached logits would differ)."""
    hf = hf_model(
        transformers.DeepseekV32Config,
        vocab_size=97,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        attn_implementation="eager",
        q_lora_rank=16,
        kv_lora_rank=12,
        qk_rope_head_dim=4,
        qk_nope_head_dim=6,
        v_head_dim=5,
        first_k_dense_replace=1,
        n_routed_experts=8,
        num_experts_per_tok=3,
        n_shared_experts=1,
        moe_intermediate_size=16,
        n_group=4,
        topk_group=2,
        index_topk=index_topk,
        index_n_heads=16,
        index_head_dim=8,
    )
    generator = torch.Generator().manual_seed(5)
    for layer in hf.model.layers[1:]:
        bias = layer.mlp.gate.e_score_correction_bias
        bias.copy_(0.3 * torch.randn(bias.shape, generator=generator))
    return hf


@pytest.fixture(scope="module", params=[3, 64], ids=["topk-below-seq", "topk-above-seq"])
def loaded(request, tmp_path_factory):
    hf = deepseek_v32(request.param)
    directory = tmp_path_factory.mktemp("deepseek_v32")
    hf.save_pretrained(directory)
    model, config, family, _ = run_load_pretrained(directory)
    assert (family, config["index_topk"]) == ("deepseek_v32", request.param)
    return hf, model, config


def test_logits_equal_hf_and_the_sparsity_matters_only_below_the_length(loaded) -> None:
    hf, model, config = loaded
    ids = token_ids(seq=SEQ)
    dense_config = config | {"index_topk": None}
    dense_weights = {k: v for k, v in model.state_dict().items() if ".indexer." not in k}
    with torch.no_grad():
        ours = model(ids)
        assert (ours - hf(ids).logits).abs().max() < TOLERANCE
        dense = run_transformer_lm_variant(dense_config, dense_weights, ids)
    gap = (dense - ours).abs().max()
    assert gap > 100 * TOLERANCE if config["index_topk"] < SEQ else gap < TOLERANCE


def test_cached_decoding_equals_hf_cached(loaded) -> None:
    """HF's cache keeps the indexer's keys too; both caches of ours must give its logits."""
    hf, model, _ = loaded
    ids = token_ids(seq=SEQ)
    with torch.no_grad():
        expected = hf_cached_logits(hf, ids, prefix_length=5)
    cached, _ = run_transformer_lm_variant_cached(model, ids, prefix_length=5)
    assert (cached - expected).abs().max() < TOLERANCE
    static, _ = run_transformer_lm_variant_static_cached(model, ids, 5, max_length=32)
    assert (static - expected).abs().max() < TOLERANCE


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_tokens_equal_hf(loaded, use_cache: bool) -> None:
    hf, model, _ = loaded
    prompt = token_ids(seq=6)[:1]
    with torch.no_grad():
        expected = hf.generate(
            prompt, max_new_tokens=14, do_sample=False, eos_token_id=None, use_cache=use_cache
        )
    tokens = run_generate_variant(model, prompt[0].tolist(), 14, use_kv_cache=use_cache)
    assert tokens == expected[0, 6:].tolist()


def test_parameters_and_cache_accounting(loaded) -> None:
    hf, _, config = loaded
    accounting = run_variant_accounting(config, batch_size=1, seq_len=8)
    assert sum(accounting["parameters"].values()) == sum(p.numel() for p in hf.parameters())
    # per layer: the latent (12), the RoPE key (4) and the indexer's key (8)
    assert accounting["kv_cache_elements_per_token"] == 3 * (12 + 4 + 8)


def test_indexer_flops_match_flop_counter(loaded) -> None:
    """The indexer's projections and its score of every (query, key) pair per head."""
    _, model, config = loaded
    with FlopCounterMode(display=False) as counter:
        model(token_ids(seq=SEQ))
    by_module = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    projections = [name for name in by_module if ".attn.indexer." in name]
    assert len(projections) == 3 * 3  # wq_b, wk, weights_proj in each layer
    predicted = run_variant_accounting(config, 2, SEQ)["forward_flops"]
    assert sum(predicted.values()) == counter.get_total_flops()
    pairs = 3 * 2 * SEQ * SEQ * 16 * 2 * (8 + 1)  # layers, batch, pairs, heads, q.k and weighting
    assert predicted["indexer"] == sum(by_module[name] for name in projections) + pairs


def test_export_loads_in_transformers_with_the_same_logits(loaded, tmp_path: Path) -> None:
    _, model, config = loaded
    run_save_pretrained(model, config, tmp_path / "out", "deepseek_v32")
    back = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "out", attn_implementation="eager"
    ).eval()
    ids = token_ids(seq=SEQ)
    with torch.no_grad():
        assert (back(ids).logits - model(ids)).abs().max() < TOLERANCE


def test_deepseek_v3_2_builder_has_the_published_structure() -> None:
    """HF's DeepseekV32Config defaults are V3.2's published sizes (without its yarn)."""
    published = run_config_from_hf(transformers.DeepseekV32Config())
    ours = get_deepseek_v3_2_config()
    assert ours.pop("rope_scaling")["rope_type"] == "yarn"
    assert ours == published | {"context_length": ours["context_length"]}
    small = get_deepseek_v3_2_config(index_topk=16, num_layers=4, dense_layers=[0])
    assert (small["index_topk"], small["index_heads"], small["num_layers"]) == (16, 64, 4)
    with pytest.raises(ValueError, match="q_lora_rank"):
        get_deepseek_v3_2_config(q_lora_rank=None)


@pytest.mark.parametrize("mscale", [1.0, 0.707], ids=["published", "scaled-rotations"])
def test_published_yarn_rotates_the_indexer_like_hf(tmp_path: Path, mscale: float) -> None:
    """V3.2's published yarn (factor 40); with mscale != mscale_all_dim the cosines and sines,
    so the indexer's rotated dims too, are scaled."""
    yarn = dict(
        rope_type="yarn",
        factor=40.0,
        original_max_position_embeddings=4096,
        beta_fast=32,
        beta_slow=1,
        mscale=mscale,
        mscale_all_dim=1.0,
    )
    hf = hf_model(
        transformers.DeepseekV32Config,
        vocab_size=97,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        attn_implementation="eager",
        q_lora_rank=16,
        kv_lora_rank=12,
        qk_rope_head_dim=8,
        qk_nope_head_dim=6,
        v_head_dim=5,
        first_k_dense_replace=2,
        index_topk=5,
        index_n_heads=16,
        index_head_dim=8,
        rope_parameters=dict(yarn, rope_theta=10000.0),
    )
    hf.save_pretrained(tmp_path)
    model, config, _, _ = run_load_pretrained(tmp_path)
    assert config["rope_scaling"] == yarn
    ids = token_ids(seq=40)
    with torch.no_grad():
        assert (model(ids) - hf(ids).logits).abs().max() < TOLERANCE

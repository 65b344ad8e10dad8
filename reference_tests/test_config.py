"""``ModelConfig`` and ``VariantConfig``: JSON round trips and clear errors for impossible shapes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from cs336_basics.checkpoint import model_from_checkpoint, read_checkpoint
from cs336_basics.config import ModelConfig
from cs336_basics.variants.config import (
    AttentionConfig,
    LatentAttentionConfig,
    MoEConfig,
    SparseAttentionConfig,
    VariantConfig,
)

FIXTURE_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "model" / "config.json"
BASE = dict(vocab_size=512, context_length=16, d_model=64, num_layers=3, num_heads=4, d_ff=128)


def test_model_config_round_trips_through_json(tmp_path):
    config = ModelConfig(**BASE)
    path = tmp_path / "config.json"
    config.to_json(path)
    assert ModelConfig.from_json(path) == config
    assert type(ModelConfig.from_json(config.to_json())) is ModelConfig
    assert (
        json.loads(path.read_text())
        == config.to_dict()
        == BASE
        | {
            "rope_theta": 10000.0,
            "norm_eps": 1e-5,
        }
    )


def test_fixture_config_with_variant_fields_reads_as_a_variant_config():
    """``config.json`` lists every variant switch (all off) in the flat format; it reads back
    as a VariantConfig of the handout's parts and flattens back to the same fields."""
    text = FIXTURE_CONFIG.read_text()
    config = ModelConfig.from_json(text)
    assert type(config) is VariantConfig
    assert config.attention == AttentionConfig() and config.ffn == "swiglu"
    assert json.dumps(config.flat_dict(), indent=2, sort_keys=True) + "\n" == text


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(num_heads=3), "num_heads"),
        (dict(d_model=60, num_heads=4), "even"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(rope_theta=0.0), "rope_theta"),
    ],
)
def test_model_config_rejects_impossible_values(change, field):
    with pytest.raises((ValueError, TypeError), match=field):
        ModelConfig(**{**BASE, **change})


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(d_model=60, num_heads=4, position_encoding="rope"), "even"),
        (dict(norm_placement="middle"), "norm_placement"),
        (dict(ffn="swish"), "ffn"),
        (dict(ffn="moe"), "MoEConfig"),
        (dict(attention="mla"), "LatentAttentionConfig"),
        (dict(attention=AttentionConfig(num_kv_heads=3)), "multiple of num_kv_heads=3"),
        (dict(bias=True, attention=LatentAttentionConfig()), "no biases"),
        (dict(ffn=MoEConfig(dense_layers=[3], dense_d_ff=8)), "below num_layers=3"),
    ],
)
def test_variant_config_rejects_impossible_values(change, field):
    with pytest.raises(ValueError, match=field):
        VariantConfig(**{**BASE, **change})


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: AttentionConfig(qk_norm=1), "qk_norm"),
        (lambda: MoEConfig(top_k=9), "top_k=9 cannot exceed num_experts=8"),
        (lambda: MoEConfig(router_scoring="tanh"), "router_scoring"),
        (lambda: LatentAttentionConfig(qk_rope_head_dim=3), "qk_rope_head_dim must be even"),
        (lambda: LatentAttentionConfig(sparse=SparseAttentionConfig(4)), "needs q_lora_rank"),
    ],
)
def test_sections_check_their_own_fields(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_a_setting_of_another_kind_cannot_be_written_down():
    """MLA's widths do not exist on multi-head attention, nor expert counts on a dense MLP."""
    with pytest.raises(TypeError, match="kv_lora_rank"):
        AttentionConfig(kv_lora_rank=16)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="num_experts"):
        VariantConfig(**BASE, num_experts=4)  # type: ignore[call-arg]
    nested = VariantConfig(**BASE).to_dict()
    nested["attention"]["kv_lora_rank"] = 16
    with pytest.raises(ValueError, match="attention kind 'mha': kv_lora_rank"):
        VariantConfig.from_dict(nested)


def test_sectioned_json_names_each_section_kind(tmp_path):
    config = VariantConfig(
        **BASE,
        attention=LatentAttentionConfig(q_lora_rank=16, sparse=SparseAttentionConfig(4)),
        ffn=MoEConfig(num_experts=4, dense_layers=[0], dense_d_ff=32),
    )
    config.to_json(tmp_path / "config.json")
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["attention"]["kind"] == "mla" and written["ffn"]["kind"] == "moe"
    assert written["attention"]["sparse"] == {
        "index_topk": 4,
        "index_heads": 4,
        "index_head_dim": 16,
    }
    assert "num_experts" not in written and "kv_lora_rank" not in written  # no flat switches
    assert ModelConfig.from_json(tmp_path / "config.json") == config
    # a section left out is the default one
    assert VariantConfig.from_dict({**BASE, "norm": "layernorm"}).attention == AttentionConfig()


# Written by the code before the config had sections (commit 2bd2ea3), and kept as they were.
FLAT_SAVED = Path(__file__).resolve().parent / "data" / "flat_variant_configs"


def test_saved_flat_configs_still_load():
    """Each saved flat file reads into the sections its switches describe (checked field by
    field against the file) and flattens back to exactly the file's fields."""
    for path in sorted(FLAT_SAVED.glob("*.json")):
        flat = json.loads(path.read_text())
        config = ModelConfig.from_json(path)
        assert isinstance(config, VariantConfig), path.name
        assert config.flat_dict() == flat, path.name
        assert config.attention.kind == flat["attention"]
        assert config.ffn_kind == flat["ffn"]
    deepseek = ModelConfig.from_json(FLAT_SAVED / "mla_sparse_deepseek_moe.json")
    assert deepseek.mla == LatentAttentionConfig(
        q_lora_rank=16,
        kv_lora_rank=8,
        qk_rope_head_dim=4,
        qk_nope_head_dim=6,
        v_head_dim=8,
        sparse=SparseAttentionConfig(index_topk=3, index_heads=2, index_head_dim=8),
    )
    assert deepseek.moe == MoEConfig(
        num_experts=4,
        top_k=2,
        normalize_topk=False,
        capacity_factor=1.5,
        dense_layers=[0],
        dense_d_ff=40,
        num_shared_experts=1,
        routed_scaling=2.5,
        expert_groups=[2, 1],
        router_scoring="sigmoid",
        aux_loss_coef=0.02,
    )
    gqa = ModelConfig.from_json(FLAT_SAVED / "gqa_qk_norm_head_dim.json")
    assert gqa.mha == AttentionConfig(num_kv_heads=2, head_dim=12, qk_norm=True, qkv_bias=True)
    assert gqa.tie_embeddings and gqa.rope_scaling == {"rope_type": "linear", "factor": 2.0}


def test_saved_flat_checkpoint_rebuilds_the_same_model():
    """A checkpoint saved with a flat config rebuilds its model, which gives the logits the
    code of that time computed (stored beside the weights)."""
    checkpoint = FLAT_SAVED / "mla_sparse_deepseek_moe.pt"
    model = model_from_checkpoint(checkpoint).eval()
    saved = read_checkpoint(checkpoint)["extra"]
    with torch.no_grad():
        torch.testing.assert_close(model(saved["input_ids"]), saved["logits"])


def test_flat_switches_given_on_top_of_sections_win():
    """A config file's sections with command-line flags (flat switches) over them."""
    nested = VariantConfig(
        **BASE, attention=LatentAttentionConfig(q_lora_rank=16, kv_lora_rank=8)
    ).to_dict()
    config = VariantConfig.from_dict({**nested, "kv_lora_rank": 4, "ffn": "moe", "top_k": 1})
    assert config.attention == LatentAttentionConfig(q_lora_rank=16, kv_lora_rank=4)
    assert config.ffn == MoEConfig(top_k=1)
    flags = {field.name for field in dataclasses.fields(VariantConfig.flag_class())}
    assert {"attention", "kv_lora_rank", "index_topk", "num_experts", "qk_norm", "bias"} <= flags


def test_flat_switches_of_a_section_that_is_off():
    """The flat format wrote every switch: those it ignored while their section was off are
    dropped; those it rejected still are."""
    flat = {**BASE, "attention": "mha", "kv_lora_rank": 16, "num_experts": 3}
    assert VariantConfig.from_dict(flat) == VariantConfig(**BASE)
    with pytest.raises(ValueError, match="dense_layers only applies with ffn='moe'"):
        VariantConfig.from_dict({**BASE, "dense_layers": [0], "dense_d_ff": 8})
    with pytest.raises(ValueError, match="qk_norm does not apply with attention='mla'"):
        VariantConfig.from_dict({**BASE, "attention": "mla", "qk_norm": True})
    with pytest.raises(ValueError, match="index_topk .* needs attention='mla'"):
        VariantConfig.from_dict({**BASE, "index_topk": 4})
    mla = {**BASE, "attention": "mla", "num_kv_heads": BASE["num_heads"]}
    assert VariantConfig.from_dict(mla).attention == LatentAttentionConfig()


def test_variant_config_allows_odd_heads_without_rope():
    assert VariantConfig(**{**BASE, "d_model": 60, "num_heads": 4, "position_encoding": "none"})


def test_model_config_rejects_unknown_and_missing_fields():
    with pytest.raises(ValueError, match="unknown ModelConfig field.*n_layer"):
        ModelConfig.from_dict({**BASE, "n_layer": 12})
    with pytest.raises(ValueError, match="missing required field.*d_ff"):
        ModelConfig.from_dict({k: v for k, v in BASE.items() if k != "d_ff"})


def test_model_config_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        ModelConfig.from_json(tmp_path / "nope.json")

"""MoE checkpoint directories as they are published: every directory here is written by
``transformers``' own ``save_pretrained`` (one tensor per expert, as on the hub, or stacked with
``save_original_format=False``), never by hand, and read back by ``load_pretrained``; what
``save_pretrained`` of ours writes is compared, name by name, with what ``transformers`` writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from .adapters import get_variant_lm, run_generate_variant, run_load_pretrained, run_save_pretrained
from .test_parity_hf import LLAMA, hf_model, token_ids
from .test_parity_published import deepseek_v2_moe, deepseek_v3_moe

TOLERANCE = 2e-5


def mixtral() -> torch.nn.Module:
    return hf_model(transformers.MixtralConfig, **LLAMA, num_local_experts=4, num_experts_per_tok=2)


def qwen3_moe() -> torch.nn.Module:
    """Three layers, the middle one dense (``mlp_only_layers``)."""
    return hf_model(
        transformers.Qwen3MoeConfig,
        **{**LLAMA, "num_hidden_layers": 3},
        head_dim=8,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=24,
        norm_topk_prob=True,
        mlp_only_layers=[1],
    )


MODELS = {  # family -> a tiny random HF model of it
    "mixtral": mixtral,
    "qwen3_moe": qwen3_moe,
    "deepseek_v2": lambda: deepseek_v2_moe(topk_method="group_limited_greedy"),
    "deepseek_v3": deepseek_v3_moe,
}
# One per-expert tensor name of the last layer (layer 1 or 2), as the hub's checkpoints spell it.
PUBLISHED_NAMES = {
    "mixtral": "model.layers.1.block_sparse_moe.experts.3.w2.weight",
    "qwen3_moe": "model.layers.2.mlp.experts.3.up_proj.weight",
    "deepseek_v2": "model.layers.2.mlp.experts.7.gate_proj.weight",
    "deepseek_v3": "model.layers.2.mlp.gate.e_score_correction_bias",
}


def tensor_names(directory: Path) -> set[str]:
    names = set()
    for path in directory.glob("*.safetensors"):
        with safe_open(path, "pt") as file:
            names |= set(file.keys())
    return names


def assert_same_as_hf(model: torch.nn.Module, hf: torch.nn.Module) -> None:
    """Logits within float32 tolerance and ten greedy tokens equal (HF's cache vs ours)."""
    ids = token_ids(hf.config.vocab_size)
    prompt = ids[:1, :5]
    with torch.no_grad():
        assert (model(ids) - hf(ids).logits).abs().max() < TOLERANCE
        expected = hf.generate(prompt, max_new_tokens=10, do_sample=False, eos_token_id=None)
    assert run_generate_variant(model, prompt[0].tolist(), 10, use_kv_cache=True) == (
        expected[0, 5:].tolist()
    )


@pytest.mark.parametrize("family", MODELS)
def test_per_expert_directory_written_by_transformers_loads(tmp_path: Path, family: str) -> None:
    hf = MODELS[family]()
    hf.save_pretrained(tmp_path)
    names = tensor_names(tmp_path)
    assert PUBLISHED_NAMES[family] in names
    assert not any("gate_up_proj" in name for name in names)  # what the hub holds, not stacked
    model, _, loaded_family, _ = run_load_pretrained(tmp_path)
    assert loaded_family == family
    assert_same_as_hf(model, hf)


@pytest.mark.parametrize("family", ["mixtral", "deepseek_v3"])
def test_stacked_directory_still_loads(tmp_path: Path, family: str) -> None:
    hf = MODELS[family]()
    hf.save_pretrained(tmp_path, save_original_format=False)
    assert any(name.endswith("mlp.experts.gate_up_proj") for name in tensor_names(tmp_path))
    model, *_ = run_load_pretrained(tmp_path)
    assert_same_as_hf(model, hf)


def test_sharded_per_expert_directory_loads(tmp_path: Path) -> None:
    hf = deepseek_v3_moe()
    hf.save_pretrained(tmp_path, max_shard_size="20KB")
    weight_map = json.loads(
        (tmp_path / "model.safetensors.index.json").read_text(encoding="utf-8")
    )["weight_map"]
    assert len(set(weight_map.values())) > 2
    assert "model.layers.1.mlp.experts.0.down_proj.weight" in weight_map
    model, *_ = run_load_pretrained(tmp_path)
    assert_same_as_hf(model, hf)


def test_a_missing_expert_is_named(tmp_path: Path) -> None:
    mixtral().save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["model.layers.1.block_sparse_moe.experts.2.w3.weight"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"layers\.1\.block_sparse_moe\.experts\.2\.w3\.weight"):
        run_load_pretrained(tmp_path)


@pytest.mark.parametrize("family", MODELS)
def test_export_writes_what_transformers_writes(tmp_path: Path, family: str) -> None:
    """Our directory holds exactly the tensor names of ``transformers``' ``save_pretrained`` for
    the same config, and ``from_pretrained`` gives our logits."""
    hf = MODELS[family]()
    hf.save_pretrained(tmp_path / "theirs")
    _, config, _, _ = run_load_pretrained(tmp_path / "theirs")
    model = get_variant_lm(config, seed=2)
    for name, tensor in model.state_dict().items():
        if name.endswith("score_correction_bias"):  # zero at init: make it matter
            tensor.copy_(0.3 * torch.randn(tensor.shape))
    run_save_pretrained(model, config, tmp_path / "ours", family)
    assert tensor_names(tmp_path / "ours") == tensor_names(tmp_path / "theirs")
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ours").eval()
    assert_same_as_hf(model, back)

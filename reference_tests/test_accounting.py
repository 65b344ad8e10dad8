"""Accounting against the real model: parameter counts and FlopCounterMode on a forward pass; the
KV-cache line of ``cs336 accounting`` for the handout's model and for a variant config.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from cs336_basics.accounting import (
    PRESETS,
    forward_flops,
    max_batch_size,
    model_flops_utilization,
    parameter_counts,
    training_flops_per_token,
    training_memory,
)
from cs336_basics.builder import build_model
from cs336_basics.config import ModelConfig
from cs336_basics.runner.cli import main

BASE = dict(vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48)
VARIANTS = [
    {},
    {"num_kv_heads": 2},
    {"num_kv_heads": 1},
    {"bias": True},
    {"qk_norm": True},
    {"tie_embeddings": True},
    {"ffn": "gelu", "bias": True},
    {"ffn": "silu"},
    {"norm": "layernorm"},
    {"position_encoding": "learned"},
    {"norm_placement": "post"},
    {"norm_placement": "none"},
]


@pytest.mark.parametrize(
    "variant", VARIANTS, ids=lambda v: ",".join(f"{k}={x}" for k, x in v.items()) or "base"
)
def test_accounting_parameter_count_matches_model(variant):
    config = ModelConfig.from_dict({**BASE, **variant})
    model = build_model(config)
    assert sum(parameter_counts(config).values()) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("variant", [{}, {"num_kv_heads": 2}, {"ffn": "relu"}])
def test_accounting_matmul_flops_match_flop_counter(variant):
    config = ModelConfig.from_dict({**BASE, **variant})
    model = build_model(config)
    batch_size, seq_len = 3, 12
    with FlopCounterMode(display=False) as counter:
        model(torch.randint(0, config.vocab_size, (batch_size, seq_len)))
    predicted = forward_flops(config, batch_size, seq_len)
    assert sum(predicted.values()) == counter.get_total_flops()
    by_module = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    layers = range(config.num_layers)
    assert predicted["lm_head"] == by_module[f"{type(model).__name__}.lm_head"]
    assert predicted["ffn"] == sum(
        by_module[f"{type(model).__name__}.layers.{i}.ffn"] for i in layers
    )
    for projection in ("q_proj", "k_proj", "v_proj", "output_proj"):
        assert predicted[projection] == sum(
            by_module[f"{type(model).__name__}.layers.{i}.attn.{projection}"] for i in layers
        )
    attention_matmuls = sum(
        by_module[f"{type(model).__name__}.layers.{i}.attn"]
        - sum(
            by_module[f"{type(model).__name__}.layers.{i}.attn.{p}"]
            for p in ("q_proj", "k_proj", "v_proj", "output_proj")
        )
        for i in layers
    )
    assert predicted["attention_scores"] + predicted["attention_values"] == attention_matmuls


def test_accounting_training_flops_and_mfu():
    config = PRESETS["tinystories"]
    per_token = training_flops_per_token(config)
    assert per_token == 3 * sum(forward_flops(config, 1).values()) / config.context_length
    # 6N is the usual rule of thumb (N non-embedding parameters); attention adds a little on top
    non_embedding = (
        sum(parameter_counts(config).values()) - parameter_counts(config)["token_embeddings"]
    )
    assert 6 * non_embedding < per_token < 1.5 * 6 * non_embedding
    assert model_flops_utilization(config, 1000.0, per_token * 4000.0) == pytest.approx(0.25)


def test_accounting_memory_estimate():
    config = PRESETS["gpt2-small"]
    num_parameters = sum(parameter_counts(config).values())
    one, two = training_memory(config, 1), training_memory(config, 2)
    assert one.parameters == one.gradients == 4 * num_parameters
    assert one.optimizer_state == 8 * num_parameters
    assert two.activations == 2 * one.activations and two.parameters == one.parameters
    in_bf16 = training_memory(config, 1, bytes_per_value=2)
    assert 2 * in_bf16.total == one.total
    fits = max_batch_size(config, 80 * 2**30)
    assert (
        training_memory(config, fits).total <= 80 * 2**30 < training_memory(config, fits + 1).total
    )


def test_accounting_cli(capsys, tmp_path):
    from cs336_basics.runner.cli import main

    assert main(["accounting", "--preset", "gpt2-xl", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["total_parameters"] == 2_127_057_600
    (tmp_path / "model.json").write_text(ModelConfig(**BASE).to_json())
    assert (
        main(
            [
                "accounting",
                "--config",
                str(tmp_path / "model.json"),
                "--tokens-per-second",
                "1e4",
                "--peak-tflops",
                "1",
            ]
        )
        == 0
    )
    assert "MFU" in capsys.readouterr().out
    assert main(["accounting", "--all-presets"]) == 0
    assert "gpt2-large" in capsys.readouterr().out
    (tmp_path / "partial.json").write_text(json.dumps({"vocab_size": 100}))
    assert main(["accounting", "--config", str(tmp_path / "partial.json")]) == 2
    assert "missing required field" in capsys.readouterr().err


def test_accounting_measured_mfu(capsys, tmp_path):
    from cs336_basics.runner.cli import main

    (tmp_path / "model.json").write_text(ModelConfig(**BASE).to_json())
    assert (
        main(
            [
                "accounting",
                "--config",
                str(tmp_path / "model.json"),
                "--batch-size",
                "2",
                "--measure",
                "1",
                "--device",
                "cpu",
                "--peak-tflops",
                "1",
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["tokens_per_second"] > 0
    assert result["mfu"] == pytest.approx(
        result["tokens_per_second"] * result["training_flops_per_token"] / 1e12
    )


def test_accounting_cli_kv_cache_of_a_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["accounting", "--preset", "gpt2-small", "--json", "--bytes-per-value", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    # layers x (K and V) x d_model x bf16
    assert result["kv_cache_bytes_per_token"] == 12 * 2 * 768 * 2
    assert result["kv_cache_bytes"] == 1024 * result["kv_cache_bytes_per_token"]


def test_accounting_cli_reads_a_variant_config(tmp_path, capsys: pytest.CaptureFixture[str]):
    config = dict(vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48)
    path = tmp_path / "gqa.json"
    path.write_text(json.dumps({**config, "num_kv_heads": 1}))
    assert main(["accounting", "--config", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["kv_cache_bytes_per_token"] == 2 * 2 * 1 * 8 * 4  # layers, K/V, 1 head of 8

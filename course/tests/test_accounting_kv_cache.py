"""The KV-cache line of ``cs336 accounting`` for the handout's model and for a variant config."""

from __future__ import annotations

import json

import pytest

from cs336_basics.runner.cli import main

pytestmark = pytest.mark.instructor


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

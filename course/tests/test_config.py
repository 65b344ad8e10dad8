"""``ModelConfig`` and ``VariantConfig``: JSON round trips and clear errors for impossible shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cs336_basics.config import ModelConfig
from cs336_basics.variants.config import VariantConfig

pytestmark = pytest.mark.instructor

FIXTURE_CONFIG = Path(__file__).resolve().parents[2] / "fixtures" / "model" / "config.json"
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
    """``config.json`` lists every variant switch (all off); it reads back as a VariantConfig
    and writes back byte for byte."""
    text = FIXTURE_CONFIG.read_text()
    config = ModelConfig.from_json(text)
    assert type(config) is VariantConfig
    assert config.to_json() == text
    assert config.to_dict() == json.loads(text)


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
        (dict(qk_norm=1), "qk_norm"),
    ],
)
def test_variant_config_rejects_impossible_values(change, field):
    with pytest.raises((ValueError, TypeError), match=field):
        VariantConfig(**{**BASE, **change})


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

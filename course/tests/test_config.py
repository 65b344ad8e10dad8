"""``ModelConfig``: JSON round trips and clear errors for impossible shapes."""

from __future__ import annotations

import json

import pytest

from cs336_basics.config import ModelConfig

pytestmark = pytest.mark.instructor

BASE = dict(vocab_size=512, context_length=16, d_model=64, num_layers=3, num_heads=4, d_ff=128)


def test_transformer_lm_config_round_trips_through_json(tmp_path, model_config):
    config = ModelConfig.from_dict(model_config)
    path = tmp_path / "config.json"
    config.to_json(path)
    assert ModelConfig.from_json(path) == config
    assert ModelConfig.from_json(config.to_json()) == config
    assert json.loads(path.read_text()) == config.to_dict()


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(num_heads=3), "num_heads"),
        (dict(d_model=60, num_heads=4, position_encoding="rope"), "even"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(norm_placement="middle"), "norm_placement"),
        (dict(ffn="swish"), "ffn"),
    ],
)
def test_transformer_lm_config_rejects_impossible_values(change, field):
    with pytest.raises((ValueError, TypeError), match=field):
        ModelConfig(**{**BASE, **change})


def test_transformer_lm_config_rejects_unknown_and_missing_fields():
    with pytest.raises(ValueError, match="unknown ModelConfig field.*n_layer"):
        ModelConfig.from_dict({**BASE, "n_layer": 12})
    with pytest.raises(ValueError, match="missing required field.*d_ff"):
        ModelConfig.from_dict({k: v for k, v in BASE.items() if k != "d_ff"})


def test_transformer_lm_config_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        ModelConfig.from_json(tmp_path / "nope.json")

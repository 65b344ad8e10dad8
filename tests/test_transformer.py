"""The Transformer block and LM: snapshots, truncated inputs, prefix consistency; dtype and
error handling are advice."""

from __future__ import annotations

import pytest
import torch

from .adapters import run_transformer_block, run_transformer_lm
from .expect import raises_an_error
from .hints import dtype_kept


def block_weights(state_dict: dict[str, torch.Tensor], layer: int = 0) -> dict[str, torch.Tensor]:
    prefix = f"layers.{layer}."
    return {k.removeprefix(prefix): v for k, v in state_dict.items() if k.startswith(prefix)}


def lm_args(config: dict) -> tuple:
    keys = (
        "vocab_size",
        "context_length",
        "d_model",
        "num_layers",
        "num_heads",
        "d_ff",
        "rope_theta",
    )
    return tuple(config[k] for k in keys)


def block_args(config: dict) -> tuple:
    return (
        config["d_model"],
        config["num_heads"],
        config["d_ff"],
        config["context_length"],
        config["rope_theta"],
    )


def test_transformer_block(snapshot, inputs, state_dict, model_config):
    out = run_transformer_block(
        *block_args(model_config), block_weights(state_dict), inputs["in_embeddings"]
    )
    snapshot.assert_match(out, "transformer_block")


def test_transformer_lm(snapshot, inputs, state_dict, model_config):
    out = run_transformer_lm(*lm_args(model_config), state_dict, inputs["in_indices"])
    snapshot.assert_match(out, "transformer_lm")


def test_transformer_lm_truncated_input(snapshot, inputs, state_dict, model_config):
    ids = inputs["in_indices"][:, : model_config["context_length"] // 4]
    snapshot.assert_match(
        run_transformer_lm(*lm_args(model_config), state_dict, ids), "transformer_lm_truncated"
    )


def test_transformer_lm_prefix_logits_match_full_sequence(inputs, state_dict, model_config):
    ids = inputs["in_indices"]
    full = run_transformer_lm(*lm_args(model_config), state_dict, ids)
    for length in (1, 5, ids.shape[1]):
        prefix = run_transformer_lm(*lm_args(model_config), state_dict, ids[:, :length])
        torch.testing.assert_close(prefix, full[:, :length])


@pytest.mark.robustness
def test_transformer_lm_bfloat16(inputs, state_dict, model_config):
    bf16 = {k: v.bfloat16() for k, v in state_dict.items()}
    out = run_transformer_lm(*lm_args(model_config), bf16, inputs["in_indices"])
    assert not dtype_kept(out, torch.bfloat16), dtype_kept(out, torch.bfloat16)
    reference = run_transformer_lm(*lm_args(model_config), state_dict, inputs["in_indices"])
    # bfloat16 keeps ~3 significant digits; the argmax of the logits should rarely move.
    agreement = (out.float().argmax(-1) == reference.argmax(-1)).float().mean()
    assert agreement > 0.9


@pytest.mark.robustness
def test_transformer_lm_rejects_too_long_input(state_dict, model_config):
    ids = torch.zeros(1, model_config["context_length"] + 1, dtype=torch.long)
    with raises_an_error():
        run_transformer_lm(*lm_args(model_config), state_dict, ids)


@pytest.mark.robustness
@pytest.mark.parametrize("kind", ["missing", "unexpected", "shape"])
def test_transformer_lm_state_dict_errors_name_the_key(inputs, state_dict, model_config, kind):
    key = "layers.1.attn.k_proj.weight"
    if kind == "missing":
        del state_dict[key]
    elif kind == "unexpected":
        key = "layers.1.attn.bias"
        state_dict[key] = torch.zeros(1)
    else:
        state_dict[key] = state_dict[key][:, :-1]
    with raises_an_error(match=key.replace(".", r"\.")):
        run_transformer_lm(*lm_args(model_config), state_dict, inputs["in_indices"])

"""The Transformer block and LM: snapshots, truncated inputs, prefix consistency; dtype and
error handling are advice."""

from __future__ import annotations

import pytest
import torch

from .adapters import (
    run_embedding,
    run_linear,
    run_rmsnorm,
    run_transformer_block,
    run_transformer_lm,
)
from .cases.model import truncated_length
from .expect import raises_an_error
from .hints import dtype_kept
from .localize import graded_case_located


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


@graded_case_located("transformer_block")
def test_transformer_block(snapshot, inputs, state_dict, model_config):
    out = run_transformer_block(
        *block_args(model_config), block_weights(state_dict), inputs["in_embeddings"]
    )
    snapshot.assert_match(out, "transformer_block")


@graded_case_located("transformer_lm")
def test_transformer_lm(snapshot, inputs, state_dict, model_config):
    out = run_transformer_lm(*lm_args(model_config), state_dict, inputs["in_indices"])
    snapshot.assert_match(out, "transformer_lm")


def test_transformer_lm_final_norm_takes_rmsnorms_eps(inputs, state_dict, model_config):
    # With each sublayer's output projection zeroed every block returns its input, so the LM is
    # lm_head(ln_final(embedding)), here compared with your own layers. Small embeddings make the
    # final norm's eps show (1e-5, RMSNorm's), as the graded cases' other weights can.
    weights = {
        name: torch.zeros_like(w) if name.endswith(("output_proj.weight", "w2.weight")) else w
        for name, w in state_dict.items()
    }
    weights["token_embeddings.weight"] = 0.01 * state_dict["token_embeddings.weight"]
    vocab, d_model, ids = model_config["vocab_size"], model_config["d_model"], inputs["in_indices"]
    embedded = run_embedding(vocab, d_model, weights["token_embeddings.weight"], ids)
    normed = run_rmsnorm(d_model, 1e-5, weights["ln_final.weight"], embedded)
    torch.testing.assert_close(
        run_transformer_lm(*lm_args(model_config), weights, ids),
        run_linear(d_model, vocab, weights["lm_head.weight"], normed),
        msg=lambda message: (
            message + "\nhint: with every block returning its input, your LM "
            "differs from your lm_head(run_rmsnorm(eps=1e-5)(embedding)): check the final norm "
            "(ln_final, with RMSNorm's eps 1e-5) and the LM head"
        ),
    )


def test_transformer_lm_truncated_input(snapshot, inputs, state_dict, model_config):
    ids = inputs["in_indices"][:, : truncated_length(model_config["context_length"])]
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

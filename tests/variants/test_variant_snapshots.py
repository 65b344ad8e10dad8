"""Frozen snapshots of the architecture-variant components (``course/cases/variants.py``).

Each snapshot's expected output was computed in float64 from the equations, independently of
``cs336_basics``; a mismatch names the likely bug when it matches a catalogued mistake.
"""

from __future__ import annotations

import torch

from .adapters import (
    run_decoder_layer,
    run_encoder_layer,
    run_feedforward,
    run_grouped_query_attention,
    run_layernorm,
    run_mixture_of_experts,
    run_multihead_latent_attention,
    run_sinusoidal_positions,
)
from .variant_weights import (
    MLA_CONFIG,
    NUM_EXPERTS,
    NUM_HEADS,
    NUM_KV_HEADS,
    TOP_K,
    decoder_layer_weights,
    encoder_layer_weights,
    gelu_weights,
    gqa_weights,
    layernorm_weights,
    mla_weights,
    moe_weights,
)


def sequence_positions(x: torch.Tensor) -> torch.Tensor:
    return torch.arange(x.shape[1]).expand(x.shape[0], -1)


def test_gqa_snapshot(snapshot, inputs, state_dict, model_config):
    x = inputs["in_embeddings"]
    out = run_grouped_query_attention(
        model_config["d_model"],
        NUM_HEADS,
        NUM_KV_HEADS,
        model_config["context_length"],
        model_config["rope_theta"],
        gqa_weights(state_dict),
        x,
        sequence_positions(x),
    )
    snapshot.assert_match(out, "grouped_query_attention")


def test_qk_norm_snapshot(snapshot, inputs, state_dict, model_config):
    x = inputs["in_embeddings"]
    out = run_grouped_query_attention(
        model_config["d_model"],
        NUM_HEADS,
        NUM_KV_HEADS,
        model_config["context_length"],
        model_config["rope_theta"],
        gqa_weights(state_dict, qk_norm=True),
        x,
        sequence_positions(x),
        qk_norm=True,
    )
    snapshot.assert_match(out, "qk_norm_attention")


def test_layernorm_snapshot(snapshot, inputs, state_dict):
    gain, shift = layernorm_weights(state_dict)
    snapshot.assert_match(
        run_layernorm(gain.shape[0], 1e-5, gain, shift, inputs["in_embeddings"]), "layernorm"
    )


def test_gelu_position_wise_feedforward_snapshot(snapshot, inputs, state_dict, model_config):
    out = run_feedforward(
        model_config["d_model"],
        model_config["d_ff"],
        "gelu",
        gelu_weights(state_dict),
        inputs["in_embeddings"],
    )
    snapshot.assert_match(out, "gelu_feedforward")


def test_sinusoidal_position_snapshot(snapshot, inputs, model_config):
    out = run_sinusoidal_positions(
        model_config["d_model"], model_config["context_length"], inputs["token_positions"]
    )
    snapshot.assert_match(out, "sinusoidal_positions")


def test_mla_snapshot_expanded_and_latent_cached(snapshot, inputs, state_dict):
    x = inputs["in_embeddings"]
    for use_latent_cache in (False, True):
        out = run_multihead_latent_attention(
            MLA_CONFIG, mla_weights(state_dict), x, sequence_positions(x), use_latent_cache
        )
        snapshot.assert_match(out, "multihead_latent_attention")


def test_moe_snapshot(snapshot, inputs, state_dict, model_config):
    weights = moe_weights(state_dict)
    d_model, d_ff = model_config["d_model"], model_config["d_ff"]
    out, _ = run_mixture_of_experts(
        d_model, d_ff, NUM_EXPERTS, TOP_K, weights, inputs["in_embeddings"]
    )
    snapshot.assert_match(out, "mixture_of_experts")


def test_encoder_decoder_encoder_layer_snapshot(snapshot, inputs, state_dict):
    out = run_encoder_layer(
        64, NUM_HEADS, 128, 1e-5, encoder_layer_weights(state_dict), inputs["in_embeddings"]
    )
    snapshot.assert_match(out, "encoder_layer")


def test_encoder_decoder_decoder_layer_snapshot(snapshot, inputs, state_dict):
    memory = inputs["in_embeddings"]
    out = run_decoder_layer(
        64, NUM_HEADS, 128, 1e-5, decoder_layer_weights(state_dict), memory[:, :7].flip(1), memory
    )
    snapshot.assert_match(out, "decoder_layer")

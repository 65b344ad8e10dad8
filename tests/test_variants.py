"""Architecture variants of the one ``TransformerLM``: each checked against a naive or torch reference.

Parity against HF transformers lives in test_parity_hf.py; encoder-decoder in
test_encoder_decoder.py.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from cs336_basics.config import ModelConfig
from cs336_basics.kv_cache import kv_cache_elements_per_token
from cs336_basics.model import TransformerLM

from .adapters import (
    run_feedforward,
    run_grouped_query_attention,
    run_layernorm,
    run_mixture_of_experts,
    run_multihead_latent_attention,
    run_sinusoidal_positions,
    run_transformer_lm_variant,
)

TINY = dict(vocab_size=61, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48)

VARIANTS = {
    "mha": {},
    "gqa": dict(num_kv_heads=2),
    "mqa": dict(num_kv_heads=1),
    "qk_norm": dict(num_kv_heads=2, qk_norm=True),
    "mla": dict(attention="mla", kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5),
    "mla_q_lora": dict(attention="mla", q_lora_rank=16, kv_lora_rank=12, qk_rope_head_dim=4),
    "moe": dict(ffn="moe", num_experts=4, top_k=2),
    "layernorm_learned_position_gelu": dict(
        norm="layernorm", position_encoding="learned", ffn="gelu", bias=True, tie_embeddings=True
    ),
    "sinusoidal_position_relu": dict(position_encoding="sinusoidal", ffn="relu"),
    "post_norm_layernorm": dict(norm_placement="post", norm="layernorm"),
    "nope_position": dict(position_encoding="none"),
}


def tiny_model(seed: int = 0, **overrides) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(ModelConfig(**{**TINY, **overrides})).eval()


# --- KV cache: incremental decoding equals the full forward, for every decoder variant ------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_kv_cache_matches_full_forward(variant: str) -> None:
    model = tiny_model(**VARIANTS[variant])
    ids = torch.randint(0, TINY["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_kv_cache()
        pieces = [model(ids[:, :5], kv_cache=cache)]
        pieces += [model(ids[:, t : t + 1], kv_cache=cache) for t in range(5, 11)]
    assert cache.length == 11
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("variant", "per_layer"),
    [("mha", 2 * 4 * 8), ("gqa", 2 * 2 * 8), ("mqa", 2 * 1 * 8), ("mla", 12 + 4)],
)
def test_kv_cache_bytes_per_token(variant: str, per_layer: int) -> None:
    config = ModelConfig(**{**TINY, **VARIANTS[variant]})
    assert kv_cache_elements_per_token(config) == 2 * per_layer
    model = TransformerLM(config).eval()
    cache = model.new_kv_cache()
    with torch.no_grad():
        model(torch.zeros(3, 7, dtype=torch.long), kv_cache=cache)
    assert cache.num_bytes() == 3 * 7 * kv_cache_elements_per_token(config) * 4

"""Batched generation: several prompts of different lengths decoded at once, each row equal to
decoding its prompt alone (greedy), with and without the KV cache."""

from __future__ import annotations

import pytest
import torch

from .adapters import get_variant_lm, run_generate_batch_variant
from .decoding_cases import PROMPTS, greedy_alone, stops_and_expected

TINY = dict(vocab_size=61, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48)
VARIANTS = {
    "mha": {},
    "gqa": dict(num_kv_heads=2),
    "mla": dict(attention="mla", kv_lora_rank=12, qk_rope_head_dim=4),
    "learned_position": dict(position_encoding="learned"),
}


def tiny_model(variant: str) -> torch.nn.Module:
    # float64, so a batched matmul cannot flip a near-tie that the one-row matmul decides
    return get_variant_lm({**TINY, **VARIANTS[variant]}, seed=0).double()


@pytest.mark.parametrize("use_kv_cache", [True, False])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_batched_generation_equals_each_prompt_alone(variant: str, use_kv_cache: bool) -> None:
    model = tiny_model(variant)
    batched = run_generate_batch_variant(model, PROMPTS, 7, use_kv_cache)
    assert batched == [greedy_alone(model, prompt, 7) for prompt in PROMPTS]
    assert [len(tokens) for tokens in batched] == [7] * len(PROMPTS)


@pytest.mark.parametrize("use_kv_cache", [True, False])
def test_batched_generation_stops_each_row_at_its_own_stop_token(use_kv_cache: bool) -> None:
    model = tiny_model("gqa")
    stops, expected = stops_and_expected(model, PROMPTS, 8)
    assert run_generate_batch_variant(model, PROMPTS, 8, use_kv_cache, eos_ids=stops) == expected


@pytest.mark.parametrize("use_kv_cache", [True, False])
def test_batched_generation_respects_each_rows_context_window(use_kv_cache: bool) -> None:
    model = tiny_model("mha")
    prompts = [list(range(1, 15)), [4, 2], list(range(20, 40))]  # 14, 2 and 20 > 16 tokens
    batched = run_generate_batch_variant(model, prompts, 10, use_kv_cache)
    assert batched == [greedy_alone(model, prompt, 10) for prompt in prompts]
    assert [len(tokens) for tokens in batched] == [2, 10, 1]
